"""MCP tools: one per library function, each with a typed input schema, pathweaver's defaults (a ``preset``
argument of "paper" runs a method as its paper writes it, ``retrieval/presets.py``) and structured output.

Every tool runs the (synchronous, thread-safe) service call on a worker thread, so the server keeps answering
while one call works. Errors the user can fix come back as tool errors with a one-line message.
"""

# No ``from __future__ import annotations``: the tool signatures use names local to ``register_tools`` (the method
# Literal, defaults from the settings), which must be evaluated when the functions are defined.
import contextlib
import logging
from collections.abc import Callable
from typing import Annotated, Any, Literal, TypeVar

import anyio
import anyio.from_thread
import anyio.lowlevel
import anyio.to_thread
import pydantic_core
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field

from pathweaver.config import DEFAULT_TOP_K
from pathweaver.errors import USER_ERRORS
from pathweaver.results import (
    AnswerOut,
    EntityOut,
    FolderOut,
    NeighborsOut,
    PlanOut,
    RerankItem,
    RerankOut,
    RetrievalOut,
    SearchOut,
    StatusOut,
)
from pathweaver.server import ServerState
from pathweaver.server.sampling import sampling_backend, supports_sampling

log = logging.getLogger(__name__)
T = TypeVar("T")
READ_ONLY = ToolAnnotations(readOnlyHint=True, openWorldHint=False)
WRITES = ToolAnnotations(readOnlyHint=False, destructiveHint=False, openWorldHint=False)
DELETES = ToolAnnotations(readOnlyHint=False, destructiveHint=True, openWorldHint=False)


