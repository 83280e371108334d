"""``pathweaver eval``: index a passage data set into a cached store, run its questions, score the rankings.

Each passage becomes one ``<position>.md`` file in ``<store_root>/eval/<dataset>/corpus/``: front matter ``title:``
with the passage's real title (so the store, results and ``show --html`` call it by that title), then the title
again as a ``# `` heading line (so the chunk text, and with it dense and BM25 scoring, keeps the title words), then
the text. ``titles.json`` maps position -> passage id, and retrieved chunks are mapped back to passage ids through
their document's file name. The store ``<store_root>/eval/<dataset>/store`` is
re-indexed on every run, which costs little when nothing changed (the indexer skips unchanged files).

Every all-evidence@k and recall@k figure comes with a 95% interval (``*_ci95``): Wilson score for all-evidence (a
proportion), a percentile bootstrap over questions with a fixed seed for recall (``eval.intervals``). A notes
benchmark folder (``questions.jsonl`` beside folders of notes, ``eval.notes``) is run by ``eval.notes_runner``.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from pathweaver.config import DEFAULT_TOP_K, ConfigError
from pathweaver.eval import intervals, metrics
from pathweaver.eval.datasets import Dataset, Question, load_dataset, split
from pathweaver.eval.ledger import Ledger
from pathweaver.eval.notes import is_notes_set, load_notes

Q = TypeVar("Q")
ProgressFn = Callable[[int, int, str], None]
TITLES_FILE = "titles.json"
FILE_DIGITS = 6
EXTRA_K = 8  # all_evidence@8, the figure fast-graphrag publishes


SUFFIX = ".md"


def file_name(position: int) -> str:
    return f"{position:0{FILE_DIGITS}d}{SUFFIX}"


def passage_body(title: str, text: str) -> str:
    """A passage as Markdown: its title in front matter and as the first heading, then the text."""
    one_line = " ".join(title.split())
    return f"---\ntitle: {one_line}\n---\n# {one_line}\n\n{text}\n"


def prepare_corpus(passages: Sequence[tuple[str, str]], corpus_dir: Path,
                   real_titles: Mapping[str, str] | None = None) -> list[str]:
    """Write one file per passage (only those whose content changed), drop stale ones; returns the passage ids.
    ``real_titles`` maps a passage id to the title written into the file (ids made unique by a " (n)" suffix
    carry their passage's own title)."""
    corpus_dir.mkdir(parents=True, exist_ok=True)
    titles = [title for title, _ in passages]
    real = real_titles or {}
    wanted = set()
    for position, (title, text) in enumerate(passages):
        path = corpus_dir / file_name(position)
        wanted.add(path.name)
        body = passage_body(real.get(title, title), text)
        if not path.exists() or path.read_text(encoding="utf-8") != body:
            path.write_text(body, encoding="utf-8")
    for path in corpus_dir.iterdir():
        if path.is_file() and path.name not in wanted and path.suffix in (".txt", SUFFIX):
            path.unlink()
    map_path = corpus_dir.parent / TITLES_FILE
    map_path.write_text(json.dumps(titles, ensure_ascii=False), encoding="utf-8")
    return titles


def title_of(doc_path: str, titles: Sequence[str]) -> str:
    """Passage id of a corpus document path (its stem is the passage position)."""
    stem = Path(doc_path).stem
    if not stem.isdigit() or int(stem) >= len(titles):
        raise ConfigError(f"{doc_path} is not a file of this evaluation corpus")
    return titles[int(stem)]


def checked_split(questions: list[Q], data_name: str, split_name: str, top_k: int, limit: int | None) -> list[Q]:
    """The first ``limit`` of a split's ``questions``, or a clear error for a bad ``top_k`` or an empty split."""
    if top_k < 1:
        raise ConfigError(f"top_k must be at least 1, got {top_k}")
    if limit is not None:
        questions = questions[: max(0, limit)]
    if not questions:
        raise ConfigError(f"split {split_name!r} of {data_name} has no questions")
    return questions


def split_questions(data: Dataset, split_name: str, top_k: int, limit: int | None) -> tuple[Dataset, list[Question]]:
    """``data`` and the questions of ``split_name`` (the first ``limit`` of them), or a clear error."""
    return data, checked_split(split(data.questions, split_name), data.name, split_name, top_k, limit)


def open_store(store_root: Path, name: str, passages: Sequence[tuple[str, str]],
               overrides: dict[str, Any] | None = None, progress: ProgressFn | None = None,
               real_titles: Mapping[str, str] | None = None) -> tuple[Any, list[str], dict]:
    """Write the corpus (passages under their ``real_titles`` where given), open
    ``<store_root>/eval/<name>/store`` and bring it up to date."""
    from pathweaver.service import Pathweaver

    base = Path(store_root) / "eval" / name
    titles = prepare_corpus(passages, base / "corpus", real_titles)
    pw = Pathweaver.open(base / "store", overrides=overrides)
    report = pw.index([base / "corpus"], exact=True, progress=progress)
    # questions embed with the full model, as when every index run probed it (``ingest.invariance``): the light
    # encoder's batches agree with it only to ~2e-7, and the eval figures are recorded with the full model
    getattr(pw.embedder, "model", None)
    report_dict = report.to_dict() if hasattr(report, "to_dict") else dict(vars(report))
    return pw, titles, report_dict


def run_questions(pw: Any, texts: Sequence[str], method: str, top_k: int, params: dict[str, Any] | None,
                  progress: ProgressFn | None = None) -> tuple[list[Any], list[float]]:
    """Retrieve for every question; returns the results and the per-query seconds (model load excluded)."""
    snap = pw.snapshot()  # build the cached snapshot, and its BM25 postings, outside the timed queries
    postings = getattr(pw, "bm25_index", None)
    if postings is not None:
        postings(snap, wait=True)
    results, seconds = [], []
    clear = getattr(pw.embedder, "clear_cache", None)
    for i, text in enumerate(texts):
        if clear is not None:
            clear()  # each method pays for its question's embedding, as the peers do
        start = time.perf_counter()
        result = pw.retrieve(text, method=method, top_k=top_k, params=params)
        seconds.append(float(result.info.get("seconds", time.perf_counter() - start)))
        results.append(result)
        if progress:
            progress(i + 1, len(texts), "query")
    return results, seconds


def ranked_titles(result: Any, snapshot: Any, titles: Sequence[str]) -> list[str]:
    """Passage id of every retrieved chunk, best first."""
    return [title_of(snapshot.chunk_docs[hit.passage], titles) for hit in result.chunks]


def latency_summary(seconds: Sequence[float]) -> dict[str, float]:
    """Mean (the ``seconds_per_query`` contract), median, p50 and p95 in milliseconds."""
    if not seconds:
        return {"seconds_per_query": 0.0, "seconds_per_query_median": 0.0, "p50_ms": 0.0, "p95_ms": 0.0}
    arr = np.asarray(seconds, dtype=np.float64)
    return {
        "seconds_per_query": float(arr.mean()),
        "seconds_per_query_median": float(statistics.median(seconds)),
        "p50_ms": float(np.percentile(arr, 50) * 1000),
        "p95_ms": float(np.percentile(arr, 95) * 1000),
    }


def score(rankings: Sequence[Sequence[str]], golds: Sequence[Sequence[str]], k: int) -> dict[str, float]:
    """Mean recall@k, all_evidence@k, MRR (and all_evidence@8 when k >= 8) over the questions."""
    n = len(rankings)
    if n == 0:
        raise ConfigError("no questions to score")
    recall = [metrics.recall_at_k(r, g, k) for r, g in zip(rankings, golds, strict=True)]
    every = [metrics.all_evidence_at_k(r, g, k) for r, g in zip(rankings, golds, strict=True)]
    out: dict[str, Any] = {
        "recall_at_k": sum(recall) / n,
        "recall_at_k_ci95": intervals.mean_ci(recall),
        "all_evidence_at_k": sum(every) / n,
        "all_evidence_at_k_ci95": intervals.proportion_ci(every),
        "mrr": sum(metrics.mrr(r, g) for r, g in zip(rankings, golds, strict=True)) / n,
    }
    if k >= EXTRA_K:
        at8 = [metrics.all_evidence_at_k(r, g, EXTRA_K) for r, g in zip(rankings, golds, strict=True)]
        out["all_evidence_at_8"] = sum(at8) / n
        out["all_evidence_at_8_ci95"] = intervals.proportion_ci(at8)
    out["intervals"] = {"all_evidence": intervals.WILSON, "recall": intervals.BOOTSTRAP}
    return out


def run_eval(
    dataset_dir: Path | str,
    split_name: str = "dev",
    method: str = "hybrid",
    top_k: int = DEFAULT_TOP_K,
    params: dict[str, Any] | None = None,
    store_root: Path | str = ".pathweaver",
    progress: ProgressFn | None = None,
    overrides: dict[str, Any] | None = None,
    record: bool = True,
    limit: int | None = None,
    dataset: Dataset | None = None,
) -> dict[str, Any]:
    """Evaluate ``method`` on one split; appends the run to the ledger unless ``record`` is false."""
    if dataset is None and is_notes_set(Path(dataset_dir)):
        from pathweaver.eval.notes_runner import run_notes_eval

        out = run_notes_eval(load_notes(dataset_dir), split_name, method, top_k, params, Path(store_root), progress,
                             overrides, limit)
        if record:
            row = {k: v for k, v in out.items() if k != "questions"}
            out["run_id"] = Ledger.for_store(store_root).append([{**row, "source": "eval"}])[0]
        return out
    data, questions = split_questions(dataset or load_dataset(dataset_dir), split_name, top_k, limit)
    pw, titles, report = open_store(Path(store_root), data.name, data.passages, overrides, progress,
                                    data.real_titles)
    try:
        results, seconds = run_questions(pw, [q.text for q in questions], method, top_k, params, progress)
        snap = pw.snapshot()
        rankings = [ranked_titles(r, snap, titles) for r in results]
        returned = sum(len(r.chunks) for r in results)
        backfill = sum(c.backfill for r in results for c in r.chunks) / returned if returned else 0.0
        used = results[0].info.get("params", params or {}) if results else (params or {})
    finally:
        pw.close()
    out: dict[str, Any] = {
        "dataset": data.name,
        "split": split_name,
        "method": method,
        "k": top_k,
        "n_questions": len(questions),
        **score(rankings, [q.gold_titles for q in questions], top_k),
        **latency_summary(seconds),
        "backfill_share": backfill,  # chunks a graph method took from a dense or hybrid back-fill
        # under top_k where a method serves only what it found (``preset = "paper"``: no back-fill)
        "chunks_per_question": returned / len(questions) if questions else 0.0,
        "params": used,
        "index": report,
    }
    if record:
        out["run_id"] = Ledger.for_store(store_root).append([{**out, "source": "eval"}])[0]
    return out
