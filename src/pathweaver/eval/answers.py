"""``pathweaver eval --answers``: answer a split's questions and score them on the gold answers.

Scores (SQuAD v1.1 normalisation, ``metrics.normalize_answer``): exact match and token F1 against the best gold
alias, and answer support, the share of questions whose gold answer appears in the chunks the answer cites (the
result's ``citations``, the evidence a user is shown with the answer). ``marked_support`` is the same over only
the chunks the answer text marks with ``[n]`` (all cited chunks when it marks none). Yes/no questions count for
EM and F1 only: a chunk cannot contain their answer.

Answerers: ``ask`` (``Pathweaver.ask``, with the configured LLM backend), ``extractive`` (retrieve, then
``extractive.extractive_answer`` over the top-k chunks) and ``baseline`` (the sentence of the top dense chunk
most similar to the question).

On a notes benchmark folder (``eval.notes``) the gold is key facts, not answers: the scores are key-fact coverage
over answerable questions and, over unanswerable ones, the share whose answer says that the notes don't say
(``eval.notes_runner``), each per question kind with its Wilson 95% interval.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pathweaver.config import DEFAULT_TOP_K, ConfigError
from pathweaver.eval import metrics
from pathweaver.eval.datasets import Dataset, Question, load_dataset
from pathweaver.eval.ledger import Ledger
from pathweaver.eval.notes import is_notes_set, load_notes
from pathweaver.eval.runner import ProgressFn, latency_summary, open_store, split_questions

ANSWERERS = ("ask", "extractive", "baseline")
_MARK = re.compile(r"\[(\d+)\]")
_LABEL = re.compile(r"^\s*(?:Extractive answer|Answer)[^:]{0,60}:\s*", re.I)


def answer_text(answer: str) -> str:
    """The answer without a leading label ("Extractive answer (...): ") and ``[n]`` citation markers."""
    return " ".join(_MARK.sub(" ", _LABEL.sub("", answer)).split()).strip(" .")


def cited_texts(result: dict[str, Any]) -> tuple[list[str], list[str]]:
    """(texts of the chunks the result cites, texts of those the answer text marks with ``[n]``) of an ``ask``
    result; a citation's text is its chunk item's in the result's context."""
    chunks = {int(i["n"]): str(i["text"]) for i in result.get("context", {}).get("items", []) if i.get("kind") == "chunk"}
    listed = [int(c["n"]) for c in result.get("citations", []) if "n" in c]
    cited = [chunks[n] for n in dict.fromkeys(listed) if n in chunks] or list(chunks.values())
    marks = [int(m) for m in _MARK.findall(str(result.get("answer", "")))]
    marked = [chunks[n] for n in dict.fromkeys(marks) if n in chunks] or cited
    return cited, marked


def _extractive(pw: Any, question: str, method: str, top_k: int, params: dict[str, Any] | None,
                baseline: bool) -> dict[str, Any]:
    """An ``ask``-shaped result from the extractive answerer (or the baseline) over retrieved chunks."""
    from pathweaver.extractive import baseline_answer, extractive_answer
    from pathweaver.retrieval.context import build_context

    start = time.perf_counter()
    result = pw.retrieve(question, method="dense" if baseline else method, top_k=1 if baseline else top_k,
                         params=None if baseline else params)
    env = pw.env()
    context = build_context(env.snapshot, result, "chunks", max_items=max(top_k, 1), question=question,
                            merged=not baseline)  # as ``ask`` without a model reads them
    supported = True
    if baseline:
        text, cites = baseline_answer(question, context, env.encode)
        marked = f"{text} {''.join(f'[{n}]' for n in cites)}".strip()
    else:
        answer = extractive_answer(question, context, env.encode, word_df=env.word_df,
                                   n_docs=env.snapshot.n_passages)
        marked, supported = answer.marked, answer.supported
    return {
        "answer": marked,
        "supported": supported,
        "citations": context.citations,
        "context": context.to_dict(),
        "llm": {"backend": "baseline" if baseline else "extractive"},
        "seconds": time.perf_counter() - start,
    }


def score_answer(question: Question, result: dict[str, Any]) -> dict[str, Any]:
    """EM, F1 and support of one answer (support None for a yes/no question)."""
    pred = answer_text(str(result.get("answer", "")))
    cited, marked = cited_texts(result)
    yes_no = metrics.is_yes_no(question.answers)
    return {
        "index": question.index,
        "question": question.text,
        "gold": question.answers,
        "prediction": pred,
        "exact_match": metrics.exact_match(pred, question.answers),
        "f1": metrics.token_f1(pred, question.answers),
        "supported": None if yes_no else metrics.answer_supported(question.answers, cited),
        "marked": None if yes_no else metrics.answer_supported(question.answers, marked),
        "backend": str(result.get("llm", {}).get("backend", "?")),
    }


