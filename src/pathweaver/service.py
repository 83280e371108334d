"""``Pathweaver``: the one facade the CLI and the MCP server call.

It owns the settings, a write connection for the indexer, one read connection per thread for queries (WAL lets
readers run while the indexer writes), the shared embedder, and the graph snapshot, which is rebuilt only when the
store's version counter moves.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from pathweaver.config import DEFAULT_TOP_K, ConfigError, Settings, load_settings
from pathweaver.models.embedder import Embedder, get_embedder
from pathweaver.numeric import parallel
from pathweaver.results import ChunkOut, Citation, PathOut, RetrievalOut, SubgraphOut, TripleOut, dump
from pathweaver.retrieval.graphs import cached
from pathweaver.retrieval.registry import (
    ANSWER_METHOD,
    PANK,
    check_top_k,
    pank_base,
    parse_method,
    run_method,
)
from pathweaver.retrieval.types import Query, RetrievalEnv, RetrievalResult
from pathweaver.store.bm25 import Bm25Index
from pathweaver.store.db import Database, StoreError
from pathweaver.store.reads import StoreReader
from pathweaver.store.snapshot import GraphSnapshot, citation_json

if TYPE_CHECKING:
    from pathweaver.ingest.types import IndexReport

log = logging.getLogger(__name__)
ProgressFn = Callable[[int, int, str], None]
BeatFn = Callable[[float, str], None]  # (seconds since the call began, message): a slow LLM call's heartbeat
SEARCH_MODES = ("dense", "bm25", "hybrid")
CHUNK_METHODS = SEARCH_MODES  # the retrieval methods that rank chunks alone (no entity or relation)
# ``warm`` replays a method's latest query on a new snapshot only when the method's quickest run took at most this
# long (LEGO's OSAR and ISAR take seconds; they build their few per-snapshot structures on their next query)
WARM_REPLAY_SECONDS = 1.0


@dataclass
class _LatestRun:
    """A method's latest query in this process, and its quickest run so far (what ``warm`` replays)."""

    query: Query
    top_k: int
    params: dict[str, Any]
    seconds: float


