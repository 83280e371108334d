"""reStructuredText and plain text -> ``ParsedDocument``."""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath

from pathweaver.ingest.parsed import (
    ParsedDocument,
    _dedupe,
    decode_text,
    local_link_target,
    stem_title,
)

_RST_ADORN_CHARS = "=-~^\"'`:+*#_.<>"
_RST_ROLE_RE = re.compile(r":(\w[\w.-]*):`([^`]*)`")
_RST_LINK_RE = re.compile(r"`([^`<]*?)\s*<([^>]+)>`_{1,2}")
_RST_INLINE_RE = re.compile(r"(\*\*|\*|``)(\S(?:.*?\S)?)\1")
_RST_REF_RE = re.compile(r"`([^`]+)`_{1,2}|(\w+)__?(?!\w)")


def _is_adornment(line: str) -> bool:
    s = line.rstrip()
    return len(s) >= 3 and s[0] in _RST_ADORN_CHARS and s == s[0] * len(s)


def _rst_inline(line: str, links: list[str]) -> str:
    def role(m: re.Match[str]) -> str:
        body = m.group(2)
        inner = re.match(r"(.*?)\s*<([^>]+)>$", body)
        label, target = (inner.group(1), inner.group(2)) if inner else (body, body)
        if m.group(1) == "doc":
            links.append(PurePosixPath(target.strip()).name)
        return label or target

    def link(m: re.Match[str]) -> str:
        target = local_link_target(m.group(2))
        if target:
            links.append(target)
        return m.group(1) or m.group(2)

    line = _RST_ROLE_RE.sub(role, line)
    line = _RST_LINK_RE.sub(link, line)
    line = _RST_INLINE_RE.sub(lambda m: m.group(2), line)
    return _RST_REF_RE.sub(lambda m: m.group(1) or m.group(2), line)


def parse_rst(path: Path, data: bytes) -> ParsedDocument:
    lines = decode_text(data).split("\n")
    out: list[str] = []
    offset = 0
    headings: list[tuple[int, str]] = []
    links: list[str] = []
    i = 0
    while i < len(lines):
        raw = lines[i]
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        if _is_adornment(raw) and i + 2 < len(lines) and _is_adornment(lines[i + 2]) and lines[i + 1].strip():
            raw, nxt, i = lines[i + 1], lines[i + 2], i + 1  # over- and underlined title
        if (
            raw.strip()
            and not _is_adornment(raw)
            and _is_adornment(nxt)
            and len(nxt.rstrip()) >= len(raw.strip())
        ):
            heading = _rst_inline(raw.strip(), links)
            headings.append((offset, heading))
            out.append(heading)
            offset += len(heading) + 1
            i += 2
            continue
        if _is_adornment(raw) or raw.lstrip().startswith(".. "):
            i += 1
            continue
        line = _rst_inline(raw.strip(), links)
        if line or (out and out[-1]):
            out.append(line)
            offset += len(line) + 1
        i += 1
    title = headings[0][1] if headings else stem_title(path)
    return ParsedDocument("\n".join(out).rstrip(), title, headings, _dedupe(links))


# ---------------------------------------------------------------- plain text


def parse_txt(path: Path, data: bytes) -> ParsedDocument:
    return ParsedDocument(decode_text(data).strip("\n").rstrip(), stem_title(path), [], [])
