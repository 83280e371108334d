"""``QuerySide``: retrieval on the store: the methods' environment (snapshot, BM25, embedder, word frequencies),
the query checks, ``retrieve`` (PankRAG's planned form too), its JSON (``shape``), plain ``search``, and ``warm``,
which builds a new snapshot's per-method structures before the next query needs them."""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from pathweaver.config import DEFAULT_TOP_K, ConfigError, Settings
from pathweaver.results import ChunkOut, dump
from pathweaver.retrieval.floor import note_steps
from pathweaver.retrieval.graphs import cached
from pathweaver.retrieval.notes import WIDEN_FACTOR, first_per_key
from pathweaver.retrieval.presets import split_preset
from pathweaver.retrieval.registry import (
    PANK,
    PANK_PAPER_BASE,
    check_top_k,
    checked_method,
    pank_base,
    parse_method,
    plain_ranking,
    run_method,
)
from pathweaver.retrieval.types import Query, RetrievalEnv, RetrievalResult
from pathweaver.service.shape import shape_result
from pathweaver.service.store import StoreAccess
from pathweaver.store.bm25_terms import Bm25Ranking
from pathweaver.store.snapshot import GraphSnapshot, citation_json

log = logging.getLogger(__name__)
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


class QuerySide(StoreAccess):
    """Queries on a store (the facade's query side; ``service.Pathweaver`` adds answers and indexing)."""

    def __init__(self, settings: Settings, readonly: bool = False) -> None:
        super().__init__(settings, readonly)
        self._latest: dict[str, _LatestRun] = {}  # method -> its latest query (``warm``)
        self._latest_lock = threading.Lock()
        self._bm25_pool: ThreadPoolExecutor | None = None  # builds in-memory BM25 postings off the query path
        self._question_ner: tuple[Callable[[str], list[str]] | None] | None = None  # made on first use

    def close(self) -> None:
        with self._dbs_lock:
            pool, self._bm25_pool = self._bm25_pool, None
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)  # a build in progress ends before its connection closes
        super().close()

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
                            question_ner=self.question_ner(),
                            dense=lambda vec: self.reader.dense_scores(snap, vec))  # the calling thread's reader

    def question_ner(self) -> Callable[[str], list[str]] | None:
        """NER on questions with the store's pipeline and labels (``extract.entities`` with ``ner`` and
        ``retrieval.question_ner`` on), else None; spaCy loads on the first question, once per process."""
        if self._question_ner is None:
            from pathweaver.extract.graph import ExtractParams, question_ner_names

            on = self.settings.extract.question_ner
            self._question_ner = (question_ner_names(ExtractParams.from_settings(self.settings.extract)) if on
                                  else None,)
        return self._question_ner[0]

    def bm25_index(self, snap: GraphSnapshot, wait: bool = False) -> Bm25Ranking | None:
        """What BM25 ranks with on ``snap`` (``store.bm25``: every posting in memory, or past ``bm25.MAX_POSTINGS``
        tokens the chunks' lengths, each query reading its terms' postings): FTS5's scores at a tenth of the time,
        with the true totals after deletes. They are read once per snapshot on a background thread. Retrieval waits
        for them (``wait``), so every query on a store version ranks alike, in the CLI as in the server, whose ``warm`` builds them right after a change. Without ``wait`` (``search`` in
        ``bm25`` mode, which must find a file committed a moment ago) a query gets None until they are ready, and
        FTS5 answers. None also when the store has moved past ``snap`` before the build read it."""

        def schedule() -> Future[Bm25Ranking | None]:
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
            merged = self.method_params(method, params)
            if env.snapshot.n_passages == 0:  # bad input is an error on an empty store too (``_used_params``)
                used = self._used_params(method, top_k, params)
                result = RetrievalResult(method=method, chunks=[], info={"preset": used["preset"], "params": used})
            else:
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
        (the base method's own table applies). A question the planner leaves whole gets ``base``'s own list; a
        plan fuses the plain rankings of the question and its nodes (``plain_ranking``: no set selection)."""
        from pathweaver.models.llm import NoneBackend
        from pathweaver.planner.decompose import decompose
        from pathweaver.planner.execute import execute_plan

        own = dict(self.settings.retrieval.get(PANK, {}))
        preset, _ = split_preset({**own, **(params or {})})
        stale = sorted(k for k in own if k != "preset")
        if stale:  # sub_answer chose between two ways until issue 25: a config naming it must not pass unnoticed
            raise ConfigError(f"[retrieval.{PANK}] takes no settings but preset (the base method's table applies); "
                              f"remove {', '.join(stale)}")
        if preset == "paper":
            # PankRAG's paper retrieves each sub-question with LightRAG, whose nearest here is hybrid, and fuses
            # only the sub-questions' lists (presets.py)
            base = PANK_PAPER_BASE if method == PANK else base
            params = {**(params or {}), "preset": "paper"}
        llm = NoneBackend()
        plan, _ = decompose(text, llm)
        if len(plan.nodes) > 1 and plan.levels:  # the question and the first sub-questions in one batch
            self.remember_queries([text, *(plan.node(n).question for n in plan.levels[0])])
        if len(plan.nodes) <= 1:
            root = self.retrieve(text, base, top_k, params, keywords)
            return RetrievalResult(method=method, chunks=root.chunks,
                                   info={"plan_nodes": 1, "base": base, "preset": preset,
                                         "params": root.info.get("params", {})})
        whole = plain_ranking(base, params, sub_question=False)
        params = plain_ranking(base, params)
        if preset == "paper":  # PankRAG fuses the sub-questions' lists alone: the whole question is not retrieved
            root_hits, used = None, self._used_params(base, top_k, params)
        else:
            root = self.retrieve(text, base, top_k, whole, keywords)
            root_hits, used = list(root.chunks), root.info.get("params", {})
        env = self.env()
        trace = execute_plan(plan, lambda q: self.retrieve(q, base, top_k, params), env.encode, llm, env.snapshot,
                             top_k, root_hits=root_hits, answer_leaves=False, prefetch=self.remember_queries,
                             word_df=env.word_df)
        result = RetrievalResult(method=method, chunks=trace.merged,
                                 info={"plan_nodes": len(plan.nodes), "base": base, "preset": preset, "params": used})
        if preset == "paper":
            return result
        # the fused list stands on hybrid's notes as its base's own list does (retrieval/floor.py)
        return note_steps(env, self.query(text, keywords), result, top_k, bool(used.get("hybrid_floor")),
                          int(used.get("linked_notes", 0)))

    def _used_params(self, method: str, top_k: int, params: dict[str, Any] | None) -> dict[str, Any]:
        """The parameters ``method`` runs with for ``params`` (its config table under them), preset first."""
        merged = self.method_params(method, params)
        _, resolved = checked_method(method, top_k, merged)
        return {"preset": split_preset(merged)[0], **dataclasses.asdict(resolved)}

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
        """``result`` on ``snapshot`` (default the current one) as JSON: ``shape.shape_result``."""
        return shape_result(result, snapshot or self.snapshot(), descriptions)

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
            rows = self.reader.bm25_rows(self.query(query).text, k * WIDEN_FACTOR,
                                         self.bm25_index(latest) if latest else None)
            return [dump(ChunkOut.model_construct(**citation_json(doc, title, chunk_id, start, end, locator),
                                                  score=score, text=text, merged_chunks=[r[0] for r in rest]))
                    for (chunk_id, score, doc, title, start, end, locator, text, _), rest
                    in first_per_key(rows, lambda r: r[8], k)]
        question = self.query(query)
        self.embedder.warm()  # load the model before reading the chunks
        snap = self.reader.passages()
        if snap.n_passages == 0:
            return []
        result = run_method(self.env(snap), question, mode, k, self.method_params(mode, None))
        return self.shape(result, snap)["chunks"]

