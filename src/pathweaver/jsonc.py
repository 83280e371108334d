"""Read JSON with comments and trailing commas (JSONC: VS Code's settings files, hand-edited client configs).

``strip`` removes ``//`` and ``/* */`` comments and commas before ``}`` or ``]`` outside strings, keeping every
string (``"http://x"``, ``"a // b"``, escaped quotes) intact, and says whether it removed anything, so a caller
that rewrites the file knows that comments will not survive.
"""

from __future__ import annotations

import json
from typing import Any

from pathweaver.errors import UserError


class JsoncError(UserError, ValueError):
    """The text is not JSON even after comments and trailing commas are removed."""


def strip(text: str) -> tuple[str, bool]:
    """``text`` without comments and trailing commas (line numbers kept), and whether anything was removed."""
    out: list[str] = []
    removed = False
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(text[i : j + 1])
            i = j + 1
        elif text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end
            removed = True
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            if end < 0:
                raise JsoncError("a /* comment is never closed")
            out.append("\n" * text.count("\n", i, end))  # keeps the line numbers of later errors true
            i = end + 2
            removed = True
        elif ch == ",":
            j = i + 1
            while j < n and (text[j].isspace() or text.startswith(("//", "/*"), j)):
                if text.startswith("//", j):
                    nl = text.find("\n", j)
                    j = n if nl < 0 else nl
                elif text.startswith("/*", j):
                    close = text.find("*/", j + 2)
                    j = n if close < 0 else close + 2
                else:
                    j += 1
            if j < n and text[j] in "}]":
                removed = True  # a trailing comma: drop it, keep what follows for the loop to handle
            else:
                out.append(ch)
            i += 1
        else:
            out.append(ch)
            i += 1
    return "".join(out), removed


def loads(text: str) -> tuple[Any, bool]:
    """Parse JSONC; returns the value and whether comments or trailing commas were present."""
    plain, removed = strip(text)
    try:
        return json.loads(plain), removed
    except json.JSONDecodeError as exc:
        raise JsoncError(f"not valid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}") from None
