"""The DuckDB results ledger: rows written, read back, filtered and formatted."""

from __future__ import annotations

import subprocess
from pathlib import Path

import duckdb
import pytest

from pathweaver.config import ConfigError
from pathweaver.eval.ledger import LEDGER_ENV, Ledger, format_history, git_commit, ledger_path


def _row(**kw: object) -> dict:
    base = {"dataset": "2wikimultihopqa", "split": "dev", "method": "hybrid", "k": 5, "n_questions": 51,
            "recall_at_k": 0.61, "all_evidence_at_k": 0.33, "mrr": 0.7, "p50_ms": 12.5, "p95_ms": 30.0,
            "seconds_per_query": 0.014, "params": {"alpha": 0.5}}
    base.update(kw)
    return base


def test_append_and_history_round_trip(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "l.duckdb")
    assert ledger.history() == []
    ids = ledger.append([_row(), _row(method="ppr", recall_at_k=0.7, index_seconds=3.5, custom="x")])
    ids += ledger.append([_row(dataset="musique", source="bench:peers", commit="abc123")])
    assert len(set(ids)) == 3
    rows = ledger.history()
    assert [r["method"] for r in rows] == ["hybrid", "ppr", "hybrid"]
    first = rows[0]
    assert first["params"] == {"alpha": 0.5}
    assert first["recall_at_k"] == pytest.approx(0.61) and first["k"] == 5 and first["n_questions"] == 51
    assert first["source"] == "eval" and first["commit"] == git_commit()
    assert rows[1]["index_seconds"] == pytest.approx(3.5) and rows[1]["extra"] == {"custom": "x"}
    assert [r["dataset"] for r in ledger.history(dataset="musique")] == ["musique"]
    assert ledger.history(dataset="musique")[0]["commit"] == "abc123"
    assert len(ledger.history(source="eval")) == 2
    # the file is a plain DuckDB database other tools can query
    with duckdb.connect(str(tmp_path / "l.duckdb"), read_only=True) as conn:
        assert conn.execute("SELECT count(*), max(recall_at_k) FROM runs").fetchone() == (3, 0.7)


def test_commit_is_a_hash_or_unknown(tmp_path: Path) -> None:
    commit = git_commit()
    head = commit.removesuffix("+dirty")
    assert commit == "unknown" or (len(head) == 40 and int(head, 16) >= 0)
    assert git_commit(Path("/")) == "unknown"
    repo = tmp_path / "repo"
    (repo / "src").mkdir(parents=True)
    (repo / "src" / "m.py").write_text("x = 1\n")
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    for args in (["init", "-q"], ["add", "."], ["commit", "-qm", "one"]):
        subprocess.run(git + args, check=True, capture_output=True)
    clean = git_commit(repo)
    assert len(clean) == 40 and "+" not in clean
    (repo / "src" / "m.py").write_text("x = 2\n")  # figures from uncommitted code are marked as such
    assert git_commit(repo) == clean + "+dirty"


def test_missing_fields_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="dataset"):
        Ledger(tmp_path / "l.duckdb").append([{"method": "dense"}])


def test_path_from_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(LEDGER_ENV, raising=False)
    assert ledger_path(tmp_path) == tmp_path / "ledger.duckdb"
    monkeypatch.setenv(LEDGER_ENV, str(tmp_path / "other.duckdb"))
    assert Ledger.for_store(tmp_path / "store").path == tmp_path / "other.duckdb"


def test_format_history_compares_runs(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "l.duckdb")
    ledger.append([_row(commit="1111111111aa"), _row(commit="2222222222bb", method="pathrag", recall_at_k=0.75)])
    text = format_history(ledger.history())
    lines = text.splitlines()
    assert lines[0].split()[:6] == ["time", "commit", "source", "dataset", "split", "method"]
    assert "11111111" in lines[2] and "0.610" in lines[2] and "12.5" in lines[2]
    assert "22222222" in lines[3] and "pathrag" in lines[3] and "0.750" in lines[3]
    assert format_history([]) == "no runs in the ledger yet"


def test_report_splices_between_markers_only(tmp_path: Path) -> None:
    from pathweaver.eval.report import BEGIN, END, render_report, splice

    ledger = Ledger(tmp_path / "l.duckdb")
    ledger.append([_row(), _row(recall_at_k=0.64), _row(method="ppr", recall_at_k=0.7),
                   _row(dataset="synthetic", method="ppr", source="bench:latency", recall_at_k=None, n_edges=1000)])
    doc = tmp_path / "docs" / "benchmarks.md"
    doc.parent.mkdir()
    doc.write_text(f"# Benchmarks\n\nHand-written intro.\n\n{BEGIN}\nold\n{END}\n\n## Notes\nKeep me.\n")
    out = render_report(ledger.history(), doc, tmp_path / "docs" / "img")
    text = doc.read_text()
    assert text.startswith("# Benchmarks\n\nHand-written intro.\n\n") and text.endswith("## Notes\nKeep me.\n")
    assert "old" not in text and out["rows"] == 4
    table = text[text.index("### 2wikimultihopqa (eval)"):]
    lines = [ln for ln in table.splitlines() if ln.startswith("| ")]
    # newest hybrid run only (0.64, not 0.61), methods sorted by recall
    assert lines[1].startswith("| ppr | dev | 5 | 51 | 0.700") and lines[2].startswith("| hybrid | dev | 5 | 51 | 0.640")
    assert "| ppr | synthetic | 1000 | 12.5 | 30.0 |" in text
    assert splice("intro\n", "x") == f"intro\n\n{BEGIN}\nx\n{END}\n"
    with pytest.raises(ConfigError):
        splice(f"{END} {BEGIN}", "x")
