"""Serialise a retrieval result into prompt context with numbered citations.

Every claim-bearing item carries ``[n]`` markers; citation ``n`` maps to a chunk: file path, title, chunk id and
character span in the file. Path and triple items cite the chunks that support their edges. Layouts:
- ``chunks``: the ranked chunks, best first;
- ``pathrag``: the question first, then the relational paths in *ascending* reliability so the most reliable path
  is last (PathRAG §Answer Generation, Eq. 6); the supporting chunks come before the paths;
- ``agrag``: the MCMI subgraph serialised as a text graph string g = StrConcat(V, E) (AGRAG Eq. 18), then the
  hybrid-retrieved chunks (AGRAG §III-D, Step 3);
- ``pooling``: triples in recency order (best last, nearest the question, Path Pooling §3.3 "Position
  Reranking"), with a triple whose head is the previous triple's tail merged into one line
  ``a -r-> b -r2-> c`` (Path Pooling App. A.4).

Truncation to ``max_items`` keeps the best items, then orders them as the layout says: the most reliable paths
(PathRAG keeps the top-K, §Path Retrieval), the highest pooled triples (Path Pooling §3.4 reselection keeps the
pooled top-K) and the highest-scored chunks (AGRAG Eq. 20 keeps the top-k_r hybrid chunks).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from pathweaver.retrieval.namegraph import tied_entities
from pathweaver.retrieval.types import ChunkHit, PathHit, RetrievalResult
from pathweaver.store.snapshot import GraphSnapshot, file_span_json

LAYOUTS = ("chunks", "pathrag", "agrag", "pooling")
DEFAULT_MAX_ITEMS = 15  # PathRAG K = 15 paths; also caps chunks and triples
SENTENCE_SPLIT = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"“(])")
_INITIAL = re.compile(r"\b[A-Z]\.$")
_NEXT_INITIAL = re.compile(r"[A-Z]\.(?!\w)")
# Latin abbreviations that introduce what follows never end a sentence ("press the paste key, e.g. Cmd-V")
_NO_END = re.compile(r"(?<![\w.])(?:e\.g|i\.e|cf|vs|viz)\.$", re.I)


@dataclass
class ContextItem:
    n: int  # first citation number of the item (0 when it cites nothing)
    kind: str  # chunk | path | subgraph | triple | question
    text: str
    passage: int = -1
    doc: str = ""
    title: str = ""
    names: tuple[str, ...] = ()  # the names its note gives itself (title, front-matter aliases), as the store keeps them
    chunk_id: int = 0
    span: tuple[int, int] = (0, 0)
    locator: str = ""  # page or paragraph of a PDF or DOCX chunk, which has no span
    cites: list[int] = field(default_factory=list)


@dataclass
class Context:
    items: list[ContextItem]
    text: str
    citations: list[dict[str, Any]]

    def to_dict(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "items": [
                {
                    "n": i.n,
                    "kind": i.kind,
                    "text": i.text,
                    "doc": i.doc,
                    "chunk_id": i.chunk_id,
                    **file_span_json(*i.span, i.locator),
                    "cites": list(i.cites),
                }
                for i in self.items
            ],
        }


class _Citations:
    """Citation numbers handed out in order of first use, one per chunk."""

    def __init__(self, snapshot: GraphSnapshot) -> None:
        self.snapshot = snapshot
        self.by_passage: dict[int, int] = {}
        self.entries: list[dict[str, Any]] = []

    def cite(self, passage: int) -> int:
        if passage not in self.by_passage:
            n = len(self.entries) + 1
            self.by_passage[passage] = n
            self.entries.append({"n": n, **self.snapshot.citation(passage)})
        return self.by_passage[passage]


def _marks(cites: list[int]) -> str:
    return "".join(f"[{n}]" for n in cites)


def _chunk_item(snapshot: GraphSnapshot, cits: _Citations, passage: int) -> ContextItem:
    n = cits.cite(passage)
    start, end = (int(x) for x in snapshot.chunk_spans[passage])
    return ContextItem(
        n=n,
        kind="chunk",
        text=snapshot.chunk_texts[passage],
        passage=passage,
        doc=snapshot.chunk_docs[passage],
        title=snapshot.chunk_titles[passage],
        names=tuple(snapshot.entity_names[e] for e in tied_entities(snapshot, [passage])),
        chunk_id=int(snapshot.chunk_ids[passage]),
        span=(start, end),
        locator=snapshot.chunk_locators[passage] if snapshot.chunk_locators else "",
        cites=[n],
    )


def _relation_passages(snapshot: GraphSnapshot, relations: list[int]) -> list[int]:
    out: list[int] = []
    for r in relations:
        if 0 <= r < snapshot.n_relations:
            row = snapshot.rel_chunks.getrow(r)
            out.extend(int(p) for p in row.indices if int(p) not in out)
    return out


def _derived_item(kind: str, text: str, passages: list[int], cits: _Citations) -> ContextItem:
    cites = [cits.cite(p) for p in dict.fromkeys(passages)]
    return ContextItem(n=cites[0] if cites else 0, kind=kind, text=text, cites=cites)


def _pooling_lines(snapshot: GraphSnapshot, triples: list[int]) -> list[tuple[str, list[int]]]:
    """Merge consecutive triples whose head is the previous tail: ``a -r-> b -r2-> c`` (Path Pooling App. A.4)."""
    lines: list[tuple[str, list[int]]] = []
    last_tail = -1
    for r in triples:
        src, dst, label = int(snapshot.rel_src[r]), int(snapshot.rel_dst[r]), snapshot.rel_labels[r]
        if lines and src == last_tail:
            text, rels = lines[-1]
            lines[-1] = (f"{text} -{label}-> {snapshot.entity_names[dst]}", [*rels, r])
        else:
            lines.append((f"{snapshot.entity_names[src]} -{label}-> {snapshot.entity_names[dst]}", [r]))
        last_tail = dst
    return lines


def top_chunks(chunks: list[ChunkHit], max_items: int) -> list[ChunkHit]:
    """The chunks as ranked when they fit; else the ``max_items`` highest-scored, best first (ties keep rank)."""
    if len(chunks) <= max_items:
        return list(chunks)
    return sorted(chunks, key=lambda h: -h.score)[:max_items]


def top_paths(paths: list[PathHit], max_items: int) -> list[PathHit]:
    """The ``max_items`` most reliable paths in ascending reliability, best last (PathRAG Eq. 6)."""
    keep = sorted(range(len(paths)), key=lambda i: -paths[i].reliability)[:max_items]
    return [paths[i] for i in sorted(keep, key=lambda i: (paths[i].reliability, i))]


def top_triples(triples: list[int], scores: dict[int, float], max_items: int) -> list[int]:
    """The ``max_items`` best triples in ascending score, best last (Path Pooling §3.4 recency order). Without
    scores the list is taken as already in that order, so its tail is the best."""
    if scores and all(r in scores for r in triples):
        keep = sorted(range(len(triples)), key=lambda i: -scores[triples[i]])[:max_items]
        return [triples[i] for i in sorted(keep, key=lambda i: (scores[triples[i]], i))]
    return list(triples[-max_items:])


def build_context(
    snapshot: GraphSnapshot,
    result: RetrievalResult,
    layout: str | None = None,
    max_items: int = DEFAULT_MAX_ITEMS,
    question: str | None = None,
    max_derived: int | None = None,
    merged: bool = False,
) -> Context:
    """Items, prompt text and citations for ``result`` in ``layout`` (default: by the method's paper): at most
    ``max_items`` chunks, and at most ``max_derived`` paths or triples (default ``max_items``). With ``merged``,
    each chunk is followed by its note's other retrieved chunks (``ChunkHit.merged``) as items of their own (an
    answer read from the whole note cites the chunk that says it); a later chunk keeps the numbers before it."""
    layout = layout or layout_for(result.method)
    if layout not in LAYOUTS:
        raise ValueError(f"unknown context layout {layout!r}; use one of {', '.join(LAYOUTS)}")
    max_derived = max_items if max_derived is None else max_derived
    if max_items < 1 or max_derived < 1:
        raise ValueError("max_items and max_derived must be at least 1")
    cits = _Citations(snapshot)
    items: list[ContextItem] = []
    sections: list[str] = []
    if layout == "pathrag" and question:
        items.append(ContextItem(n=0, kind="question", text=question))
        sections.append(f"Question: {question}")

    def chunk_items() -> list[ContextItem]:  # built where they appear, so [n] follow reading order
        top = top_chunks(result.chunks, max_items)
        passages = [p for h in top for p in ([h.passage, *h.merged] if merged else [h.passage])]
        return [_chunk_item(snapshot, cits, p) for p in dict.fromkeys(passages)]

    if layout == "pathrag":
        paths = top_paths(result.paths, max_derived)
        chunks = chunk_items()
        path_items = [_derived_item("path", p.text, p.passages, cits) for p in paths]
        items += chunks + path_items
        sections.append(_section("Sources", chunks))
        sections.append(_section("Relational paths (ascending reliability, most reliable last)", path_items))
    elif layout == "agrag":
        if result.subgraph is not None and result.subgraph.text:
            passages = _relation_passages(snapshot, list(result.triples))
            sub_item = _derived_item("subgraph", result.subgraph.text, passages, cits)
            items.append(sub_item)
            sections.append(_section("Reasoning subgraph", [sub_item]))
        chunks = chunk_items()
        items += chunks
        sections.append(_section("Hybrid-retrieved chunks", chunks))
    elif layout == "pooling":
        lines = _pooling_lines(snapshot, top_triples(result.triples, result.triple_scores, max_derived))
        chunks = chunk_items()
        triple_items = [
            _derived_item("triple", t, _relation_passages(snapshot, rels), cits) for t, rels in lines
        ]
        items += chunks + triple_items
        sections.append(_section("Sources", chunks))
        sections.append(_section("Triples (most relevant last)", triple_items))
    else:
        chunks = chunk_items()
        items += chunks
        sections.append(_section("Sources", chunks))
    text = "\n\n".join(s for s in sections if s)
    return Context(items=items, text=text, citations=cits.entries)


def _section(heading: str, items: list[ContextItem]) -> str:
    if not items:
        return ""
    lines = []
    for it in items:
        label = f"{it.title}: " if it.kind == "chunk" and it.title else ""
        body = " ".join(it.text.split())
        lines.append(f"{_marks(it.cites)} {label}{body}".strip())
    return f"{heading}:\n" + "\n".join(lines)


def layout_for(method: str) -> str:
    """The paper layout of a retrieval method: pathrag -> pathrag, mcmi -> agrag, pooling -> pooling, else chunks."""
    base = method.split(":")[0]
    return {"pathrag": "pathrag", "mcmi": "agrag", "pooling": "pooling"}.get(base, "chunks")


def sentences(text: str) -> list[tuple[int, int]]:
    """Character spans of the sentences of ``text``."""
    spans, start = [], 0
    for m in SENTENCE_SPLIT.finditer(text):
        if _is_initial(text, m.start(), m.end()) or _NO_END.search(text[max(0, m.start() - 5): m.start()]):
            continue
        spans.append((start, m.start()))
        start = m.end()
    spans.append((start, len(text)))
    return [(a, b) for a, b in spans if text[a:b].strip()]


def _is_initial(text: str, end: int, after: int) -> bool:
    """Whether the single capital and period ending ``text[:end]`` is one of a run of initials ("K. A. Applegate",
    "J. R. R. Tolkien", "the U.S. Army"). A lone one ends its sentence: "Henry J. Kaiser" and "rock band Local H.
    Interviews ..." look alike, and splitting the first costs less than joining the second."""
    if not _INITIAL.search(text, 0, end):
        return False
    return bool(_NEXT_INITIAL.match(text, after) or _INITIAL.search(text[: end - 2].rstrip()))
