"""On notes that link each other, a graph method's notes stand on hybrid's: hybrid's first notes keep their
slots, and the graph takes the last one (ours, issue 37).

A person asking about their own notes seldom writes a note's title, and a note's own words are what find it:
hybrid's ranking (AGRAG Eq. 20-21, dense + BM25) holds the answering note of nearly every one-note question in its
first places. The graph earns a slot where those words fall short: with a note the method reached through names,
walks or paths that hybrid's top k lacks, or a note linked to or from the top note that answers what the top note
leaves out (``linked.follow_links``). So where the store's documents link each other with links their writers put
there (a vault, a docs folder: ``GraphSnapshot.doc_links``), the result is hybrid's top k with the last
``OPEN_SLOTS`` open: the method's best notes that hybrid lacks take them, and the link step may then take one of
them. Where the graph adds nothing, the result is hybrid's. A store without written links (passage sets such as
MuSiQue's, where the graph methods beat hybrid) keeps the method's own list.

A question that asks for notes themselves ("Which notes cover X?") keeps hybrid's whole top k: each note it asks
for matches X in its own words, and a note the graph reaches from another is seldom one of them (on notes dev's 11,
the open slot took a listed note from hybrid twice and held one once, which the link step then replaced).

Chosen on notes dev (split in halves) over letting the method lead, its notes taking turns with hybrid's and the
link step free to replace any result but the top: that won dev's two-note questions and lost the test split's
one-note ones. Two open slots lost a one-note question whose note hybrid ranks 4th and gained none.
"""

from __future__ import annotations

from pathweaver.retrieval.linked import follow_links
from pathweaver.retrieval.notes import merge_by_note, per_note
from pathweaver.retrieval.seeds import HybridParams, hybrid_retrieve
from pathweaver.retrieval.types import ChunkHit, Query, RetrievalEnv, RetrievalResult
from pathweaver.text import asks_for_notes

OPEN_SLOTS = 1  # the last slots of hybrid's top k that the graph may take; the ones above them stay hybrid's


def kept_slots(top_k: int, question: str) -> int:
    """How many of hybrid's first notes keep their slots for ``question`` (at least the top one): all of them when
    it asks for notes."""
    return top_k if asks_for_notes(question) else max(1, top_k - OPEN_SLOTS)


def hybrid_floor(env: RetrievalEnv, query: Query, result: RetrievalResult, top_k: int) -> RetrievalResult:
    """``result`` (merged per note) on hybrid's notes where the store's documents link each other (module
    docstring): hybrid's top ``top_k`` notes with the method's best notes that hybrid lacks in the empty slots or,
    none being empty, in the open ones. ``info["hybrid_floor"]`` names the method's notes placed; a hybrid note the
    method did not reach counts as back-fill."""
    if not env.snapshot.doc_links:
        return result
    docs = env.snapshot.chunk_docs
    hybrid = per_note(lambda k: hybrid_retrieve(env, query, k, HybridParams()), docs, top_k).chunks
    own = {docs[h.passage] for h in result.chunks}
    out = [h if docs[h.passage] in own else ChunkHit(h.passage, h.score, True, list(h.merged)) for h in hybrid]
    have = {docs[h.passage] for h in out}
    new = [h for h in merge_by_note(result.chunks, docs, len(result.chunks)) if docs[h.passage] not in have]
    if len(out) < top_k:  # hybrid found fewer notes than slots: the method's fill them
        slots = list(range(len(out), min(top_k, len(out) + len(new))))
        out.extend(new[:len(slots)])
    else:
        slots = list(range(max(kept_slots(top_k, query.text), top_k - len(new)), top_k))
    for at, hit in zip(slots, new, strict=False):
        # the slot's score (below hybrid's notes, its last note's), so the list's scores stay in order
        score = hybrid[min(at, len(hybrid) - 1)].score if hybrid else hit.score
        out[at] = ChunkHit(hit.passage, score, hit.backfill, list(hit.merged))
    result.chunks = out
    result.info["hybrid_floor"] = {"graph_notes": [docs[out[at].passage] for at in slots]}
    return result


def note_steps(env: RetrievalEnv, query: Query, result: RetrievalResult, top_k: int, floor: bool,
               linked: int) -> RetrievalResult:
    """A graph method's per-note ``result`` on hybrid's floor (``floor``) and with up to ``linked`` linked notes
    (``linked.follow_links``) in its open slots; both do nothing on a store without written links."""
    if floor:
        result = hybrid_floor(env, query, result, top_k)
    if linked > 0 and not asks_for_notes(query.text):  # a linked note is no note a list asks for
        keep = kept_slots(top_k, query.text) if "hybrid_floor" in result.info else 1
        result = follow_links(env.snapshot, query.vec, result, linked, keep)
    return result