class Pathweaver:
    """A store plus everything needed to index it and query it."""

    def __init__(self, settings: Settings, readonly: bool = False) -> None:
        self.settings = settings
        self.readonly = readonly
        parallel.set_threads(settings.models.query_threads)  # one pool per process: the last store opened sets it
        if readonly and not settings.db_path.exists():
            raise StoreError(
                f"no store at {settings.store_dir}; run `pathweaver --store {settings.store_dir} index PATH` first"
            )
        # Open (and migrate) once up front so a bad store fails here, not inside a worker thread.
        self._main_db = Database(settings.store_dir, readonly=readonly)
        self._local = threading.local()
        self._dbs: list[Database] = [self._main_db]
        self._dbs_lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._write_db: Database | None = None
        self._indexer: Any = None
        self._latest: dict[str, _LatestRun] = {}  # method -> its latest query (``warm``)
        self._latest_lock = threading.Lock()
        self._bm25_pool: ThreadPoolExecutor | None = None  # builds in-memory BM25 postings off the query path
        self._question_ner: tuple[Callable[[str], list[str]] | None] | None = None  # made on first use

    @classmethod
    def open(
        cls,
        store_dir: str | Path | None = None,
        overrides: dict[str, Any] | None = None,
        readonly: bool = False,
    ) -> Pathweaver:
        """Load settings for ``store_dir`` (defaults < pathweaver.toml < env < ``overrides``) and open the store."""
        return cls(load_settings(store_dir, overrides), readonly=readonly)

    # -- connections -----------------------------------------------------------------------------------------
    @property
    def reader(self) -> StoreReader:
        """This thread's reader (its own connection; WAL readers never block the writer)."""
        reader = getattr(self._local, "reader", None)
        if reader is None:
            if threading.current_thread() is threading.main_thread():
                db = self._main_db
            else:
                db = Database(self.settings.store_dir, readonly=self.readonly)
                with self._dbs_lock:
                    self._dbs.append(db)
            reader = StoreReader(db)
            self._local.reader = reader
        return reader

    @property
    def embedder(self) -> Embedder:
        return get_embedder(self.settings.models.embedding_model, self.settings.models.device)

    def _indexer_instance(self) -> Any:
        from pathweaver.ingest.pipeline import Indexer

        if self.readonly:
            raise StoreError("this store was opened read-only; indexing needs write access")
        if self._indexer is None:
            self._write_db = Database(self.settings.store_dir)
            with self._dbs_lock:
                self._dbs.append(self._write_db)
            self._indexer = Indexer(self._write_db, self.settings, self.embedder)
        return self._indexer

    def close(self) -> None:
        with self._dbs_lock:
            pool, self._bm25_pool = self._bm25_pool, None
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)  # a build in progress ends before its connection closes
        with self._dbs_lock:
            for db in self._dbs:
                with contextlib.suppress(Exception):  # closing is best effort
                    db.close()
            self._dbs.clear()

    def __enter__(self) -> Pathweaver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- indexing --------------------------------------------------------------------------------------------
    def index(self, paths: list[Path], exact: bool = True, progress: ProgressFn | None = None) -> IndexReport:
        """Make the store match ``paths`` (files or folders); see ``Indexer.index_paths``."""
        missing = [str(p) for p in paths if not Path(p).exists()]
        if missing:
            raise ConfigError(f"no such file or folder: {', '.join(missing)}")
        with self._write_lock:
            return self._indexer_instance().index_paths([Path(p) for p in paths], exact=exact, progress=progress)

    def apply_changes(self, changed: set[Path], removed: set[Path]) -> IndexReport:
        """Apply one watcher batch."""
        with self._write_lock:
            return self._indexer_instance().apply_changes(changed, removed)

    def set_folder(self, path: Path, state: str | None) -> None:
        """Record a folder as 'watched', 'indexed' or 'removed' in the store (None forgets it)."""
        with self._write_lock:
            self._indexer_instance().set_folder(path, state)

    def folders(self) -> dict[str, str]:
        """The folders recorded in the store and their states."""
        from pathweaver.store.reads import folder_states

        return folder_states(self.reader.db.conn)

    def prune_missing(self) -> list[str]:
        """Delete the documents whose files are gone (``ingest.documents.prune_missing``); their paths."""
        from pathweaver.ingest.documents import prune_missing

        if self.readonly:
            return []
        with self._write_lock:
            return prune_missing(self._main_db)

    def refresh(self) -> dict[str, Any]:
        """Recompute what corpus statistics decide (ER entities, relations, synonyms)."""
        with self._write_lock:
            return self._indexer_instance().refresh()

    # -- reads -----------------------------------------------------------------------------------------------
    def stats(self) -> dict[str, Any]:
        return self.reader.stats()

    def snapshot(self) -> GraphSnapshot:
        """The cached graph snapshot; rebuilt only when the store version moved (one cheap read per call).

        The cache lives in ``store.cache`` and is shared by every reader of this store file."""
        return self.reader.snapshot()

    def _check_embedding(self) -> None:
        stored = self.reader.db.get_meta("embedding_model")
        if stored is not None and stored != self.settings.models.embedding_model:
            raise StoreError(
                f"store {self.settings.store_dir} was built with embedding model {stored!r}, but "
                f"{self.settings.models.embedding_model!r} is configured; set models.embedding_model back, or "
                "rebuild the store with another --store"
            )

    def env(self, snapshot: GraphSnapshot | None = None) -> RetrievalEnv:
        """What retrieval methods run against: the snapshot (or ``snapshot``), BM25 over chunks, the embedder and
        the store's word document frequencies."""
        snap = snapshot or self.snapshot()

        def bm25_chunks(text: str, k: int) -> list[tuple[int, float]]:
            out = []
            for chunk_id, score in self.reader.bm25_chunks(text, k, self.bm25_index(snap, wait=True)):
                idx = snap.chunk_index.get(int(chunk_id))
                if idx is not None:
                    out.append((idx, float(score)))
            return out

        def word_df(words: list[str]) -> dict[str, int]:
            return self.reader.gram_df(words)  # the calling thread's connection

        return RetrievalEnv(snapshot=snap, bm25_chunks=bm25_chunks, encode=self.embedder.encode_queries, word_df=word_df,
                            question_ner=self.question_ner())

    def question_ner(self) -> Callable[[str], list[str]] | None:
        """NER on questions with the store's pipeline and labels (``extract.entities`` with ``ner`` and
        ``retrieval.question_ner`` on), else None; spaCy loads on the first question, once per process."""
        if self._question_ner is None:
            from pathweaver.extract.graph import ExtractParams, question_ner_names

            on = self.settings.extract.question_ner
            self._question_ner = (question_ner_names(ExtractParams.from_settings(self.settings.extract)) if on
                                  else None,)
        return self._question_ner[0]

    def bm25_index(self, snap: GraphSnapshot, wait: bool = False) -> Bm25Index | None:
        """The in-memory BM25 postings for ``snap`` (``store.bm25``): FTS5's scores at a tenth of the time, with
        the true totals after deletes. They are read once per snapshot on a background thread. Retrieval waits for them (``wait``), so every query on a store version ranks alike, in the
        CLI as in the server, whose ``warm`` builds them right after a change. Without ``wait`` (``search`` in
        ``bm25`` mode, which must find a file committed a moment ago) a query gets None until they are ready, and
        FTS5 answers. None also when the store has moved past ``snap`` before the build read it, or the store is
        over ``bm25.MAX_POSTINGS``."""

        def schedule() -> Future[Bm25Index | None]:
            with self._dbs_lock:
                if self._bm25_pool is None:
                    self._bm25_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="pathweaver-bm25")
                pool = self._bm25_pool
            return pool.submit(lambda: self.reader.bm25_index(snap.version))  # the pool thread's own connection

        future = cached(snap, ("bm25-index",), schedule, synonym_free=True)  # the chunks, not the synonyms
        if not (wait or future.done()):
            return None
        try:
            return future.result()
        except Exception:  # the service closed under the build, or the store could not be read: FTS5 answers
            log.debug("building the BM25 postings failed", exc_info=True)
            return None

    def query(self, text: str, keywords: list[str] | None = None) -> Query:
        text = (text or "").strip()
        if not text:
            raise ConfigError("the question is empty")
        self._check_embedding()
        return Query(text=text, keywords=list(keywords or []), embed=self.embedder.encode_one)

    def remember_queries(self, texts: list[str]) -> None:
        """Embed questions ``query`` will be asked for soon, in one batch (see ``Embedder.remember``)."""
        self.embedder.remember([t.strip() for t in texts if t and t.strip()])

    def method_params(self, method: str, params: dict[str, Any] | None) -> dict[str, Any]:
        """Config defaults for ``method`` (``[retrieval.<method>]``) overridden by ``params``."""
        base, _ = parse_method(method)
        merged = dict(self.settings.retrieval.get(base, {}))
        if method != base:
            merged.update(self.settings.retrieval.get(method, {}))
        merged.update(params or {})
        return merged

    def retrieve(
        self,
        text: str,
        method: str = "hybrid",
        top_k: int = DEFAULT_TOP_K,
        params: dict[str, Any] | None = None,
        keywords: list[str] | None = None,
        snapshot: GraphSnapshot | None = None,
    ) -> RetrievalResult:
        """Run one retrieval method (on ``snapshot``, default the current one); ``result.info['seconds']`` is the
        wall time without loading the model."""
        self.embedder.warm()  # load outside the timed region
        start = time.perf_counter()
        base = pank_base(method)
        if base is not None:
            result = self._retrieve_planned(text, method, base, top_k, params, keywords)
        else:
            query = self.query(text, keywords)
            env = self.env(snapshot)
            if env.snapshot.n_passages == 0:
                result = RetrievalResult(method=method, chunks=[])
            else:
                merged = self.method_params(method, params)
                result = run_method(env, query, method, top_k, merged)
                self._remember_run(method, _LatestRun(query, top_k, merged, time.perf_counter() - start))
        result.info["seconds"] = time.perf_counter() - start
        return result

    def _remember_run(self, method: str, run: _LatestRun) -> None:
        with self._latest_lock:
            old = self._latest.get(method)
            if old is not None:
                run.seconds = min(run.seconds, old.seconds)
            self._latest[method] = run

    def warm(self, stop: Callable[[], bool] | None = None) -> GraphSnapshot:
        """Build the snapshot of the store as it is now and, on it, what the methods this process has run build
        once per snapshot: the BM25 postings (on their own thread) and, as each method's latest query runs again
        and its result is dropped, the node-space graph and transition matrix, projections and pair index. The
        server calls this after every change, so the next query does not pay for building them. A method whose
        quickest run took over ``WARM_REPLAY_SECONDS`` is left out, and the replays stop as soon as ``stop()`` says so (the server's indexer has a batch under way)."""
        snap = self.snapshot()
        self.bm25_index(snap)  # started on its own thread while the replays below build the graph structures
        with self._latest_lock:
            latest = list(self._latest.items())
        for method, run in latest:
            if stop is not None and stop():
                break
            if run.seconds > WARM_REPLAY_SECONDS:
                continue
            env = self.env()
            if env.snapshot is not snap:  # a newer version arrived; its own warm-up follows
                break
            try:
                run_method(env, run.query, method, run.top_k, run.params)
            except Exception:  # best effort: the next real query builds what it needs, or says why
                log.debug("warming %s on the new snapshot failed", method, exc_info=True)
        self.bm25_index(snap, wait=True)
        return snap

    def _retrieve_planned(
        self, text: str, method: str, base: str, top_k: int, params: dict[str, Any] | None,
        keywords: list[str] | None,
    ) -> RetrievalResult:
        """``pank:<base>``: PankRAG's plan (heuristic DAG, no LLM) executed with ``base`` per node (dependency
        reranking, extractive sub-answers, top-down rephrase); the nodes' rankings and the whole question's own
        are fused by reciprocal rank. The no-LLM form keeps evaluation deterministic; ``ask --decompose`` runs
        the same plan with the configured model. ``params`` go to ``base``; ``[retrieval.pank]`` takes none
        (the base method's own table applies)."""
        from pathweaver.models.llm import NoneBackend
        from pathweaver.planner.decompose import decompose
        from pathweaver.planner.execute import execute_plan

        stale = sorted(self.settings.retrieval.get(PANK, {}))
        if stale:  # sub_answer chose between two ways until issue 25: a config naming it must not pass unnoticed
            raise ConfigError(f"[retrieval.{PANK}] takes no settings (the base method's table applies); remove "
                              f"{', '.join(stale)}")
        llm = NoneBackend()
        plan, _ = decompose(text, llm)
        if len(plan.nodes) > 1 and plan.levels:  # the question and the first sub-questions in one batch
            self.remember_queries([text, *(plan.node(n).question for n in plan.levels[0])])
        root = self.retrieve(text, base, top_k, params, keywords)
        if len(plan.nodes) <= 1:
            return RetrievalResult(method=method, chunks=root.chunks, info={"plan_nodes": 1})
        env = self.env()
        trace = execute_plan(plan, lambda q: self.retrieve(q, base, top_k, params), env.encode, llm, env.snapshot,
                             top_k, root_hits=list(root.chunks), answer_leaves=False,
                             prefetch=self.remember_queries, word_df=env.word_df)
        return RetrievalResult(method=method, chunks=trace.merged, info={"plan_nodes": len(plan.nodes)})

    def retrieve_json(
        self,
        text: str,
        method: str = "hybrid",
        top_k: int = DEFAULT_TOP_K,
        params: dict[str, Any] | None = None,
        keywords: list[str] | None = None,
        descriptions: bool = True,
    ) -> dict[str, Any]:
        """``retrieve`` shaped as the CLI/tool JSON contract (see ``shape``). A method that ranks chunks alone runs on
        the chunks' view (``StoreReader.passages``): a cold CLI query then reads no entity or relation rows."""
        snap = self.reader.passages() if method in CHUNK_METHODS else self.snapshot()
        result = self.retrieve(text, method, top_k, params, keywords, snapshot=snap)
        return self.shape(result, snap, descriptions=descriptions)

    def shape(self, result: RetrievalResult, snapshot: GraphSnapshot | None = None,
              descriptions: bool = True) -> dict[str, Any]:
        """JSON-ready result of the shape ``results.RetrievalOut``: chunks with doc/title/chunk_id/score/text/span,
        paths with citations, subgraph, and triples with their source sentence as ``description`` (left out unless
        ``descriptions``)."""
        snap = snapshot or self.snapshot()
        paths = [
            PathOut.model_construct(
                text=path.text,
                nodes=[snap.entity_names[n] for n in path.nodes],
                relations=[snap.rel_labels[r] if r >= 0 else "synonym of" for r in path.relations],
                relation_ids=[int(snap.rel_ids[r]) if r >= 0 else None for r in path.relations],
                reliability=float(path.reliability),
                citations=[Citation.model_construct(**snap.citation(p)) for p in path.passages],
            )
            for path in result.paths
        ]
        subgraph = None
        if result.subgraph is not None:
            made = result.subgraph.to_json()
            subgraph = SubgraphOut.model_construct(**{**made, "edges": [tuple(e) for e in made["edges"]]})
        triples = [
            TripleOut.model_construct(id=int(snap.rel_ids[r]), text=snap.triple_text(r),
                                      **({"description": snap.rel_descriptions[r]} if descriptions else {}))
            for r in result.triples
        ]
        info = {k: v for k, v in result.info.items() if k != "seconds"}
        info["backfill_share"] = result.backfill_share()
        return dump(RetrievalOut.model_construct(
            method=result.method,
            chunks=[self._chunk_out(snap, hit.passage, hit.score) for hit in result.chunks],
            paths=paths,
            subgraph=subgraph,
            triples=triples,
            info=_jsonable(info),
            seconds=float(result.info.get("seconds", 0.0)),
        ))

    @staticmethod
    def _chunk_out(snap: GraphSnapshot, passage: int, score: float) -> ChunkOut:
        return ChunkOut.model_construct(**snap.citation(passage), score=float(score), text=snap.chunk_texts[passage])

    def search(self, query: str, mode: str = "hybrid", k: int = DEFAULT_TOP_K) -> list[dict[str, Any]]:
        """Plain chunk search: ``dense``, ``bm25`` or ``hybrid``, the same chunks and scores as those retrieval
        methods. None of them waits for the graph snapshot, whose rebuild after a change is slow: ``bm25`` reads
        the full-text index and the chunk rows directly, ``dense`` and ``hybrid`` run on the chunks alone
        (``StoreReader.passages``)."""
        if mode not in SEARCH_MODES:
            raise ConfigError(f"unknown search mode {mode!r}; use one of {', '.join(SEARCH_MODES)}")
        check_top_k(k)
        if mode == "bm25":
            latest = self.reader.cache.latest()  # its postings serve while the store is still at its version
            rows = self.reader.bm25_rows(self.query(query).text, k, self.bm25_index(latest) if latest else None)
            return [dump(ChunkOut.model_construct(**citation_json(doc, title, chunk_id, start, end, locator),
                                                  score=score, text=text))
                    for chunk_id, score, doc, title, start, end, locator, text in rows]
        question = self.query(query)
        self.embedder.warm()  # load the model before reading the chunks
        snap = self.reader.passages()
        if snap.n_passages == 0:
            return []
        result = run_method(self.env(snap), question, mode, k, self.method_params(mode, None))
        return self.shape(result, snap)["chunks"]

    def documents(self) -> list[dict[str, Any]]:
        return self.reader.documents()

    def document_chunks(self, path: str) -> list[dict[str, Any]]:
        return self.reader.document_chunks(path)

    def entity(self, name: str) -> dict[str, Any] | None:
        return self.reader.entity(name)

    def neighbors(self, name: str, hops: int = 1, limit: int = 25) -> dict[str, Any]:
        if hops < 1 or limit < 1:
            raise ConfigError("hops and limit must be at least 1")
        return self.reader.neighbors(name, hops, limit)

    # -- planner and answers ---------------------------------------------------------------------------------
    def backend_choice(self, sampling_offered: bool = False) -> Any:
        """Which LLM backend ``models.llm_backend`` resolves to, and why (``models.llm.BackendChoice``)."""
        from pathweaver.models.llm import choose_backend

        return choose_backend(self.settings.models, sampling_offered)

    def llm(self, override: Any = None, progress: BeatFn | None = None) -> Any:
        """The LLM backend: ``override`` (MCP sampling) when given and allowed, else the configured one
        (``auto``: ``models.llm.choose_backend``). With ``progress``, a call slower than a second reports
        ``progress(seconds, message)`` every second until it returns (``models.llm.Heartbeat``)."""
        from pathweaver.models.llm import EXTRACTIVE, Heartbeat, resolve_backend

        backend = resolve_backend(self.settings.models, override)
        if progress is not None and backend.name != EXTRACTIVE:
            return Heartbeat(backend, progress)
        return backend

    def plan(
        self, question: str, plan: Any = None, llm: Any = None, progress: BeatFn | None = None
    ) -> dict[str, Any]:
        """PankRAG §2.2 DAG: the caller's plan (validated), else the LLM's, else the heuristic one."""
        from pathweaver.planner.decompose import decompose

        result, trace = decompose(
            question, self.llm(llm, progress), plan, timeout=self.settings.models.llm_timeout
        )
        return dump(result.to_out(trace=_jsonable(trace)))

    def rerank(
        self, question: str, candidates: list[str], resolved: list[str], alpha: float | None = None
    ) -> list[dict[str, Any]]:
        """PankRAG Eq. 4-5 dependency-aware reranking of free-text candidates."""
        from pathweaver.planner.rerank import rerank_texts

        if alpha is not None and not 0.0 <= alpha <= 1.0:
            raise ConfigError(f"alpha must lie in [0, 1], got {alpha}")
        return rerank_texts(question, candidates, resolved, self.embedder.encode_queries, alpha)

    def ask(
        self,
        question: str,
        method: str | None = None,
        decompose: bool = False,
        plan: Any = None,
        top_k: int = DEFAULT_TOP_K,
        params: dict[str, Any] | None = None,
        llm: Any = None,
        progress: BeatFn | None = None,
    ) -> dict[str, Any]:
        """Answer with citations; never fails because of the model (falls back to an extractive answer).
        ``llm`` is the client's sampling backend when it offers one; ``progress`` as in ``llm``."""
        from pathweaver.answer import ask

        method = method or ANSWER_METHOD
        self.query(question)  # validates the question and the embedding model

        def retrieve(text: str, keywords: list[str] | None) -> RetrievalResult:
            return self.retrieve(text, method, top_k, params, keywords)

        out = ask(
            self.env(),
            question,
            retrieve=retrieve,
            method=method,
            top_k=top_k,
            llm=self.llm(llm, progress),
            decompose=decompose or plan is not None,
            plan=plan,
            timeout=self.settings.models.llm_timeout,
            prefetch=self.remember_queries,
        )
        out["llm"]["reason"] = self.backend_choice(llm is not None).reason
        return _jsonable(out)


def _jsonable(value: Any) -> Any:
    """Convert numpy scalars/arrays and tuples inside ``value`` to plain JSON types."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, Path):
        return str(value)
    return value
