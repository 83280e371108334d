"""Results per note: a top k holds k distinct notes (documents) unless fewer are relevant, each with its best chunk
and the ids of the note's other retrieved chunks that were merged into it (``ChunkHit.merged``)."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import TypeVar

from pathweaver.retrieval.types import ChunkHit, RetrievalResult

T = TypeVar("T")
# a method that returned fewer distinct notes than top_k is asked again for this many times more chunks, up to
# ``MAX_WIDENINGS`` times, so chunks of one note cannot crowd the other notes out of the slots
WIDEN_FACTOR = 3
MAX_WIDENINGS = 2


def first_per_key(items: Sequence[T], key: Callable[[T], Hashable], k: int) -> list[tuple[T, list[T]]]:
    """The first item of each key, best first, at most ``k``, each with the later items of its key."""
    groups: dict[Hashable, tuple[T, list[T]]] = {}
    for item in items:
        found = groups.get(key(item))
        if found is None:
            groups[key(item)] = (item, [])
        else:
            found[1].append(item)
    return list(groups.values())[:k]


def merge_by_note(hits: Sequence[ChunkHit], docs: Sequence[str], k: int) -> list[ChunkHit]:
    """``hits`` with every note's chunks merged into its best one (``merged``: the others' passage indices)."""
    kept = first_per_key(hits, lambda h: docs[h.passage], k)
    return [ChunkHit(best.passage, best.score, best.backfill, [h.passage for h in rest]) for best, rest in kept]


def distinct_notes(hits: Sequence[ChunkHit], docs: Sequence[str]) -> int:
    return len({docs[h.passage] for h in hits})


def per_note(run: Callable[[int], RetrievalResult], docs: Sequence[str], top_k: int) -> RetrievalResult:
    """``run(k)``'s result with its chunks merged per note: widened (``WIDEN_FACTOR``) while the chunks it gave
    fill their k slots with fewer than ``top_k`` notes, so a single-chunk-per-note corpus runs the method once."""
    k = top_k
    result = run(k)
    for _ in range(MAX_WIDENINGS):
        if len(result.chunks) < k or distinct_notes(result.chunks, docs) >= top_k:
            break
        k *= WIDEN_FACTOR
        result = run(k)
    result.chunks = merge_by_note(result.chunks, docs, top_k)
    if k != top_k:
        result.info["note_pool"] = k
    return result
