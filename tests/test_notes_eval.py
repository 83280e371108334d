"""``pathweaver eval`` on a notes benchmark folder: a tiny real vault (front matter, aliases, wiki links, an embed),
indexed into its own store once and reused, retrieval figures per question kind with intervals, and answers scored
on key facts and on saying that the notes don't say."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pathweaver.cli import main
from pathweaver.eval.answers import run_answer_eval
from pathweaver.eval.ledger import LEDGER_ENV
from pathweaver.eval.notes import NotesQuestion
from pathweaver.eval.notes_runner import (
    answer_summary,
    by_kind,
    facts_covered,
    note_of,
    says_notes_dont_say,
    score_note_answer,
)
from pathweaver.eval.runner import run_eval
from pathweaver.eval.summary import format_answers, format_retrieval

NOTES = {
    "Garden/Tomatoes.md": "---\naliases:\n  - Love apples\n---\n# Tomatoes\n\nWater the tomato plants twice a week "
                          "in summer. Feed them with the [[Compost]] from the heap.\n",
    "Compost.md": "# Compost\n\nTurn the compost heap every Sunday. It needs dry brown leaves as well as kitchen "
                  "scraps.\n",
    "Kitchen.md": "# Kitchen\n\nVegetable peelings go to the [[Compost]] bin under the sink.\n\n![[Compost]]\n",
    "Bikes.md": "# Bikes\n\nPump the road bike tyres to 80 psi before a long ride; the city bike takes 50 psi.\n",
}
QUESTIONS = [
    ("single", "How hard should I pump the tyres on my road bike?", ["Bikes.md"], ["80 psi"]),
    ("two-note", "How often do I water the tomato plants, and what else does the heap they are fed from need?",
     ["Garden/Tomatoes.md", "Compost.md"], ["twice a week", "brown leaves"]),
    ("alias", "How often do the love apples get watered?", ["Garden/Tomatoes.md"], ["twice a week"]),
    ("list", "Which notes send scraps or peelings to the compost?", ["Compost.md", "Kitchen.md"], ["scraps", "peelings"]),
    ("unanswerable", "When is the car insurance due for renewal?", [], []),
]


def _bench(root: Path) -> Path:
    for rel, text in NOTES.items():
        path = root / "mini" / "notes" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    rows = [{"id": f"m{i}", "corpus": "mini", "kind": k, "question": q, "gold": g, "facts": f, "split": "dev"}
            for i, (k, q, g, f) in enumerate(QUESTIONS)]
    (root / "questions.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    return root


@pytest.mark.slow
@pytest.mark.timeout(900)  # two index runs and the models' first load; a shared machine can take minutes
def test_retrieval_per_kind_on_a_tiny_vault_and_the_store_is_reused(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(LEDGER_ENV, raising=False)
    bench, root = _bench(tmp_path / "notes"), tmp_path / "root"
    out = run_eval(bench, "dev", "hybrid", 3, None, root, record=False)
    assert out["n_questions"] == 4  # the unanswerable question has no gold notes
    assert set(out["by_kind"]) == {"single", "two-note", "alias", "list"}
    assert out["by_kind"]["list"]["n"] == 1 and out["index"]["mini"]["added"] == 4
    for row in [out, *out["by_kind"].values()]:
        lo, hi = row["all_evidence_at_k_ci95"]
        assert 0.0 <= lo <= row["all_evidence_at_k"] <= hi <= 1.0
        lo, hi = row["recall_at_k_ci95"]
        assert 0.0 <= lo <= row["recall_at_k"] <= hi <= 1.0
    assert out["by_kind"]["single"]["recall_at_k"] == 1.0  # "80 psi" and "road bike" only occur in Bikes.md
    rows = {r["id"]: r for r in out["questions"]}
    assert rows["m0"]["ranked"][0] == "Bikes.md" and rows["m0"]["all_evidence"] == 1.0 and "m4" not in rows
    assert out["intervals"]["all_evidence"] == "wilson" and out["intervals"]["recall"].startswith("bootstrap")
    corpus = root / "eval" / "notes-mini" / "corpus"
    assert (corpus / "Garden" / "Tomatoes.md").read_text(encoding="utf-8") == NOTES["Garden/Tomatoes.md"]
    text = format_retrieval(out)
    assert "two-note" in text and "all-evidence@3" in text and "[" in text

    # a second run indexes nothing again; a note removed from the benchmark leaves the copied corpus
    (bench / "mini" / "notes" / "Bikes.md").unlink()
    rows = [r for r in (bench / "questions.jsonl").read_text().splitlines() if "Bikes" not in r]
    (bench / "questions.jsonl").write_text("\n".join(rows) + "\n")
    again = run_eval(bench, "dev", "hybrid", 3, None, root, record=False)
    assert again["index"]["mini"]["added"] == 0 and again["index"]["mini"]["deleted"] == 1
    assert not (corpus / "Bikes.md").exists() and set(again["by_kind"]) == {"two-note", "alias", "list"}


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_answers_are_scored_on_key_facts_and_on_saying_the_notes_dont_say(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch,
                                                                          capsys: pytest.CaptureFixture) -> None:
    monkeypatch.delenv(LEDGER_ENV, raising=False)
    bench, root = _bench(tmp_path / "notes"), tmp_path / "root"
    out = run_answer_eval(bench, "dev", "hybrid", 3, None, root, answerer="extractive", record=False, details=True)
    assert out["n_questions"] == 5 and out["facts_covered"]["n"] == 4 and out["doesnt_say_unanswerable"]["n"] == 1
    assert set(out["by_kind"]) == {"single", "two-note", "alias", "list", "unanswerable"}
    assert "doesnt_say" in out["by_kind"]["unanswerable"] and "facts_covered" in out["by_kind"]["single"]
    rows = {r["id"]: r for r in out["questions"]}
    assert rows["m4"]["facts_covered"] is None and isinstance(rows["m4"]["doesnt_say"], bool)
    assert rows["m0"]["facts_covered"] == facts_covered(rows["m0"]["prediction"], ["80 psi"])
    assert "key facts" in format_answers(out)

    code = main(["--store", str(root), "--set", "models.llm_backend=none", "eval", str(bench), "--split", "dev",
                 "--answers", "--json", "--no-ledger"])
    assert code == 0
    cli = json.loads(capsys.readouterr().out)
    assert cli["answerer"] == "ask" and cli["index"]["mini"]["added"] == 0 and cli["facts_covered"]["n"] == 4

    code = main(["--store", str(root), "eval", str(bench), "--split", "test", "--no-ledger"])
    assert code == 2 and "no questions" in capsys.readouterr().err  # the tiny set has no test questions


def test_scoring_rules() -> None:
    assert says_notes_dont_say({"answer": "Compost [1]", "supported": False})
    assert says_notes_dont_say({"answer": "The notes don't say when the insurance is due."})
    assert not says_notes_dont_say({"answer": "yes [1]"}) and not says_notes_dont_say({"answer": "x", "supported": True})
    assert facts_covered("It scores 9.0 points, marked 🔺.", ["9.0", "🔺"])
    assert facts_covered("Use `brew pin <formula>`.", ["brew pin"]) and not facts_covered("9.05", ["9.0"])
    assert facts_covered("run brew bundle dump --file=~/intel-Brewfile", ["bundle dump", "intel-Brewfile"])
    assert not facts_covered("Tasks in Kanban Plugin files", ["kanban-plugin"])
    # a plain fact written inside a longer token still counts; one with inner punctuation must match whole
    assert facts_covered("The docs are at http://127.0.0.1:12315/ by default.", ["12315"])
    assert not facts_covered("introduced in Tasks 3.9.0", ["9.0"])
    assert note_of(str(Path("/v/c/Garden/Tomatoes.md")), Path("/v/c")) == "Garden/Tomatoes.md"
    q = NotesQuestion(0, "a", "c", "single", "?", ["a.md"], ["x"], "dev")
    scores = by_kind([q, q], [["a.md", "b.md"], ["b.md"]], 1)
    assert scores["single"]["all_evidence_at_k"] == 0.5 and scores["single"]["n"] == 2


def test_facts_only_in_the_closest_evidence_are_not_stated() -> None:
    q = NotesQuestion(0, "a", "c", "single", "How much did the courier charge?", ["a.md"], ["$213.00"], "dev")
    said = score_note_answer(q, {"answer": "The courier charged $213.00 [1].", "supported": True})
    disclaimed = score_note_answer(q, {"answer": 'The notes don\'t say. Closest evidence: "Courier; $213.00" [1]',
                                       "supported": False})
    assert said["facts_covered"] and said["facts_stated"]
    assert disclaimed["facts_covered"] and disclaimed["facts_stated"] is False and disclaimed["doesnt_say"]
    summary = answer_summary([said, disclaimed])
    assert summary["facts_covered"]["share"] == 1.0 and summary["facts_stated"]["share"] == 0.5
    assert summary["by_kind"]["single"]["facts_stated"]["n"] == 2
