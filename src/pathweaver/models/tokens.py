"""Token ids and offsets from the model tokenizer's Rust backend, called directly.

A transformers "fast" tokenizer wraps a ``tokenizers.Tokenizer``; the wrapper converts every encoding to Python
lists and dicts and resets the backend's truncation per call, which is half its cost. We keep two private copies of the backend per
tokenizer (one truncating at the model's limit, one not), so no call of the wrapper elsewhere changes their
settings, and read the ids and offsets off the encodings: the same values the wrapper returns (tested). A
tokenizer without a Rust backend goes through the wrapper.
"""

from __future__ import annotations

import threading
from typing import Any
from weakref import WeakKeyDictionary

_copies: WeakKeyDictionary[Any, tuple[int, Any, Any]] = WeakKeyDictionary()
_lock = threading.Lock()


def _backends(tokenizer: Any, limit: int) -> tuple[Any, Any] | None:
    """(truncating at ``limit``, not truncating) copies of ``tokenizer``'s backend, or None without one."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        return None
    with _lock:
        got = _copies.get(tokenizer)
        if got is None or got[0] != limit:
            from tokenizers import Tokenizer

            capped, plain = Tokenizer.from_str(backend.to_str()), Tokenizer.from_str(backend.to_str())
            for copy in (capped, plain):
                copy.no_padding()
                copy.no_truncation()
            capped.enable_truncation(max_length=limit)
            got = (limit, capped, plain)
            _copies[tokenizer] = got
    return got[1], got[2]


def token_ids(tokenizer: Any, texts: list[str], limit: int) -> list[list[int]]:
    """Each text's ids with the special tokens, truncated to ``limit`` tokens (as the model sees it)."""
    backends = _backends(tokenizer, limit)
    if backends is None:
        return tokenizer(texts, add_special_tokens=True, truncation=True, max_length=limit, verbose=False)["input_ids"]
    return [enc.ids for enc in backends[0].encode_batch(texts)]


def offsets(tokenizer: Any, text: str, limit: int) -> list[tuple[int, int]]:
    """Character offsets ``(start, end)`` of each token of the whole ``text`` (no special tokens, no truncation)."""
    backends = _backends(tokenizer, limit)
    if backends is None:
        enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True, verbose=False)
        return [tuple(span) for span in enc["offset_mapping"]]
    return list(backends[1].encode(text, add_special_tokens=False).offsets)


def count(tokenizer: Any, text: str, limit: int) -> int:
    """How many tokens the whole ``text`` has (no special tokens, no truncation)."""
    backends = _backends(tokenizer, limit)
    if backends is None:
        return len(tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"])
    return len(backends[1].encode(text, add_special_tokens=False).ids)
