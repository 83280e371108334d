"""The JSON shapes pathweaver returns: the MCP tools publish them as output schemas, and the service's
``retrieve_json``, ``search``, ``plan``, ``rerank``, ``ask`` and ``refresh`` and the plan trace build their results
from these models (``dump``) for the tools and the CLI (``--json``) alike. Citations everywhere are
``store.snapshot.citation_json``'s ``{doc, title, chunk_id, span[, locator]}``."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict


class Citation(BaseModel):
    """Where a piece of context comes from: file, chunk id and character span [start, end) in the file as stored on
    disk (its characters, decoded); for PDF and DOCX no span but a locator ("page 3", "paragraph 7")."""

    doc: str
    title: str = ""
    chunk_id: int
    span: list[int] | None
    locator: str | None = None
    n: int | None = None


class ChunkOut(Citation):
    score: float
    text: str
    merged_chunks: list[int] = []  # chunk ids of the same note's other retrieved chunks, merged into this one


class PathOut(BaseModel):
    text: str
    nodes: list[str]
    relations: list[str]
    relation_ids: list[int | None] = []  # the store's relation ids; None for a synonym step
    reliability: float
    citations: list[Citation] = []


class TripleOut(BaseModel):
    id: int
    text: str
    description: str | None = None  # the source sentence; only when asked for


class SubgraphOut(BaseModel):
    nodes: list[str]
    edges: list[tuple[str, str, float]]
    text: str
    stats: dict[str, Any] = {}
    node_scores: dict[str, float] = {}


class MethodOut(BaseModel):
    """The method that ran: its name, its preset ("default": pathweaver's variant, "paper": the paper's method),
    the parameters it ran with, and in one line what it does that its paper does not."""

    name: str
    preset: str = "default"
    params: dict[str, Any] = {}
    differs_from_paper: str = ""


class RetrievalOut(BaseModel):
    """Chunks best first; PathRAG paths in prompt order (ascending reliability, best last); MCMI subgraph."""

    method: MethodOut
    chunks: list[ChunkOut]
    paths: list[PathOut] = []
    subgraph: SubgraphOut | None = None
    triples: list[TripleOut] = []
    info: dict[str, Any] = {}
    seconds: float = 0.0


class PlanNodeOut(BaseModel):
    id: str
    question: str
    depends_on: list[str] = []
    relation: str | None = None


class PlanOut(BaseModel):
    """A DAG of sub-questions: run ``levels`` in order; questions within a level are independent."""

    nodes: list[PlanNodeOut]
    levels: list[list[str]]
    order: list[str]
    source: str
    trace: Any = None


class RerankItem(BaseModel):
    index: int
    text: str
    score: float
    relevance: float
    dependency: float


class RerankOut(BaseModel):
    results: list[RerankItem]


class AnswerCitation(BaseModel):
    """A source an answer cites as ``[n]``: a ``Citation`` with its number first."""

    n: int
    doc: str
    title: str = ""
    chunk_id: int
    span: list[int] | None = None
    locator: str | None = None


class AnswerLLM(BaseModel):
    """Who was asked for an answer: the backend and model, tokens spent, fallbacks taken, and why that backend."""

    backend: str
    model: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    fallbacks: list[str] = []
    reason: str = ""


class AskOut(BaseModel):
    """``Pathweaver.ask``: what ``ask --json`` prints; the ``answer`` tool serves its ``AnswerOut`` fields.
    ``context`` is ``retrieval.context.Context.to_dict()``, ``plan`` the plan trace's ``to_dict()`` with the
    planner's ``trace``; ``backend`` says who wrote the answer text and ``extractive`` whether no model did.
    ``supported`` is False when the answer says that the notes don't say: without a model, when the evidence does
    not decide the question (the answer then reads "The notes don't say." and quotes the closest evidence) or
    nothing was retrieved; a model's answer is True whenever it had evidence (it says in its own words when
    that evidence lacks the answer)."""

    answer: str
    citations: list[AnswerCitation]
    context: dict[str, Any]
    plan: dict[str, Any] | None = None
    llm: AnswerLLM
    seconds: float = 0.0
    backend: str
    extractive: bool
    supported: bool = True


class RefreshOut(BaseModel):
    """``Pathweaver.refresh``: the store's row counts after the refresh, what it removed, the synonym pairs it
    stored and its seconds."""

    entities: int
    relations: int
    mentions: int
    synonyms: int
    name_mentions: int
    removed_entities: int
    removed_relations: int
    new_synonyms: int
    seconds: float


class AnswerOut(BaseModel):
    """The answer with its citations; ``backend`` says who wrote it (``sampling``, ``openai``, ``llamacpp``, or
    ``extractive``: taken from the cited chunks without a model); ``llm`` has the configured backend, why it was
    chosen, tokens and fallbacks. ``supported`` is False when the answer says that the notes don't say ("The
    notes don't say." with the closest evidence, when the cited chunks do not decide the question, or nothing
    was retrieved); True when it answers from the evidence."""

    answer: str
    supported: bool = True
    backend: str = ""
    citations: list[Citation]
    context: Any = None
    plan: dict[str, Any] | None = None
    llm: dict[str, Any] | None = None
    seconds: float = 0.0


class SearchOut(BaseModel):
    results: list[ChunkOut]


def dump(model: BaseModel) -> dict[str, Any]:
    """``model`` as the JSON-ready dict the CLI and the tools return: the fields it was given (nested models too), in
    the model's field order. Results are built with ``model_construct``, unvalidated, from values that already have
    their types (the service's hot path; the tools' output schemas are these models)."""
    return model.model_dump(exclude_unset=True)


class Loose(BaseModel):
    """A record whose fields come straight from the store."""

    model_config = ConfigDict(extra="allow")


class EntityOut(Loose):
    name: str


class NeighborsOut(Loose):
    pass


class StatusOut(BaseModel):
    """Store statistics, skipped files and what the background indexer is doing."""

    stats: dict[str, Any]
    skipped: list[dict[str, Any]]
    indexing: bool
    state: str
    done: int
    total: int
    message: str
    ready: bool
    folders: list[str]
    watched: list[str]
    excluded: list[str] = []  # folders remove_folder took out of an indexed folder
    roots: list[str]
    last_report: dict[str, Any] | None = None
    last_error: str | None = None
    llm: dict[str, str] | None = None  # the backend answer and decompose_query use for this client, and why
    store: str = ""  # the store directory's absolute path


class FolderOut(BaseModel):
    folder: str
    watched: bool
    report: dict[str, Any]