# -- helpers -------------------------------------------------------------------------------------------------
async def call(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run a service call on a worker thread; user-fixable errors become one-line tool errors."""
    try:
        return await anyio.to_thread.run_sync(lambda: fn(*args, **kwargs))
    except USER_ERRORS as exc:
        raise ToolError(str(exc)) from exc
    except Exception as exc:  # a bug still tells the agent what failed, and the log keeps the traceback
        log.exception("tool call %s failed", getattr(fn, "__name__", fn))
        raise ToolError(f"{type(exc).__name__}: {exc}") from exc


def structured(data: dict[str, Any]) -> CallToolResult:
    """A JSON-ready result as structured content plus the same JSON, compact, as the text block (for clients
    that read only text). The SDK validates ``data`` against the tool's output model once; building the model
    here and letting the SDK dump it again, indented, cost more and sent more bytes. pydantic-core writes compact
    JSON of the same values faster than ``json.dumps``, and infinities become null where ``json.dumps`` wrote
    invalid JSON."""
    text = pydantic_core.to_json(data).decode()
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=data)


def publish_without_revalidation(server: MCPServer, names: tuple[str, ...]) -> None:
    """Keep the output schema these tools publish, but stop the SDK validating each of their results against it.

    Their results come from ``structured`` with content the service shaped to that schema, and the SDK walks a
    large result once more to validate it (a cost measured in ``docs/benchmarks.md``). The published ``outputSchema`` is unchanged, clients still validate against it
    (the end-to-end tests do, through the SDK's client), and ``FuncMetadata`` documents that its fields are read
    live. The SDK offers no public handle on a registered tool, so where its tool manager is missing this leaves
    validation on rather than fail."""
    manager = getattr(server, "_tool_manager", None)
    for name in names:
        tool = manager.get_tool(name) if manager is not None else None
        meta = getattr(tool, "fn_metadata", None)
        if meta is not None and meta.output_schema is not None:
            meta.output_model = None


def progress_reporter(ctx: Context[Any, Any]) -> Callable[[int, int, str], None]:
    """An indexer progress callback (any thread) that sends MCP progress notifications for this call."""
    token = anyio.lowlevel.current_token()

    def report(done: int, total: int, message: str) -> None:
        with contextlib.suppress(Exception):  # progress is best effort; the client may have gone
            anyio.from_thread.run(ctx.report_progress, float(done), float(total or 0) or None, message, token=token)

    return report


def llm_progress(ctx: Context[Any, Any]) -> Callable[[float, str], None]:
    """A slow LLM call's heartbeat (``models.llm.Heartbeat``, any thread) as MCP progress notifications: the
    seconds since the tool call began, no total, and what it waits for."""
    token = anyio.lowlevel.current_token()

    def beat(seconds: float, message: str) -> None:
        with contextlib.suppress(Exception):  # progress is best effort; the client may have gone
            anyio.from_thread.run(ctx.report_progress, seconds, None, message, token=token)

    return beat


def capped(items: list[str] | None, cap: int, what: str, setting: str) -> None:
    """Refuse a list longer than ``cap`` with a tool error naming the setting: a caller cannot make one call run for
    minutes. An error rather than a cut: a ranking or a retrieval over part of what was sent would look whole."""
    if items is not None and len(items) > cap:
        raise ToolError(f"too many {what}: {len(items)}, at most {cap} per call (setting server.{setting}); "
                        f"send fewer")


def _defaults(state: ServerState, method: str) -> dict[str, Any]:
    """A method's defaults (pathweaver's) overlaid with ``[retrieval.<method>]`` from the settings."""
    from pathweaver.retrieval.registry import method_defaults

    return {**method_defaults(method), **state.settings.retrieval.get(method, {})}


# -- registration --------------------------------------------------------------------------------------------
def register_tools(server: MCPServer, state: ServerState) -> None:
    """Add every pathweaver tool to ``server``."""
    from pathweaver.retrieval.registry import method_names
    from pathweaver.service.queries import SEARCH_MODES
    from pathweaver.store.reads import NEIGHBOR_HOPS, NEIGHBOR_LIMIT

    svc = state.service
    pr = _defaults(state, "pathrag")
    mc = _defaults(state, "mcmi")
    Method = Literal[tuple(method_names())]  # type: ignore[valid-type]
    SearchMode = Literal[SEARCH_MODES]  # type: ignore[valid-type]
    Question = Annotated[str, Field(min_length=1, description="The question, in natural language.")]
    max_keywords = state.settings.server.max_keywords
    max_candidates = state.settings.server.max_rerank_candidates
    Preset = Annotated[
        Literal["default", "paper"] | None,
        Field(description="default: pathweaver's variant of the method (tuned on the dev splits; the result's "
                          "method.differs_from_paper says what differs from the paper); paper: the method as its "
                          "paper writes it, on the paper's graph, with only the chunks it found. Omit for "
                          "[retrieval.<method>] preset, else default."),
    ]

    @server.tool(annotations=READ_ONLY)
    async def decompose_query(
        question: Question,
        ctx: Context,
        plan: Annotated[
            dict[str, Any] | None,
            Field(description="Optional plan {nodes:[{id, question, depends_on, relation}]} to validate instead."),
        ] = None,
    ) -> PlanOut:
        """Split a multi-hop question into a DAG of sub-questions (PankRAG): parallel and progress relations,
        topological levels. Use first for questions that chain facts; answer each level's sub-questions with
        retrieve_paths or build_mcmi, then rerank with the resolved answers. Plans with your model through MCP
        sampling when offered, else the configured LLM, else by the question's wording."""
        llm = sampling_backend(ctx, state.settings.models.llm_backend)
        return PlanOut.model_validate(await call(svc.plan, question, plan, llm, llm_progress(ctx)))

    @server.tool(annotations=READ_ONLY)
    async def retrieve_paths(
        question: Question,
        keywords: Annotated[
            list[str] | None,
            Field(description=f"Entity keywords for node retrieval (at most {max_keywords}); extracted when omitted."),
        ] = None,
        top_nodes: Annotated[
            int | None,
            Field(ge=1, description="N: nodes retrieved (PathRAG); omit for 10 where the documents name each other, "
                  "else 40."),
        ] = pr["top_nodes"],
        top_paths: Annotated[int, Field(ge=1, description="K: relational paths served (PathRAG).")] = pr["top_paths"],
        alpha: Annotated[float, Field(gt=0, le=1, description="Decay rate of flow-based pruning (PathRAG).")] = pr["alpha"],
        theta: Annotated[
            float, Field(ge=0, description="Early-stop threshold of flow-based pruning (PathRAG).")
        ] = pr["theta"],
        top_k: Annotated[int, Field(ge=1, le=50, description="Supporting chunks returned.")] = DEFAULT_TOP_K,
        preset: Preset = None,
    ) -> Annotated[CallToolResult, RetrievalOut]:
        """Relational paths between the question's entities (PathRAG flow pruning), most reliable last, each with
        citations. Use for 'how is X related to Y' and multi-hop questions where the chain of facts matters.
        pathweaver's default walks the names the documents write (titles, links) from the question's named
        documents; preset "paper" is PathRAG as written (N = 40, K = 15, alpha = 0.7, keyword nodes)."""
        capped(keywords, max_keywords, "keywords", "max_keywords")
        params: dict[str, Any] = {"top_paths": top_paths, "alpha": alpha, "theta": theta}
        if top_nodes is not None:
            params["top_nodes"] = top_nodes
        if preset is not None:
            params["preset"] = preset
        return structured(await call(svc.retrieve_json, question, "pathrag", top_k, params, keywords))

    @server.tool(annotations=READ_ONLY)
    async def build_mcmi(
        question: Question,
        k_triples: Annotated[
            int, Field(ge=1, description="Top triples whose entities are the Steiner terminals (AGRAG).")
        ] = mc["k_triples"],
        k_chunks: Annotated[
            int, Field(ge=1, description="Hybrid chunks served with the subgraph (AGRAG).")
        ] = DEFAULT_TOP_K,
        triple_descriptions: Annotated[
            bool, Field(description="Attach each subgraph triple's source sentence (a larger result; the chunks "
                                    "and get_entity carry the text too).")
        ] = False,
        preset: Preset = None,
    ) -> Annotated[CallToolResult, RetrievalOut]:
        """A compact reasoning subgraph (AGRAG MCMI: Steiner tree over the query's triples, grown while it gains
        influence per cost) served as text (Eq. 18), plus chunks. Use when the answer needs several connected
        facts. pathweaver's default also walks the names the documents write and alternates walk-influence
        passages with hybrid chunks; preset "paper" is AGRAG as written (hybrid chunks beside the subgraph)."""
        params: dict[str, Any] = {"k_triples": k_triples}  # k_r = k_chunks is the top_k of the call
        if preset is not None:
            params["preset"] = preset
        return structured(await call(svc.retrieve_json, question, "mcmi", k_chunks, params,
                                     descriptions=triple_descriptions))

    @server.tool(annotations=READ_ONLY)
    async def rerank(
        question: Question,
        candidates: Annotated[
            list[str], Field(min_length=1, description=f"Candidate passages or answers (at most {max_candidates}).")
        ],
        resolved: Annotated[
            list[str],
            Field(description=f"Answers to the sub-questions this one depends on (may be empty; at most "
                              f"{max_candidates})."),
        ],
        alpha: Annotated[
            float | None,
            Field(ge=0, le=1, description="Weight of relevance; beta=1-alpha. Omit: 0.6 specific, 0.75 abstract."),
        ] = None,
    ) -> RerankOut:
        """Dependency-aware reranking (PankRAG): score = alpha*relevance + beta*cos(candidate, resolved answers).
        Use after answering a plan's earlier levels, to rank candidates for a dependent sub-question."""
        capped(candidates, max_candidates, "candidates", "max_rerank_candidates")
        capped(resolved, max_candidates, "resolved answers", "max_rerank_candidates")
        items = await call(svc.rerank, question, candidates, resolved, alpha)
        return RerankOut(results=[RerankItem.model_validate(i) for i in items])

    @server.tool(annotations=READ_ONLY)
    async def answer(
        question: Question,
        ctx: Context,
        method: Annotated[
            Method | None, Field(description="Retrieval method; omit for ppr, the walk over titles and links.")
        ] = None,
        decompose: Annotated[bool, Field(description="Plan sub-questions first (PankRAG) and answer in order.")] = False,
        top_k: Annotated[int, Field(ge=1, le=50, description="Chunks of context.")] = DEFAULT_TOP_K,
        preset: Preset = None,
    ) -> AnswerOut:
        """Answer from the indexed documents with numbered citations (file, chunk, span). Uses your client's model
        through MCP sampling when offered, else the configured LLM, else the cited chunks' own words (backend
        'extractive'). `supported` is false when the answer says the notes don't say (it then quotes the closest
        evidence). Use for a finished answer in one call."""
        llm = sampling_backend(ctx, state.settings.models.llm_backend)
        kwargs: dict[str, Any] = {"method": method, "decompose": decompose, "top_k": top_k,
                                  "progress": llm_progress(ctx)}
        if preset is not None:
            kwargs["params"] = {"preset": preset}
        if llm is not None:
            kwargs["llm"] = llm
        return AnswerOut.model_validate(await call(svc.ask, question, **kwargs))

    @server.tool(annotations=READ_ONLY)
    async def search(
        query: Annotated[str, Field(min_length=1, description="Words or a question.")],
        mode: Annotated[
            SearchMode, Field(description="dense vectors, BM25 keywords, or both.")
        ] = "hybrid",
        k: Annotated[int, Field(ge=1, le=100, description="Number of chunks.")] = DEFAULT_TOP_K,
    ) -> Annotated[CallToolResult, SearchOut]:
        """Plain chunk search (no graph). Use to look up a phrase, a file's content, or to check that a new file is
        indexed."""
        return structured({"results": await call(svc.search, query, mode, k)})

    @server.tool(annotations=READ_ONLY)
    async def get_entity(name: Annotated[str, Field(min_length=1, description="Entity name.")]) -> EntityOut:
        """An entity card: kind, mentions with the chunks that support them, relations and synonyms."""
        card = await call(svc.entity, name)
        if card is None:
            raise ToolError(f"no entity named {name!r}; use search or neighbors to find entity names")
        return EntityOut.model_validate(card)

    @server.tool(annotations=READ_ONLY)
    async def neighbors(
        entity: Annotated[str, Field(min_length=1, description="Entity name.")],
        hops: Annotated[int, Field(ge=1, le=3, description="Graph distance.")] = NEIGHBOR_HOPS,
        limit: Annotated[int, Field(ge=1, le=500, description="Most neighbours returned.")] = NEIGHBOR_LIMIT,
    ) -> NeighborsOut:
        """Entities within ``hops`` of an entity, with the relations that join them. Use to explore the graph."""
        return NeighborsOut.model_validate(await call(svc.neighbors, entity, hops, limit))

    @server.tool(annotations=READ_ONLY)
    async def index_status(ctx: Context) -> StatusOut:
        """Store statistics, skipped files with reasons, whether indexing is running, the watched folders, the
        store's directory, and the LLM backend answer and decompose_query use for you, and why."""
        stats = await call(svc.stats)
        status = state.manager.snapshot()
        choice = await call(svc.backend_choice, supports_sampling(ctx))
        return StatusOut(
            stats={k: v for k, v in stats.items() if k != "skipped"},
            skipped=list(stats.get("skipped", [])),
            roots=[str(r) for r in state.roots.roots],
            llm=choice.to_dict(),
            store=str(svc.settings.store_dir.resolve()),
            **{k: status[k] for k in StatusOut.model_fields if k in status},
        )

    @server.tool(annotations=WRITES)
    async def add_folder(
        path: Annotated[str, Field(min_length=1, description="A folder inside an allowed root.")],
        ctx: Context,
        watch: Annotated[bool, Field(description="Keep following its changes.")] = True,
    ) -> FolderOut:
        """Index a folder (inside the allowed roots) and optionally watch it. Sends progress notifications."""
        folder = _checked(state, path, want_dir=True)
        report = await call(state.manager.add_folder, folder, watch, progress_reporter(ctx))
        return FolderOut(folder=str(folder), watched=watch, report=report)

    @server.tool(annotations=DELETES)
    async def remove_folder(
        path: Annotated[str, Field(min_length=1, description="An indexed folder (or a folder inside one).")],
    ) -> FolderOut:
        """Stop indexing and watching a folder and delete its documents (and facts only they support)."""
        folder = _checked(state, path, want_dir=False)
        report = await call(state.manager.remove_folder, folder)
        return FolderOut(folder=str(folder), watched=False, report=report)

    @server.tool(annotations=WRITES)
    async def reindex(
        ctx: Context,
        path: Annotated[
            str | None, Field(description="A file or folder inside the roots; omit for every indexed folder.")
        ] = None,
    ) -> FolderOut:
        """Re-scan files and bring the store up to date (changed content is re-embedded). Sends progress."""
        target = _checked(state, path, want_dir=False) if path else None
        report = await call(state.manager.reindex, target, progress_reporter(ctx))
        folder = str(target) if target else ", ".join(map(str, state.manager.folders))
        return FolderOut(folder=folder, watched=target is None or target in state.manager.watched, report=report)

    publish_without_revalidation(server, ("retrieve_paths", "build_mcmi", "search"))


def _checked(state: ServerState, path: str, want_dir: bool) -> Any:
    """``path`` resolved inside the roots, or a tool error saying why not."""
    try:
        real = state.roots.resolve(path)
    except USER_ERRORS as exc:
        raise ToolError(str(exc)) from exc
    if want_dir and not real.is_dir():
        raise ToolError(f"{path!r} is not a folder")
    return real
