"""``pathweaver eval datasets/notes``: retrieval and answers on the notes benchmark, overall and per question kind.

Each corpus is copied, files and folders as they are, to ``<store_root>/eval/notes-<corpus>/corpus`` (only files
whose bytes changed are rewritten, stale ones removed) and indexed into ``<store_root>/eval/notes-<corpus>/store``,
which later runs reuse: a person's questions are asked of their own notes, so every corpus has its own store. A
retrieved chunk counts as its note (its document's path relative to the corpus folder); recall@k and
all-evidence@k count distinct notes among the top-k chunks. Unanswerable questions have no gold notes: they are
left out of the retrieval figures and counted for answers, where the answer should say that the notes don't say.
"""

from __future__ import annotations

import re
import string
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pathweaver.config import ConfigError
from pathweaver.eval import intervals, metrics
from pathweaver.eval.notes import RETRIEVAL_KINDS, NotesQuestion, NotesSet, notes_split
from pathweaver.eval.runner import ProgressFn, checked_split, latency_summary

CORPUS_DIR = "corpus"


def sync_corpus(source: Path, target: Path) -> None:
    """Make ``target`` hold exactly the files of ``source`` (same relative paths), rewriting only changed ones."""
    target.mkdir(parents=True, exist_ok=True)
    wanted = set()
    for path in sorted(source.rglob("*")):
        if not path.is_file():
            continue
        rel = path.relative_to(source)
        wanted.add(rel)
        dest = target / rel
        data = path.read_bytes()
        if not dest.is_file() or dest.read_bytes() != data:
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(data)
    for path in sorted(target.rglob("*"), reverse=True):
        if path.is_file() and path.relative_to(target) not in wanted:
            path.unlink()
        elif path.is_dir() and not any(path.iterdir()):
            path.rmdir()


def open_notes_store(store_root: Path, corpus: str, source: Path, overrides: dict[str, Any] | None = None,
                     progress: ProgressFn | None = None) -> tuple[Any, Path, dict]:
    """Copy ``source`` to the corpus's eval folder, open its store and bring it up to date."""
    from pathweaver.service import Pathweaver

    base = Path(store_root) / "eval" / f"notes-{corpus}"
    corpus_dir = base / CORPUS_DIR
    sync_corpus(source, corpus_dir)
    pw = Pathweaver.open(base / "store", overrides=overrides)
    report = pw.index([corpus_dir], exact=True, progress=progress)
    getattr(pw.embedder, "model", None)  # questions embed with the full model, as in ``runner.open_store``
    return pw, corpus_dir, report.to_dict() if hasattr(report, "to_dict") else dict(vars(report))


def note_of(doc_path: str, corpus_dir: Path) -> str:
    """A document path as its note's path relative to the corpus folder (POSIX separators)."""
    try:
        return Path(doc_path).resolve().relative_to(corpus_dir.resolve()).as_posix()
    except ValueError as exc:
        raise ConfigError(f"{doc_path} is not a note of {corpus_dir}") from exc


def ranked_notes(result: Any, snapshot: Any, corpus_dir: Path) -> list[str]:
    """The note of every retrieved chunk, best first."""
    return [note_of(snapshot.chunk_docs[hit.passage], corpus_dir) for hit in result.chunks]


def retrieval_scores(rankings: Sequence[Sequence[str]], golds: Sequence[Sequence[str]], k: int) -> dict[str, Any]:
    """recall@k and all-evidence@k over distinct notes with their 95% intervals, and MRR."""
    recall = [metrics.recall_at_k(r, g, k) for r, g in zip(rankings, golds, strict=True)]
    every = [metrics.all_evidence_at_k(r, g, k) for r, g in zip(rankings, golds, strict=True)]
    return {
        "n": len(recall),
        "recall_at_k": sum(recall) / len(recall),
        "recall_at_k_ci95": intervals.mean_ci(recall),
        "all_evidence_at_k": sum(every) / len(every),
        "all_evidence_at_k_ci95": intervals.proportion_ci(every),
        "mrr": sum(metrics.mrr(r, g) for r, g in zip(rankings, golds, strict=True)) / len(recall),
    }


