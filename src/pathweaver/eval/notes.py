"""The notes benchmark (``datasets/notes``): folders of real notes and questions a user asks about them.

Layout: ``questions.jsonl`` (one question a line) beside one folder per corpus, each holding its notes under
``notes/`` (indexed as they are: folders, front matter, links, embeds) and its ``LICENSE`` and ``SOURCE.md``. A
question is ``{"id", "corpus", "kind", "question", "gold", "facts", "split"}``: ``gold`` lists note paths relative
to the corpus's ``notes/`` folder, ``facts`` the short strings a right answer must contain (both empty for an
``unanswerable`` question). Kinds: ``single`` (one note), ``two-note`` (facts from two notes, one links or embeds
the other), ``alias`` (asks by an alias or a link's display text), ``list`` (every note that qualifies) and
``unanswerable``. ``split`` is ``dev`` or ``test``, alternating within each (corpus, kind) group in file order.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from pathweaver.eval.datasets import DatasetError

QUESTIONS_FILE = "questions.jsonl"
NOTES_DIR = "notes"
KINDS = ("single", "two-note", "alias", "list", "unanswerable")
RETRIEVAL_KINDS = KINDS[:-1]  # unanswerable questions have no gold notes
SPLIT_NAMES = ("dev", "test")
_FIELDS = ("id", "corpus", "kind", "question", "gold", "facts", "split")


@dataclass
class NotesQuestion:
    """One question; ``gold`` are note paths relative to its corpus's notes folder."""

    index: int
    id: str
    corpus: str
    kind: str
    text: str
    gold: list[str]
    facts: list[str]
    split: str


@dataclass
class NotesSet:
    """The corpora (name -> notes folder) and the questions of a notes benchmark folder."""

    name: str
    root: Path
    corpora: dict[str, Path]
    questions: list[NotesQuestion] = field(default_factory=list)


def is_notes_set(folder: Path) -> bool:
    """Whether ``folder`` is laid out as a notes benchmark."""
    return (folder / QUESTIONS_FILE).is_file()


def _question(index: int, rec: object, where: str) -> NotesQuestion:
    if not isinstance(rec, dict) or any(k not in rec for k in _FIELDS):
        raise DatasetError(f"{where}: a question needs the fields {', '.join(_FIELDS)}")
    if rec["kind"] not in KINDS:
        raise DatasetError(f"{where}: unknown kind {rec['kind']!r}; use one of {', '.join(KINDS)}")
    if rec["split"] not in SPLIT_NAMES:
        raise DatasetError(f"{where}: split must be dev or test, got {rec['split']!r}")
    gold, facts = rec["gold"], rec["facts"]
    if not isinstance(gold, list) or not isinstance(facts, list):
        raise DatasetError(f"{where}: gold and facts must be lists")
    if (rec["kind"] == "unanswerable") != (not gold):
        raise DatasetError(f"{where}: an unanswerable question has no gold notes, every other kind has some")
    return NotesQuestion(index, str(rec["id"]), str(rec["corpus"]), str(rec["kind"]), str(rec["question"]),
                         [str(g) for g in gold], [str(f) for f in facts], str(rec["split"]))


def load_notes(folder: Path | str) -> NotesSet:
    """Read a notes benchmark folder; a malformed line, an unknown corpus or a missing gold note is a clear error."""
    root = Path(folder)
    path = root / QUESTIONS_FILE
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise DatasetError(f"cannot read {path}: {exc}") from exc
    questions, corpora, seen = [], {}, set()
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{path}:{n}"
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DatasetError(f"{where}: not JSON ({exc})") from exc
        q = _question(len(questions), rec, where)
        if q.id in seen:
            raise DatasetError(f"{where}: duplicate question id {q.id!r}")
        seen.add(q.id)
        notes_dir = corpora.setdefault(q.corpus, root / q.corpus / NOTES_DIR)
        if not notes_dir.is_dir():
            raise DatasetError(f"{where}: corpus {q.corpus!r} has no folder {notes_dir}")
        missing = [g for g in q.gold if not (notes_dir / g).is_file()]
        if missing:
            raise DatasetError(f"{where}: gold notes not in {q.corpus}: {missing}")
        questions.append(q)
    if not questions:
        raise DatasetError(f"{path} holds no questions")
    return NotesSet(root.name or "notes", root, corpora, questions)


def notes_split(questions: list[NotesQuestion], which: str) -> list[NotesQuestion]:
    """The questions of ``which`` (dev, test, or all)."""
    if which == "all":
        return list(questions)
    if which not in SPLIT_NAMES:
        raise DatasetError(f"unknown split {which!r}; use one of dev, test, all")
    return [q for q in questions if q.split == which]


# -- checking key facts against the gold notes -----------------------------------------------------------------
_FRONT = re.compile(r"\A---\s*\n.*?\n---\s*\n", re.S)
_WIKI = re.compile(r"!?\[\[([^\]|]*?)(?:\|([^\]]*))?\]\]")
_MDLINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
_MARKS = re.compile(r"[*_`>#|~]+")


def plain_text(markdown: str) -> str:
    """Note text as a reader sees it: front matter kept as text, links reduced to their visible text, emphasis,
    code, heading and table marks dropped, whitespace collapsed, case folded."""
    text = _FRONT.sub(lambda m: m.group(0).replace("---", " "), markdown)
    text = _WIKI.sub(lambda m: m.group(2) or m.group(1), text)
    text = _MDLINK.sub(lambda m: m.group(1), text)
    text = _MARKS.sub(" ", text)
    return " ".join(text.split()).casefold()


def fact_problems(data: NotesSet) -> list[str]:
    """Every key fact that does not occur in its question's gold notes (after ``plain_text``), as messages."""
    problems = []
    for q in data.questions:
        texts = " \n ".join(plain_text((data.corpora[q.corpus] / g).read_text(encoding="utf-8")) for g in q.gold)
        problems += [f"{q.id}: key fact {f!r} is not in {q.gold}" for f in q.facts
                     if " ".join(_MARKS.sub(" ", f).split()).casefold() not in texts]
        if q.kind != "unanswerable" and not q.facts:
            problems.append(f"{q.id}: an answerable question needs at least one key fact")
    return problems
