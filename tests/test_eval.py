"""Evaluation: loaders on the real data sets, metrics worked by hand, and the runner end to end."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pathweaver.config import ConfigError
from pathweaver.eval import metrics
from pathweaver.eval.datasets import (
    DatasetError,
    load_dataset,
    load_graphrag_bench,
    split,
    split_by_type,
)
from pathweaver.eval.ledger import LEDGER_ENV, Ledger
from pathweaver.eval.runner import latency_summary, passage_body, prepare_corpus, run_eval, score, title_of
from shared_data import DATA, needs_data


# -- loaders on the real files -------------------------------------------------------------------------------
@needs_data
def test_2wiki_corpus_questions_and_split() -> None:
    ds = load_dataset(DATA / "2wikimultihopqa")
    assert ds.name == "2wikimultihopqa" and len(ds.passages) == 6119 and len(ds.questions) == 101
    q0 = ds.questions[0]
    assert q0.text == "When did Lothair Ii's mother die?" and q0.gold_titles == ["Lothair II", "Ermengarde of Tours"]
    assert sum(len(q.gold_titles) for q in ds.questions) == 248
    dev, test = split(ds.questions, "dev"), split(ds.questions, "test")
    assert (dev[0].index, dev[-1].index, test[0].index, test[-1].index) == (0, 50, 51, 100)


@needs_data
def test_musique_dedup_and_renamed_titles() -> None:
    ds = load_dataset(DATA / "musique")
    assert len(ds.passages) == 1839 and len({p for p, _ in ds.passages}) == 1839
    assert sum(len(q.gold_titles) for q in ds.questions) == 260
    ids = {p for p, _ in ds.passages}
    assert all(g in ids for q in ds.questions for g in q.gold_titles)
    # the same title with two texts: the second keeps a unique id
    texts = dict(ds.passages)
    assert "My Fair Lady (2)" in ids and texts["My Fair Lady (2)"] != texts.get("My Fair Lady")
    assert ds.questions[0].decomposition and "question" in ds.questions[0].decomposition[0]
    assert [q.index for q in split(ds.questions, "test")][:1] == [50]


@needs_data
def test_hotpot_context_and_supporting_titles() -> None:
    ds = load_dataset(DATA / "hotpotqa")
    assert len(ds.passages) == 991 and len(ds.questions) == 100
    assert ds.questions[0].gold_titles == ["Scott Derrickson", "Ed Wood"]
    text = dict(ds.passages)["Scott Derrickson"]
    assert text.startswith("Scott Derrickson (born July 16, 1966)") and "He lives in Los Angeles" in text


@needs_data
def test_graphrag_bench_dev_half_per_type() -> None:
    bench = load_graphrag_bench(DATA / "graphrag-bench", "medical")
    assert len(bench.documents) == 1 and len(bench.questions) == 2062
    dev = split_by_type(bench.questions, "dev")
    per_type = {t: sum(q.question_type == t for q in dev) for t in {q.question_type for q in dev}}
    # ceil(n/2) of 1098, 509, 289, 166
    assert per_type == {"Fact Retrieval": 549, "Complex Reasoning": 255, "Contextual Summarize": 145,
                        "Creative Generation": 83}
    assert len(dev) + len(split_by_type(bench.questions, "test")) == 2062


def test_bad_inputs_are_clear(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="no data set folder"):
        load_dataset(tmp_path / "missing")
    with pytest.raises(DatasetError, match="not a known data set"):
        load_dataset(tmp_path)
    with pytest.raises(DatasetError, match="unknown split"):
        split([1, 2], "train")
    with pytest.raises(DatasetError, match="subset"):
        load_graphrag_bench(tmp_path, "legal")


# -- metrics, by hand -----------------------------------------------------------------------------------------
def test_title_metrics_by_hand() -> None:
    ranked = ["A", "X", "A", "B", "Y", "C"]  # "A" was split into two chunks
    gold = ["B", "A", "C"]
    assert metrics.recall_at_k(ranked, gold, 2) == pytest.approx(1 / 3)
    assert metrics.recall_at_k(ranked, gold, 4) == pytest.approx(2 / 3)
    assert metrics.recall_at_k(ranked, gold, 6) == 1.0
    assert metrics.all_evidence_at_k(ranked, gold, 5) == 0.0 and metrics.all_evidence_at_k(ranked, gold, 6) == 1.0
    assert metrics.mrr(ranked, gold) == 1.0
    assert metrics.mrr(["X", "X", "Y", "B"], gold) == pytest.approx(1 / 3)  # distinct titles: X, Y, B
    assert metrics.mrr(["X"], gold) == 0.0
    with pytest.raises(ConfigError):
        metrics.recall_at_k(ranked, gold, 0)


def test_score_means_over_questions() -> None:
    out = score([["A", "B"], ["C", "D"]], [["A", "Z"], ["C", "D"]], 8)
    figures = {k: out[k] for k in ("recall_at_k", "all_evidence_at_k", "mrr", "all_evidence_at_8")}
    assert figures == {"recall_at_k": 0.75, "all_evidence_at_k": 0.5, "mrr": 1.0, "all_evidence_at_8": 0.5}
    # 95% intervals: Wilson for 1 of 2 questions with all evidence, a seeded bootstrap over recalls 0.5 and 1.0
    assert out["all_evidence_at_k_ci95"] == [0.0945, 0.9055] == out["all_evidence_at_8_ci95"]
    assert out["recall_at_k_ci95"] == [0.5, 1.0]
    assert out["intervals"] == {"all_evidence": "wilson", "recall": "bootstrap-percentile(2000, seed 0)"}
    lat = latency_summary([0.01, 0.02, 0.03, 0.10])
    assert lat["seconds_per_query"] == pytest.approx(0.04) and lat["seconds_per_query_median"] == pytest.approx(0.025)
    assert lat["p50_ms"] == pytest.approx(25.0) and lat["p95_ms"] == pytest.approx(89.5)


def test_evidence_recall_rule() -> None:
    chunks = ["Basal  cell carcinoma (BCC) is the MOST common type\nof skin cancer.", "Unrelated text here."]
    # verbatim after whitespace/case normalisation
    assert metrics.evidence_found("basal cell carcinoma (bcc) is the most common type of skin cancer.", chunks)
    # paraphrase: content tokens {older, age, associated, higher, risk, bcc}; chunk has 4 of 6 = 0.667 >= 0.6
    para = ["Older people have a higher risk of BCC, it is said."]
    assert metrics.evidence_found("Older age is associated with a higher risk of BCC.", para)
    strict = metrics.EvidenceMatch(min_overlap=0.7)
    assert not metrics.evidence_found("Older age is associated with a higher risk of BCC.", para, strict)
    assert metrics.evidence_recall(["Older age is associated with a higher risk of BCC.", "Cats purr loudly."],
                                   para) == 0.5
    with pytest.raises(ConfigError):
        metrics.evidence_recall([" "], chunks)
    with pytest.raises(ConfigError):
        metrics.evidence_found("x", chunks, metrics.EvidenceMatch(min_overlap=0))


# -- runner end to end ----------------------------------------------------------------------------------------
def test_prepare_corpus_writes_only_changes(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    (corpus).mkdir()
    (corpus / "000007.txt").write_text("an old-style passage file", encoding="utf-8")
    titles = prepare_corpus([("A", "alpha"), ("B (2)", "beta"), ("C", "gamma")], corpus, {"B (2)": "B"})
    assert titles == ["A", "B (2)", "C"]
    assert (corpus / "000001.md").read_text() == "---\ntitle: B\n---\n# B\n\nbeta\n"
    mtime = (corpus / "000000.md").stat().st_mtime_ns
    prepare_corpus([("A", "alpha"), ("B", "beta two")], corpus)
    assert (corpus / "000000.md").stat().st_mtime_ns == mtime
    assert sorted(p.name for p in corpus.iterdir()) == ["000000.md", "000001.md"]
    assert json.loads((tmp_path / "titles.json").read_text()) == ["A", "B"]
    assert title_of("/x/corpus/000001.md", ["A", "B"]) == "B"
    with pytest.raises(ConfigError):
        title_of("/x/notes.md", ["A"])


def test_an_evaluation_passage_is_titled_by_its_title_and_keeps_it_in_its_text() -> None:
    from pathweaver.ingest.parsers import parse_file

    doc = parse_file(Path("000317.md"), passage_body("Inherent Vice (film)", "Inherent Vice is a 2014 film.").encode())
    assert doc.title == "Inherent Vice (film)"
    assert doc.text.startswith("Inherent Vice (film)\n") and "2014 film" in doc.text


def _tiny_hotpot(folder: Path) -> None:
    ctx_a = {"title": ["Marie Curie", "Warsaw", "Pierre Curie"],
             "sentences": [["Marie Curie was a physicist born in Warsaw.", " She won two Nobel Prizes."],
                           ["Warsaw is the capital of Poland."],
                           ["Pierre Curie was a French physicist married to Marie Curie."]]}
    ctx_b = {"title": ["Mount Everest", "Nepal", "Warsaw"],
             "sentences": [["Mount Everest is the highest mountain, on the border of Nepal and China."],
                           ["Nepal is a country in South Asia whose capital is Kathmandu."],
                           ["Warsaw is the capital of Poland."]]}
    records = [
        {"question": "In which country's capital was Marie Curie born?", "answer": "Poland", "type": "bridge",
         "level": "hard", "supporting_facts": {"title": ["Marie Curie", "Warsaw"], "sent_id": [0, 0]},
         "context": ctx_a},
        {"question": "What is the capital of the country where Mount Everest stands?", "answer": "Kathmandu",
         "type": "bridge", "level": "hard", "supporting_facts": {"title": ["Mount Everest", "Nepal"],
                                                                  "sent_id": [0, 0]}, "context": ctx_b},
    ]
    folder.mkdir()
    (folder / "hotpot_tiny.json").write_text(json.dumps(records), encoding="utf-8")


def test_run_eval_end_to_end(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(LEDGER_ENV, raising=False)
    data = tmp_path / "hotpot"
    _tiny_hotpot(data)
    root = tmp_path / "root"
    out = run_eval(data, "all", "dense", 2, None, root)
    assert out["dataset"] == "hotpotqa" and out["n_questions"] == 2 and out["k"] == 2
    assert (root / "eval" / "hotpotqa" / "corpus" / "000004.md").is_file()  # 5 distinct passages
    assert out["index"]["added"] == 5
    assert out["backfill_share"] == 0.0 and out["chunks_per_question"] == 2.0  # dense ranks every chunk itself
    for key in ("recall_at_k", "all_evidence_at_k", "mrr"):
        assert 0.5 <= out[key] <= 1.0  # dense retrieval finds the obvious first-hop passages
    assert out["p95_ms"] >= out["p50_ms"] > 0 and out["seconds_per_query"] > 0
    # a second run re-uses the store: nothing is re-indexed, and both runs are in the ledger
    again = run_eval(data, "dev", "hybrid", 2, None, root)
    assert again["index"]["added"] == 0 and again["index"]["unchanged"] == 5 and again["n_questions"] == 1
    rows = Ledger.for_store(root).history(dataset="hotpotqa")
    assert [(r["split"], r["method"]) for r in rows] == [("all", "dense"), ("dev", "hybrid")]
    assert rows[0]["recall_at_k"] == pytest.approx(out["recall_at_k"])
