"""A question about linked notes that names none of them: the graph method's notes take turns with hybrid's (ours,
issue 37).

A person asking about their own notes seldom writes a note's title; then the graph methods have no named node to
start from, and their walks, flows and paths start from what the question's words found and drift to the notes
that many others link to or mention (an index, a changelog, an "about" page). Hybrid's ranking (AGRAG Eq. 20-21,
dense + BM25) is what the question's own words find; AGRAG hands both to its reader, and MCMI's chunk list already
alternates the two. So where the store's documents link each other with links their writers put there (a vault,
a docs folder: ``GraphSnapshot.doc_links``) and the question names none of them, the method's notes and hybrid's
take turns, the method's first; a hybrid note the method did not reach counts as back-fill. A question that names
a document, and any store without written links (passage sets such as MuSiQue's, whose unnamed questions the
graph methods answer better than hybrid), keeps the method's own list.
"""

from __future__ import annotations

from pathweaver.retrieval.keywords import NAME_PARTS, query_names
from pathweaver.retrieval.notes import per_note
from pathweaver.retrieval.seeds import HybridParams, hybrid_retrieve
from pathweaver.retrieval.types import ChunkHit, Query, RetrievalEnv, RetrievalResult


def hybrid_turns(env: RetrievalEnv, query: Query, result: RetrievalResult, top_k: int,
                 name_parts: int = NAME_PARTS) -> RetrievalResult:
    """``result`` (merged per note) taking turns with hybrid's notes where the store's documents link each other and
    ``query`` names none of them."""
    if not env.snapshot.doc_links or query_names(env, query.text, name_parts):
        return result
    docs = env.snapshot.chunk_docs
    hybrid = per_note(lambda k: hybrid_retrieve(env, query, k, HybridParams()), docs, top_k).chunks
    own = {docs[h.passage] for h in result.chunks}
    lists = [list(result.chunks), [h if docs[h.passage] in own else ChunkHit(h.passage, h.score, True, list(h.merged))
                                   for h in hybrid]]
    out: list[ChunkHit] = []
    seen: set[str] = set()
    turn = 0
    while len(out) < top_k and any(lists):
        # each turn takes the next note of its list that is not in yet
        queue = lists[turn % 2]
        while queue and docs[queue[0].passage] in seen:
            queue.pop(0)
        if queue:
            hit = queue.pop(0)
            seen.add(docs[hit.passage])
            out.append(hit)
        turn += 1
    result.chunks = out
    result.info["hybrid_turns"] = True
    return result
