"""Loaders for the evaluation data sets (layout and splits as in the data folder's SPLITS.md).

Passage data sets (2wikimultihopqa, musique, hotpotqa) give a corpus of titled passages and questions with gold
passage ids. A passage id is its title; when the same title carries different texts (MuSiQue, HotpotQA), later
texts get ``"title (2)"``, ``"title (3)"``, ... so every id is unique, and gold labels are mapped to these ids.
GraphRAG-Bench (novel, medical) gives long documents and questions with evidence sentences.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pathweaver.errors import UserError

DATA_ENV = "PATHWEAVER_DATA"
SPLITS = ("dev", "test", "all")
PASSAGE_DATASETS = ("2wikimultihopqa", "musique", "hotpotqa")
BENCH_SUBSETS = ("novel", "medical")


class DatasetError(UserError, ValueError):
    """A data set folder is missing, unknown or malformed."""


@dataclass
class Question:
    """A question with the ids (titles) of its gold passages; ``index`` is its position in the data set."""

    index: int
    text: str
    gold_titles: list[str]
    decomposition: list[dict[str, Any]] | None = None
    answers: list[str] = field(default_factory=list)  # the gold answer first, then its aliases


@dataclass
class Dataset:
    """A passage corpus ``[(passage id, text)]`` and its questions."""

    name: str
    passages: list[tuple[str, str]]
    questions: list[Question]
    real_titles: dict[str, str] = field(default_factory=dict)  # passage id -> its own title, where they differ


@dataclass
class BenchQuestion:
    """A GraphRAG-Bench question: ``evidence`` sentences are the gold, grouped by ``question_type``."""

    index: int
    id: str
    text: str
    question_type: str
    evidence: list[str]
    source: str = ""
    answer: str = ""


@dataclass
class BenchCorpus:
    """GraphRAG-Bench subset: whole documents ``[(corpus name, text)]`` and questions."""

    name: str
    documents: list[tuple[str, str]]
    questions: list[BenchQuestion] = field(default_factory=list)


# -- locating ------------------------------------------------------------------------------------------------
def resolve_dir(path_or_name: str | Path, data_root: str | Path | None = None) -> Path:
    """A data set folder given as a path, or as a name under ``data_root`` (default ``$PATHWEAVER_DATA``)."""
    path = Path(path_or_name).expanduser()
    if path.is_dir():
        return path
    root = data_root or os.environ.get(DATA_ENV)
    if root and (Path(root) / str(path_or_name)).is_dir():
        return Path(root) / str(path_or_name)
    raise DatasetError(
        f"no data set folder {str(path_or_name)!r}; give a folder path, or a name under --data-root / ${DATA_ENV}"
    )


def detect_kind(folder: Path) -> str:
    """Which passage data set a folder holds, judged by its files."""
    if (folder / "corpus.json").is_file() and (folder / "gold_supporting_titles_first101.json").is_file():
        return "2wikimultihopqa"
    if list(folder.glob("musique*.json")):
        return "musique"
    if list(folder.glob("hotpot*.json")):
        return "hotpotqa"
    raise DatasetError(
        f"{folder} is not a known data set folder (expected 2wikimultihopqa corpus.json + "
        "gold_supporting_titles_first101.json, musique*.json or hotpot*.json)"
    )


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise DatasetError(f"cannot read {path}: {exc}") from exc


def _single(folder: Path, pattern: str) -> Path:
    files = sorted(folder.glob(pattern))
    if len(files) != 1:
        raise DatasetError(f"expected one {pattern} file in {folder}, found {len(files)}")
    return files[0]


# -- passage data sets ---------------------------------------------------------------------------------------
class _PassageIds:
    """Deduplicate ``(title, text)`` pairs and give each distinct pair a unique id (title, then "title (n)")."""

    def __init__(self) -> None:
        self.by_pair: dict[tuple[str, str], str] = {}
        self.used: set[str] = set()
        self.passages: list[tuple[str, str]] = []
        self.real_titles: dict[str, str] = {}

    def add(self, title: str, text: str) -> str:
        key = (title, text)
        if key in self.by_pair:
            return self.by_pair[key]
        pid, n = title, 1
        while pid in self.used:
            n += 1
            pid = f"{title} ({n})"
        self.used.add(pid)
        if pid != title:
            self.real_titles[pid] = title
        self.by_pair[key] = pid
        self.passages.append((pid, text))
        return pid


def _load_2wiki(folder: Path) -> Dataset:
    corpus = _read_json(folder / "corpus.json")
    gold = _read_json(folder / "gold_supporting_titles_first101.json")
    passages = [(str(p["title"]), str(p["text"])) for p in corpus]
    titles = {t for t, _ in passages}
    answers = _2wiki_answers(folder)
    questions = []
    for i, rec in enumerate(gold):
        missing = [t for t in rec["supporting_titles"] if t not in titles]
        if missing:
            raise DatasetError(f"2wiki question {i}: gold titles not in corpus.json: {missing}")
        questions.append(Question(i, str(rec["question"]), list(dict.fromkeys(rec["supporting_titles"])),
                                  answers=answers.get(str(rec.get("id", "")), [])))
    return Dataset("2wikimultihopqa", passages, questions)


def _2wiki_answers(folder: Path) -> dict[str, list[str]]:
    """Gold answers by question id from ``questions.json`` (absent file: none)."""
    path = folder / "questions.json"
    if not path.is_file():
        return {}
    return {str(r["id"]): [str(r["answer"])] for r in _read_json(path) if "id" in r and "answer" in r}


def _answers(rec: dict[str, Any]) -> list[str]:
    golds = [str(rec["answer"])] if rec.get("answer") is not None else []
    golds += [str(a) for a in rec.get("answer_aliases") or []]
    return list(dict.fromkeys(golds))


def _load_musique(folder: Path) -> Dataset:
    records = _read_json(_single(folder, "musique*.json"))
    ids = _PassageIds()
    questions = []
    for i, rec in enumerate(records):
        gold: list[str] = []
        for para in rec["paragraphs"]:
            pid = ids.add(str(para["title"]), str(para["paragraph_text"]))
            if para.get("is_supporting") and pid not in gold:
                gold.append(pid)
        questions.append(Question(i, str(rec["question"]), gold, list(rec.get("question_decomposition") or []),
                                  _answers(rec)))
    return Dataset("musique", ids.passages, questions, ids.real_titles)


def _load_hotpot(folder: Path) -> Dataset:
    records = _read_json(_single(folder, "hotpot*.json"))
    ids = _PassageIds()
    questions = []
    for i, rec in enumerate(records):
        ctx = rec["context"]
        by_title: dict[str, str] = {}
        for title, sentences in zip(ctx["title"], ctx["sentences"], strict=True):
            by_title.setdefault(str(title), ids.add(str(title), "".join(sentences).strip()))
        gold = []
        for title in rec["supporting_facts"]["title"]:
            if title not in by_title:
                raise DatasetError(f"hotpotqa question {i}: supporting title {title!r} is not in its context")
            if by_title[title] not in gold:
                gold.append(by_title[title])
        questions.append(Question(i, str(rec["question"]), gold, answers=_answers(rec)))
    return Dataset("hotpotqa", ids.passages, questions, ids.real_titles)


_LOADERS = {"2wikimultihopqa": _load_2wiki, "musique": _load_musique, "hotpotqa": _load_hotpot}


def load_dataset(path_or_name: str | Path, data_root: str | Path | None = None) -> Dataset:
    """Load 2wikimultihopqa, musique or hotpotqa from its folder (or its name under ``data_root``)."""
    folder = resolve_dir(path_or_name, data_root)
    try:
        return _LOADERS[detect_kind(folder)](folder)
    except (KeyError, TypeError) as exc:
        raise DatasetError(f"{folder}: unexpected record layout ({exc!r})") from exc


def split(questions: list[Any], which: str) -> list[Any]:
    """SPLITS.md: dev is the first ceil(n/2) questions (2wiki 0-50 of 101; musique/hotpotqa 0-49 of 100),
    test the rest, all everything."""
    if which not in SPLITS:
        raise DatasetError(f"unknown split {which!r}; use one of {', '.join(SPLITS)}")
    half = math.ceil(len(questions) / 2)
    if which == "dev":
        return list(questions[:half])
    if which == "test":
        return list(questions[half:])
    return list(questions)


# -- GraphRAG-Bench ------------------------------------------------------------------------------------------
def load_graphrag_bench(path_or_name: str | Path, subset: str, data_root: str | Path | None = None) -> BenchCorpus:
    """``<subset>_corpus.json`` (list of {corpus_name, context}) and ``<subset>_questions.json``."""
    if subset not in BENCH_SUBSETS:
        raise DatasetError(f"unknown GraphRAG-Bench subset {subset!r}; use one of {', '.join(BENCH_SUBSETS)}")
    folder = resolve_dir(path_or_name, data_root)
    corpus = _read_json(folder / f"{subset}_corpus.json")
    raw = _read_json(folder / f"{subset}_questions.json")
    try:
        documents = [(str(d["corpus_name"]), str(d["context"])) for d in corpus]
        questions = [
            BenchQuestion(
                index=i,
                id=str(q["id"]),
                text=str(q["question"]),
                question_type=str(q["question_type"]),
                evidence=[str(e) for e in (q["evidence"] if isinstance(q["evidence"], list) else [q["evidence"]])],
                source=str(q.get("source", "")),
                answer=str(q.get("answer", "")),
            )
            for i, q in enumerate(raw)
        ]
    except (KeyError, TypeError) as exc:
        raise DatasetError(f"{folder}: unexpected GraphRAG-Bench layout ({exc!r})") from exc
    return BenchCorpus(subset, documents, questions)


def split_by_type(questions: list[BenchQuestion], which: str) -> list[BenchQuestion]:
    """SPLITS.md for GraphRAG-Bench: dev is the first half (ceil) of each question_type, test the rest."""
    groups: dict[str, list[BenchQuestion]] = {}
    for q in questions:
        groups.setdefault(q.question_type, []).append(q)
    chosen = {q.index for group in groups.values() for q in split(group, which)}
    return [q for q in questions if q.index in chosen]
