"""The notes benchmark in datasets/notes: every gold note exists, every key fact is in its gold notes, the kinds,
splits and corpora are as documented; the loader's errors; the 95% intervals on values worked by hand."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pytest

from pathweaver.config import ConfigError
from pathweaver.eval.datasets import DatasetError
from pathweaver.eval.intervals import bootstrap_mean, proportion_ci, wilson
from pathweaver.eval.notes import KINDS, fact_problems, load_notes, notes_split, plain_text

NOTES = Path(__file__).resolve().parents[1] / "datasets" / "notes"
_WIKI = re.compile(r"!?\[\[([^\]|#]+)")
_MD = re.compile(r"\]\(([^)#\s]+\.md)")


# -- the benchmark itself --------------------------------------------------------------------------------------
def test_every_gold_note_exists_and_every_key_fact_is_in_its_gold_notes() -> None:
    data = load_notes(NOTES)  # raises on a missing gold note
    assert len(data.questions) >= 120
    assert fact_problems(data) == []


def test_kinds_corpora_and_gold_sizes() -> None:
    data = load_notes(NOTES)
    kinds = Counter(q.kind for q in data.questions)
    assert set(kinds) == set(KINDS)
    n = len(data.questions)
    assert 0.30 <= kinds["single"] / n <= 0.40 and 0.25 <= kinds["two-note"] / n <= 0.35
    assert kinds["alias"] / n >= 0.08 and kinds["list"] / n >= 0.08 and 0.12 <= kinds["unanswerable"] / n <= 0.18
    assert len(data.corpora) >= 3
    for q in data.questions:
        assert (q.kind == "unanswerable") == (not q.gold and not q.facts), q.id
        assert q.kind != "single" or len(q.gold) == 1, q.id
        assert q.kind != "two-note" or len(q.gold) == 2, q.id
        assert q.kind != "list" or 2 <= len(q.gold) <= 5, q.id


def _links(text: str) -> set[str]:
    """Link targets of a note as lower-cased file stems (wiki links, embeds and Markdown links)."""
    targets = {t.strip() for t in _WIKI.findall(text)} | set(_MD.findall(text))
    return {Path(t.replace("%20", " ")).stem.casefold() for t in targets}


def test_two_note_questions_ask_about_linked_notes_with_a_fact_from_each() -> None:
    data = load_notes(NOTES)
    for q in (q for q in data.questions if q.kind == "two-note"):
        folder = data.corpora[q.corpus]
        a, b = q.gold
        text = {g: (folder / g).read_text(encoding="utf-8") for g in q.gold}
        assert Path(b).stem.casefold() in _links(text[a]) or Path(a).stem.casefold() in _links(text[b]), q.id
        for g in q.gold:
            plain = plain_text(text[g])
            assert any(plain_text(f) in plain for f in q.facts), f"{q.id}: no key fact from {g}"


def test_splits_alternate_within_each_corpus_and_kind() -> None:
    data = load_notes(NOTES)
    # a corpus added after tuning is a dev-only fresh check (README); every other corpus alternates dev and test
    dev_only = {c for c in data.corpora if all(q.split == "dev" for q in data.questions if q.corpus == c)}
    assert len(dev_only) < len(data.corpora)
    split = [q for q in data.questions if q.corpus not in dev_only]
    groups: dict[tuple[str, str], list[str]] = {}
    for q in split:
        groups.setdefault((q.corpus, q.kind), []).append(q.split)
    for key, splits in groups.items():
        assert splits == [("dev", "test")[i % 2] for i in range(len(splits))], key
    dev, test = notes_split(split, "dev"), notes_split(split, "test")
    assert abs(len(dev) - len(test)) <= len(groups) and len(dev) + len(test) == len(split)


def test_each_corpus_keeps_its_licence_and_source_and_only_markdown_notes() -> None:
    data = load_notes(NOTES)
    for name, folder in data.corpora.items():
        root = folder.parent
        assert list(root.glob("LICENSE*")), name
        source = (root / "SOURCE.md").read_text(encoding="utf-8")
        assert "github.com/" in source and re.search(r"\b[0-9a-f]{40}\b", source), name
        files = [p for p in folder.rglob("*") if p.is_file()]
        assert 50 <= len(files) <= 300 and all(p.suffix == ".md" for p in files), name
    assert "obsidian-help" not in json.dumps([str(p) for p in data.corpora.values()]).casefold()


# -- the loader's errors ---------------------------------------------------------------------------------------
def _write(root: Path, rows: list[dict]) -> None:
    (root / "c" / "notes").mkdir(parents=True, exist_ok=True)
    (root / "c" / "notes" / "a.md").write_text("# A\n\nThe key is 42.\n", encoding="utf-8")
    (root / "questions.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")


ROW = {"id": "q1", "corpus": "c", "kind": "single", "question": "What is the key?", "gold": ["a.md"],
       "facts": ["42"], "split": "dev"}


@pytest.mark.parametrize(("change", "message"), [
    ({"gold": ["missing.md"]}, "gold notes not in c"),
    ({"kind": "trivia"}, "unknown kind"),
    ({"split": "train"}, "split must be dev or test"),
    ({"corpus": "nowhere"}, "has no folder"),
    ({"kind": "unanswerable"}, "unanswerable question has no gold"),
])
def test_bad_questions_are_clear_errors(tmp_path: Path, change: dict, message: str) -> None:
    _write(tmp_path, [{**ROW, **change}])
    with pytest.raises(DatasetError, match=message):
        load_notes(tmp_path)


def test_duplicate_ids_and_a_fact_missing_from_its_note(tmp_path: Path) -> None:
    _write(tmp_path, [ROW, ROW])
    with pytest.raises(DatasetError, match="duplicate question id"):
        load_notes(tmp_path)
    _write(tmp_path, [{**ROW, "facts": ["43"]}])
    assert fact_problems(load_notes(tmp_path)) == ["q1: key fact '43' is not in ['a.md']"]


def test_plain_text_reads_links_and_marks_as_a_reader_sees_them() -> None:
    text = "---\naliases: [X]\n---\n# Head\n\nSee [[Other note|the *other* one]] and [docs](d.md), `code`."
    assert plain_text(text) == "aliases: [x] head see the other one and docs, code ."


# -- 95% intervals ----------------------------------------------------------------------------------------------
def test_wilson_interval_on_values_worked_by_hand() -> None:
    # 17/50: p = 0.34, z = 1.96: centre (0.34 + z²/100) / (1 + z²/50) = 0.3514, half-width 0.1270
    lo, hi = wilson(17, 50)
    assert lo == pytest.approx(0.2244, abs=2e-4) and hi == pytest.approx(0.4785, abs=2e-4)
    # 0/10: the interval still reaches z²/n / (1 + z²/n) = 0.2775
    assert wilson(0, 10) == (0.0, pytest.approx(0.2775, abs=2e-4))
    lo, hi = wilson(50, 50)
    assert lo == pytest.approx(0.9287, abs=2e-4) and hi == 1.0
    assert proportion_ci([1.0] * 17 + [0.0] * 33) == [0.2244, 0.4785]
    with pytest.raises(ConfigError):
        wilson(3, 0)
    with pytest.raises(ConfigError):
        wilson(6, 5)


def test_bootstrap_interval_is_seeded_and_brackets_the_mean() -> None:
    values = [0.0, 0.5, 1.0, 1.0, 0.5, 0.0, 1.0, 1.0]
    assert bootstrap_mean(values) == bootstrap_mean(values)
    lo, hi = bootstrap_mean(values)
    assert lo < sum(values) / len(values) < hi and lo >= 0.0 and hi <= 1.0
    assert bootstrap_mean([0.5] * 10) == (0.5, 0.5)
    with pytest.raises(ConfigError):
        bootstrap_mean([])