def by_kind(questions: Sequence[NotesQuestion], rankings: Sequence[Sequence[str]], k: int) -> dict[str, Any]:
    """``retrieval_scores`` per question kind (kinds with no question in the split are left out)."""
    out = {}
    for kind in RETRIEVAL_KINDS:
        picked = [(r, q.gold) for q, r in zip(questions, rankings, strict=True) if q.kind == kind]
        if picked:
            out[kind] = retrieval_scores([r for r, _ in picked], [g for _, g in picked], k)
    return out


def _questions(data: NotesSet, split_name: str, top_k: int, limit: int | None) -> list[NotesQuestion]:
    return checked_split(notes_split(data.questions, split_name), data.name, split_name, top_k, limit)


def run_notes_eval(data: NotesSet, split_name: str, method: str, top_k: int, params: dict[str, Any] | None,
                   store_root: Path, progress: ProgressFn | None = None, overrides: dict[str, Any] | None = None,
                   limit: int | None = None) -> dict[str, Any]:
    """Retrieve for every answerable question of the split, corpus by corpus; figures overall and per kind, and
    each question's distinct top-k notes under ``"questions"``."""
    from pathweaver.eval.runner import run_questions

    questions = [q for q in _questions(data, split_name, top_k, limit) if q.gold]
    if not questions:
        raise ConfigError(f"split {split_name!r} of {data.name} has no answerable questions")
    rankings: dict[str, list[str]] = {}
    seconds: list[float] = []
    returned = backfill = 0
    index: dict[str, Any] = {}
    used: dict[str, Any] = dict(params or {})
    for corpus in sorted({q.corpus for q in questions}):
        asked = [q for q in questions if q.corpus == corpus]
        pw, corpus_dir, index[corpus] = open_notes_store(store_root, corpus, data.corpora[corpus], overrides,
                                                         progress)
        try:
            results, secs = run_questions(pw, [q.text for q in asked], method, top_k, params, progress)
            snap = pw.snapshot()
            for q, r in zip(asked, results, strict=True):
                rankings[q.id] = ranked_notes(r, snap, corpus_dir)
            seconds += secs
            returned += sum(len(r.chunks) for r in results)
            backfill += sum(c.backfill for r in results for c in r.chunks)
            used = results[0].info.get("params", used) if results else used
        finally:
            pw.close()
    ranked = [rankings[q.id] for q in questions]
    return {
        "dataset": data.name,
        "split": split_name,
        "method": method,
        "k": top_k,
        "n_questions": len(questions),
        **retrieval_scores(ranked, [q.gold for q in questions], top_k),
        "by_kind": by_kind(questions, ranked, top_k),
        "intervals": {"all_evidence": intervals.WILSON, "recall": intervals.BOOTSTRAP},
        **latency_summary(seconds),
        "backfill_share": backfill / returned if returned else 0.0,
        "params": used,
        "index": index,
        "questions": [{"id": q.id, "corpus": q.corpus, "kind": q.kind, "gold": q.gold,
                       "ranked": metrics.distinct(r[:top_k]), "all_evidence": metrics.all_evidence_at_k(r, q.gold, top_k)}
                      for q, r in zip(questions, ranked, strict=True)],
    }


# -- answers ----------------------------------------------------------------------------------------------------
_DOESNT_SAY = re.compile(
    r"\b(?:notes?|context|evidence|sources?)\b[^.]{0,40}\b(?:don'?t|do not|doesn'?t|does not)\s+"
    r"(?:say|mention|state|answer|cover|contain)", re.I)


def says_notes_dont_say(result: dict[str, Any]) -> bool:
    """Whether an answer says the notes don't answer: ``supported`` false, or its text says so in words."""
    return result.get("supported", True) is False or bool(_DOESNT_SAY.search(str(result.get("answer", ""))))


# punctuation inside a word joins it ("intel-Brewfile", "9.0"); elsewhere it separates words ("--file=~/intel-...")
_INNER_PUNCT = re.compile(rf"(?<=\w)[{re.escape(string.punctuation)}](?=\w)")
_OUTER_PUNCT = re.compile(rf"[{re.escape(string.punctuation)}]")


def _fact_words(text: str, joined: bool = True) -> str:
    """``text`` as SQuAD's normalisation makes it, except that punctuation between words is a space; inside a word
    it joins the word (``joined``) or, without ``joined``, separates it as well."""
    return metrics.normalize_answer(_OUTER_PUNCT.sub(" ", _INNER_PUNCT.sub("" if joined else " ", text)))


