"""``AnswerSide``: the LLM backend, PankRAG's plan and dependency-aware reranking, and cited answers."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pathweaver.config import DEFAULT_TOP_K, ConfigError
from pathweaver.results import dump
from pathweaver.retrieval.registry import ANSWER_METHOD
from pathweaver.retrieval.types import RetrievalResult
from pathweaver.service.queries import QuerySide
from pathweaver.service.shape import jsonable

if TYPE_CHECKING:
    from pathweaver.models.llm import BackendChoice, LLMBackend

BeatFn = Callable[[float, str], None]  # (seconds since the call began, message): a slow LLM call's heartbeat


class AnswerSide(QuerySide):
    """Plans and answers (the facade's answer side)."""

    def backend_choice(self, sampling_offered: bool = False) -> BackendChoice:
        """Which LLM backend ``models.llm_backend`` resolves to, and why (``models.llm.BackendChoice``)."""
        from pathweaver.models.llm import choose_backend

        return choose_backend(self.settings.models, sampling_offered)

    def llm(self, override: LLMBackend | None = None, progress: BeatFn | None = None) -> LLMBackend:
        """The LLM backend: ``override`` (MCP sampling) when given and allowed, else the configured one
        (``auto``: ``models.llm.choose_backend``). With ``progress``, a call slower than a second reports
        ``progress(seconds, message)`` every second until it returns (``models.llm.Heartbeat``)."""
        from pathweaver.models.llm import EXTRACTIVE, Heartbeat, resolve_backend

        backend = resolve_backend(self.settings.models, override)
        if progress is not None and backend.name != EXTRACTIVE:
            return Heartbeat(backend, progress)
        return backend

    def plan(
        self, question: str, plan: dict[str, Any] | None = None, llm: LLMBackend | None = None,
        progress: BeatFn | None = None,
    ) -> dict[str, Any]:
        """PankRAG §2.2 DAG: the caller's plan (validated), else the LLM's, else the heuristic one."""
        from pathweaver.planner.decompose import decompose

        result, trace = decompose(
            question, self.llm(llm, progress), plan, timeout=self.settings.models.llm_timeout
        )
        return dump(result.to_out(trace=jsonable(trace)))

    def rerank(
        self, question: str, candidates: list[str], resolved: list[str], alpha: float | None = None
    ) -> list[dict[str, Any]]:
        """PankRAG Eq. 4-5 dependency-aware reranking of free-text candidates (``results.RerankItem`` each)."""
        from pathweaver.planner.rerank import rerank_texts

        if alpha is not None and not 0.0 <= alpha <= 1.0:
            raise ConfigError(f"alpha must lie in [0, 1], got {alpha}")
        return [dump(item) for item in rerank_texts(question, candidates, resolved, self.embedder.encode_queries,
                                                    alpha)]

    def ask(
        self,
        question: str,
        method: str | None = None,
        decompose: bool = False,
        plan: dict[str, Any] | None = None,
        top_k: int = DEFAULT_TOP_K,
        params: dict[str, Any] | None = None,
        llm: LLMBackend | None = None,
        progress: BeatFn | None = None,
    ) -> dict[str, Any]:
        """Answer with citations (``results.AskOut``); never fails because of the model (falls back to an
        extractive answer).
        ``llm`` is the client's sampling backend when it offers one; ``progress`` as in ``llm``."""
        from pathweaver.answer import ask

        method = method or ANSWER_METHOD
        self.query(question)  # validates the question and the embedding model

        def retrieve(text: str, keywords: list[str] | None, k: int | None = None) -> RetrievalResult:
            return self.retrieve(text, method, k or top_k, params, keywords)

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
        out.llm.reason = self.backend_choice(llm is not None).reason
        return jsonable(dump(out))