def summarize(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Means of EM and F1 over every row, of support over the rows that have one."""
    if not rows:
        raise ConfigError("no answers to score")
    judged = [r for r in rows if r["supported"] is not None]
    return {
        "exact_match": sum(r["exact_match"] for r in rows) / len(rows),
        "f1": sum(r["f1"] for r in rows) / len(rows),
        "answer_support": sum(bool(r["supported"]) for r in judged) / len(judged) if judged else None,
        "marked_support": sum(bool(r["marked"]) for r in judged) / len(judged) if judged else None,
        "n_support": len(judged),
        "backends": sorted({r["backend"] for r in rows}),
    }


def run_answer_eval(
    dataset_dir: Path | str,
    split_name: str = "dev",
    method: str = "hybrid",
    top_k: int = DEFAULT_TOP_K,
    params: dict[str, Any] | None = None,
    store_root: Path | str = ".pathweaver",
    answerer: str = "ask",
    decompose: bool = False,
    progress: ProgressFn | None = None,
    overrides: dict[str, Any] | None = None,
    record: bool = True,
    limit: int | None = None,
    dataset: Dataset | None = None,
    details: bool = False,
) -> dict[str, Any]:
    """Answer one split with ``answerer`` and score it; appends the run to the ledger unless ``record`` is false.
    ``details`` adds every question's prediction and scores under ``"questions"``."""
    if answerer not in ANSWERERS:
        raise ConfigError(f"answerer must be one of {', '.join(ANSWERERS)}, got {answerer!r}")
    if dataset is None and is_notes_set(Path(dataset_dir)):
        return _notes_answers(Path(dataset_dir), split_name, method, top_k, params, Path(store_root), answerer,
                              decompose, progress, overrides, record, limit, details)
    data, questions = split_questions(dataset or load_dataset(dataset_dir), split_name, top_k, limit)
    missing = [q.index for q in questions if not q.answers]
    if missing:
        raise ConfigError(f"{data.name}: questions {missing[:5]} have no gold answer; --answers needs them")
    pw, _, report = open_store(Path(store_root), data.name, data.passages, overrides, progress, data.real_titles)
    rows, seconds = [], []
    try:
        for i, q in enumerate(questions):
            if answerer == "ask":
                result = pw.ask(q.text, method=method, decompose=decompose, top_k=top_k, params=params)
            else:
                result = _extractive(pw, q.text, method, top_k, params, baseline=answerer == "baseline")
            seconds.append(float(result.get("seconds", 0.0)))
            rows.append(score_answer(q, result))
            if progress:
                progress(i + 1, len(questions), "answer")
    finally:
        pw.close()
    out: dict[str, Any] = {
        **_header(data.name, split_name, answerer, method, decompose, top_k, len(questions)),
        **summarize(rows),
        **latency_summary(seconds),
        "params": params or {},
        "index": report,
    }
    if record:
        row = {k: v for k, v in out.items() if k != "questions"}
        out["run_id"] = Ledger.for_store(store_root).append([{**row, "source": "eval-answers"}])[0]
    if details:
        out["questions"] = rows
    return out


def _header(dataset: str, split_name: str, answerer: str, method: str, decompose: bool, top_k: int,
            n_questions: int) -> dict[str, Any]:
    """The fields that name an answer run, the same on every data set."""
    return {"dataset": dataset, "split": split_name,
            "method": f"answers:{answerer}:{method}" + (":decompose" if decompose else ""),
            "answerer": answerer, "k": top_k, "n_questions": n_questions}


def _notes_answers(folder: Path, split_name: str, method: str, top_k: int, params: dict[str, Any] | None,
                   store_root: Path, answerer: str, decompose: bool, progress: ProgressFn | None,
                   overrides: dict[str, Any] | None, record: bool, limit: int | None, details: bool) -> dict[str, Any]:
    """``run_answer_eval`` on a notes benchmark: key-fact coverage and "the notes don't say", per kind."""
    from pathweaver.eval.notes_runner import run_notes_answers

    def answer(pw: Any, question: str) -> dict[str, Any]:
        if answerer == "ask":
            return pw.ask(question, method=method, decompose=decompose, top_k=top_k, params=params)
        return _extractive(pw, question, method, top_k, params, baseline=answerer == "baseline")

    data = load_notes(folder)
    summary, rows, index = run_notes_answers(data, split_name, method, top_k, params, store_root, answer, progress,
                                             overrides, limit)
    out: dict[str, Any] = {
        **_header(data.name, split_name, answerer, method, decompose, top_k, len(rows)),
        **summary,
        "params": params or {},
        "index": index,
    }
    if record:
        out["run_id"] = Ledger.for_store(store_root).append([{**out, "source": "eval-answers"}])[0]
    if details:
        out["questions"] = rows
    return out