def facts_covered(answer: str, facts: Sequence[str]) -> bool:
    """Whether the normalised answer text contains every normalised key fact as whole words; a fact without
    punctuation inside a word also counts where the answer writes it inside one ("12315" in "127.0.0.1:12315")."""
    text, split = f" {_fact_words(answer)} ", f" {_fact_words(answer, joined=False)} "
    return all(f" {_fact_words(f)} " in text or (not _INNER_PUNCT.search(f) and f" {_fact_words(f)} " in split)
               for f in facts)


def score_note_answer(q: NotesQuestion, result: dict[str, Any]) -> dict[str, Any]:
    """One question's answer: key facts covered (answerable) or "the notes don't say" (unanswerable)."""
    from pathweaver.eval.answers import answer_text

    text = answer_text(str(result.get("answer", "")))
    doesnt_say = says_notes_dont_say(result)
    covered = None if q.kind == "unanswerable" else facts_covered(text, q.facts)
    return {
        "id": q.id,
        "corpus": q.corpus,
        "kind": q.kind,
        "question": q.text,
        "facts": q.facts,
        "prediction": text,
        "facts_covered": covered,
        # the facts only in the closest evidence of an answer that says the notes don't say are not stated
        "facts_stated": None if covered is None else covered and not doesnt_say,
        "doesnt_say": doesnt_say,
        "backend": str(result.get("llm", {}).get("backend", "?")),
    }


def _share(flags: Sequence[bool]) -> dict[str, Any] | None:
    if not flags:
        return None
    return {"n": len(flags), "share": sum(flags) / len(flags), "ci95": intervals.proportion_ci([float(f) for f in flags])}


def answer_summary(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Key-fact coverage over answerable questions (in any answer, and in answers that do not say the notes don't
    say), "doesn't say" over unanswerable ones (and, as a warning sign, over answerable ones), overall and per
    kind."""
    answerable = [r for r in rows if r["facts_covered"] is not None]
    unanswerable = [r for r in rows if r["facts_covered"] is None]
    kinds: dict[str, Any] = {}
    for kind in sorted({r["kind"] for r in rows}):
        group = [r for r in rows if r["kind"] == kind]
        kinds[kind] = ({"doesnt_say": _share([r["doesnt_say"] for r in group])} if kind == "unanswerable" else
                       {"facts_covered": _share([r["facts_covered"] for r in group]),
                        "facts_stated": _share([r["facts_stated"] for r in group])})
    return {
        "facts_covered": _share([r["facts_covered"] for r in answerable]),
        "facts_stated": _share([r["facts_stated"] for r in answerable]),
        "doesnt_say_unanswerable": _share([r["doesnt_say"] for r in unanswerable]),
        "doesnt_say_answerable": _share([r["doesnt_say"] for r in answerable]),
        "by_kind": kinds,
        "intervals": intervals.WILSON,
        "backends": sorted({r["backend"] for r in rows}),
    }


def run_notes_answers(data: NotesSet, split_name: str, method: str, top_k: int, params: dict[str, Any] | None,
                      store_root: Path, answer: Any, progress: ProgressFn | None = None,
                      overrides: dict[str, Any] | None = None, limit: int | None = None) -> tuple[dict, list, dict]:
    """Answer every question of the split with ``answer(pw, question_text)``; returns (summary, rows, index)."""
    questions = _questions(data, split_name, top_k, limit)
    rows: dict[str, dict[str, Any]] = {}
    seconds: list[float] = []
    index: dict[str, Any] = {}
    for corpus in sorted({q.corpus for q in questions}):
        asked = [q for q in questions if q.corpus == corpus]
        pw, _, index[corpus] = open_notes_store(store_root, corpus, data.corpora[corpus], overrides, progress)
        try:
            for i, q in enumerate(asked):
                result = answer(pw, q.text)
                seconds.append(float(result.get("seconds", 0.0)))
                rows[q.id] = score_note_answer(q, result)
                if progress:
                    progress(i + 1, len(asked), "answer")
        finally:
            pw.close()
    ordered = [rows[q.id] for q in questions]
    return {**answer_summary(ordered), **latency_summary(seconds)}, ordered, index

