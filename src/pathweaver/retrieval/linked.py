"""Follow the notes' own links out of the top note (ours, issue 37).

A question about two notes is mostly found by its first note, and the second is one the first links to, or that
links to it (the Dataview format page says "see On Completion"; the Urgency page scores each priority). The second
note ranks low on the whole question, because half the question is about the first. So the part of the question
the first note does not cover is what the second note must answer: the question vector with the direction of the
top chunk removed (q − (q·a)a, renormalised; the residual of a Gram–Schmidt step). A note linked to or from the top
note, not yet among the results, whose best chunk is nearer that residual than some open result's chunk takes that
result's slot: the one nearest to nothing the question still asks. The top result never moves; on hybrid's floor
(``floor.py``) only the last slot is open. Nothing moves where the top note has no links (passage sets such as
HotpotQA's), or where every linked note is further from the residual than each open result.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pathweaver.config import ConfigError
from pathweaver.retrieval.graphs import cached
from pathweaver.retrieval.types import ChunkHit, RetrievalResult
from pathweaver.store.snapshot import GraphSnapshot

LINKED_NOTES = 1  # the methods' default ``linked_notes``: one linked note may take a slot (tuned on notes dev)
RESIDUAL_MIN = 1e-6  # a question the top chunk explains entirely (its vector) leaves no residual to follow


def linked_documents(snapshot: GraphSnapshot, doc: str) -> list[str]:
    """The documents ``doc`` links to and those that link to it (``GraphSnapshot.doc_links``), sorted."""
    back = cached(snapshot, ("doc_backlinks",), lambda: _backlinks(snapshot.doc_links), synonym_free=True)
    return sorted(set(snapshot.doc_links.get(doc, ())) | set(back.get(doc, ())))


def _backlinks(links: dict[str, tuple[str, ...]]) -> dict[str, list[str]]:
    back: dict[str, list[str]] = {}
    for source, targets in links.items():
        for target in targets:
            back.setdefault(target, []).append(source)
    return back


def _document_passages(snapshot: GraphSnapshot) -> dict[str, list[int]]:
    """{document path: its passages}, once per snapshot."""

    def build() -> dict[str, list[int]]:
        out: dict[str, list[int]] = {}
        for p, doc in enumerate(snapshot.chunk_docs):
            out.setdefault(doc, []).append(p)
        return out

    return cached(snapshot, ("document_passages",), build, synonym_free=True)


def residual(qvec: np.ndarray, anchor: np.ndarray) -> np.ndarray | None:
    """``qvec`` without its component along ``anchor`` (both unit vectors), renormalised; None when nothing is
    left."""
    rest = qvec.astype(np.float64) - float(qvec @ anchor) * anchor.astype(np.float64)
    norm = float(np.linalg.norm(rest))
    return rest / norm if norm > RESIDUAL_MIN else None


def follow_links(snapshot: GraphSnapshot, qvec: np.ndarray, result: RetrievalResult, slots: int,
                 keep: int = 1) -> RetrievalResult:
    """``result`` with up to ``slots`` notes linked to or from its top note placed in its slots after the first
    ``keep`` (at least the top one; module docstring); ``info["linked_notes"]`` lists each note placed, the note it
    is linked with and the note whose slot it took."""
    chunks = result.chunks
    keep = max(1, keep)
    if slots < 1 or len(chunks) <= keep or not snapshot.doc_links or snapshot.chunk_vecs.shape[0] == 0:
        return result
    docs = snapshot.chunk_docs
    top = chunks[0].passage
    linked = [d for d in linked_documents(snapshot, docs[top]) if d not in {docs[h.passage] for h in chunks}]
    rest = residual(qvec, snapshot.chunk_vecs[top]) if linked else None
    if rest is None:
        return result
    own = _document_passages(snapshot)
    pool = np.array([p for d in linked for p in own.get(d, ())], dtype=np.int64)
    near = snapshot.chunk_vecs[pool] @ rest.astype(snapshot.chunk_vecs.dtype)
    candidates = [(float(near[i]), int(pool[i])) for i in np.lexsort((pool, -near))]
    placed: list[dict[str, str]] = []
    taken: set[str] = set()
    for score, passage in candidates:
        if len(placed) >= slots:
            break
        if docs[passage] in taken:
            continue
        held = [(float(snapshot.chunk_vecs[h.passage] @ rest), i) for i, h in enumerate(chunks) if i >= keep]
        weakest, at = min(held)
        if score <= weakest:
            break
        placed.append({"note": docs[passage], "linked_with": docs[top], "replaced": docs[chunks[at].passage]})
        chunks[at] = ChunkHit(passage, chunks[at].score)  # the slot's score, so the list's scores stay in order
        taken.add(docs[passage])
    if placed:
        result.info["linked_notes"] = placed
    return result


@dataclass
class NoteSteps:
    """The notes steps a graph method's parameters share (ours, issue 37; both off in the paper preset)."""

    # notes linked to or from the top note that may take a slot where they answer what it leaves out (0 = off)
    linked_notes: int = LINKED_NOTES
    # on notes that link each other, hybrid's first notes keep their slots and the graph takes the last one
    # (retrieval/floor.py)
    hybrid_floor: bool = True


def check_linked_notes(method: str, slots: int) -> None:
    """A clear error for a negative ``linked_notes``."""
    if slots < 0:
        raise ConfigError(f"{method} linked_notes must be >= 0 (0 = off), got {slots}")
