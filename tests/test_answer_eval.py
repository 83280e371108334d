"""Answer evaluation: the SQuAD normalisation and token F1 worked by hand, answer support, and
``pathweaver eval --answers`` end to end on a tiny HotpotQA-shaped fixture with known EM and F1."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pathweaver.cli import main
from pathweaver.eval import metrics
from pathweaver.eval.answers import answer_text, run_answer_eval
from pathweaver.eval.ledger import LEDGER_ENV, Ledger


def test_squad_normalisation() -> None:
    assert metrics.normalize_answer("The  Eiffel-Tower!") == "eiffeltower"
    assert metrics.normalize_answer("an Apple, a pear and THE plum.") == "apple pear and plum"
    assert metrics.normalize_answer("  ") == ""


def test_exact_match_and_token_f1_by_hand() -> None:
    assert metrics.exact_match("the Denver", ["Denver"]) == 1.0
    assert metrics.exact_match("Denver, Colorado", ["Denver"]) == 0.0
    # prediction {denver}, gold {denver, colorado}: precision 1, recall 1/2 -> F1 2/3
    assert metrics.token_f1("Denver", ["Denver, Colorado"]) == pytest.approx(2 / 3)
    # the best alias counts
    assert metrics.token_f1("Hillary", ["Hillary Clinton", "Hillary"]) == 1.0
    # repeated tokens count once per occurrence: pred "new new york" vs gold "new york": 2 common of 3 and 2
    assert metrics.token_f1("new new york", ["New York"]) == pytest.approx(2 * (2 / 3) * 1 / (2 / 3 + 1))
    assert metrics.token_f1("Paris", ["London"]) == 0.0
    assert metrics.token_f1("", ["London"]) == 0.0


def test_answer_support_whole_words() -> None:
    chunks = ["Scott Derrickson (born July 16, 1966) is an American director.", "Ed Wood was a filmmaker."]
    assert metrics.answer_supported(["July 16, 1966"], chunks)
    assert metrics.answer_supported(["american"], chunks)
    assert not metrics.answer_supported(["Ed Woodward"], chunks)
    assert not metrics.answer_supported(["Rick"], ["Derrickson"])  # inside a word does not count
    assert metrics.is_yes_no(["yes"]) and not metrics.is_yes_no(["Yesterday"])


def test_answer_text_strips_label_and_marks() -> None:
    assert answer_text("Extractive answer (no LLM configured): Marley [1][2].") == "Marley"
    assert answer_text("Jacob Marley, his partner [3]") == "Jacob Marley, his partner"


def _fixture(folder: Path) -> None:
    """Three questions over five passages; the extractive answers are known: EM 1, F1 2/3, EM 1 (yes/no)."""
    ctx = {
        "title": ["Scott Derrickson", "Ed Wood", "Doctor Strange (2016 film)", "Warsaw", "Vistula"],
        "sentences": [
            ["Scott Derrickson (born July 16, 1966) is an American director, screenwriter and producer. ",
             "He was born in Denver, Colorado."],
            ["Edward Davis Wood Jr. (October 10, 1924 – December 10, 1978) was an American filmmaker, actor and "
             "author."],
            ["Doctor Strange is a 2016 American superhero film directed by Scott Derrickson."],
            ["Warsaw is the capital and largest city of Poland. ", "It stands on the Vistula River."],
            ["The Vistula is the longest river in Poland, at 1,047 kilometres."],
        ],
    }
    records = [
        {"question": "When was Scott Derrickson born?", "answer": "July 16, 1966", "type": "bridge",
         "supporting_facts": {"title": ["Scott Derrickson"], "sent_id": [0]}, "context": ctx},
        {"question": "In what city was the director of Doctor Strange born?", "answer": "Denver, Colorado",
         "type": "bridge", "supporting_facts": {"title": ["Doctor Strange (2016 film)", "Scott Derrickson"],
                                                "sent_id": [0, 1]}, "context": ctx},
        {"question": "Were Scott Derrickson and Ed Wood of the same nationality?", "answer": "yes",
         "type": "comparison", "supporting_facts": {"title": ["Scott Derrickson", "Ed Wood"], "sent_id": [0, 0]},
         "context": ctx},
    ]
    folder.mkdir()
    (folder / "hotpot_tiny.json").write_text(json.dumps(records), encoding="utf-8")


def test_eval_answers_known_scores(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv(LEDGER_ENV, raising=False)
    data, root = tmp_path / "hotpot", tmp_path / "root"
    _fixture(data)
    out = run_answer_eval(data, "all", "hybrid", 5, None, root, answerer="extractive", details=True)
    preds = [q["prediction"] for q in out["questions"]]
    # no sentence states that both are American: the notes don't say (no table of nationalities decides it)
    assert preds[:2] == ["July 16, 1966", "Denver"] and preds[2].startswith("The notes don't say.")
    assert out["n_questions"] == 3 and out["exact_match"] == pytest.approx(1 / 3)
    assert out["f1"] == pytest.approx((1 + 2 / 3 + 0) / 3)
    assert out["n_support"] == 2 and out["answer_support"] == 1.0  # the yes/no question has no support
    assert out["marked_support"] == 1.0  # each span's own chunk holds the gold answer
    row = Ledger.for_store(root).history(dataset="hotpotqa")[-1]
    assert row["source"] == "eval-answers" and row["f1"] == pytest.approx(out["f1"])
    assert row["exact_match"] == pytest.approx(1 / 3) and row["answer_support"] == 1.0

    # the command line: ask with no LLM (its extractive fallback), scored the same way, JSON like the retrieval eval
    code = main(["--store", str(root), "--set", "models.llm_backend=none", "eval", str(data), "--split", "all",
                 "--answers", "--json", "--no-ledger"])
    assert code == 0
    cli = json.loads(capsys.readouterr().out)
    assert cli["answerer"] == "ask" and cli["n_questions"] == 3 and cli["backends"] == ["extractive"]
    assert 0.0 <= cli["f1"] <= 1.0 and cli["n_support"] == 2 and cli["index"]["added"] == 0
