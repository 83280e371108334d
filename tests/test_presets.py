"""The ``paper`` preset (issue 38): each method as its paper writes it, beside pathweaver's default variants, run on
the small real corpus store."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pathweaver.config import ConfigError
from pathweaver.retrieval.registry import method_defaults

QUESTION = "Where was the discoverer of polonium born?"

# What the paper preset sets, per method, written out from the papers (a change to presets.py must change these).
PINNED: dict[str, dict[str, Any]] = {
    # HippoRAG 2 / AGRAG §III-C: d = 0.5, passage nodes × 0.05 over every passage, k_a = 5 facts, specificity,
    # Contains edges of weight 1, AGRAG's statistical graph alone, the plain PPR ranking
    "ppr": {"damping": 0.5, "passage_weight": 0.05, "top_triples": 5, "dense_pool": 0, "specificity": True,
            "contains_weight": "one", "name_seeds": 0.0, "hybrid_pool": 0, "name_links": 0.0, "name_passages": 0.0,
            "statistical": 1.0, "proper_names": 0.0, "document_decay": 1.0, "unlinked": 1.0},
    # PathRAG Implementation Details: N = 40, K = 15, α = 0.7; keyword nodes alone, paths between retrieved nodes
    "pathrag": {"top_nodes": 40, "top_paths": 15, "alpha": 0.7, "theta": 0.001, "max_hops": 3, "paths": "flow",
                "names": False, "statistical": 1.0, "name_nodes": False, "dense_nodes": 0, "targets": "retrieved",
                "text_units": "none"},
    # AGRAG §III-C: k_a = 5, d = 0.5, passage scores × 0.05, pseudo edges cost 10, Eq. 11 over its graph, Eq. 20
    "mcmi": {"k_triples": 5, "damping": 0.5, "passage_score_factor": 0.05, "connector_cost": 10.0,
             "cycle_edges": True, "name_seeds": 0.0, "name_links": 0.0, "statistical": 1.0, "chunks": "hybrid"},
    # Path Pooling §3.3-3.4 / §4.2: 500 coarse triples reselected to 25, mean pooling, Dijkstra kernels
    "pooling": {"mode": "reselect", "coarse_m": 500, "top_triples": 25, "pooling": "mean", "kernel": "dijkstra",
                "base": "cos", "names": False, "name_triples": 0, "named_passages": False, "base_weight": 0.0,
                "passages_from": "served"},
    # LEGO-GraphRAG Table 1 / B.7-B.8, over the statistical graph without synonym edges
    "lego:sbe+isar": {"max_ent": 1000, "max_edge": 64, "top_k_paths": 32, "beam_width": 8, "max_hop": 4,
                      "names": False, "statistical": 1.0, "use_synonyms": False, "tail_passages": False},
}


@pytest.mark.parametrize("method", sorted(PINNED))
def test_the_paper_preset_sets_the_papers_parameters(method: str) -> None:
    paper, default = method_defaults(method, "paper"), method_defaults(method)
    assert {k: paper[k] for k in PINNED[method]} == PINNED[method]
    assert paper != default  # pathweaver's default is a different variant


@pytest.mark.parametrize("method", ["ppr", "pathrag", "mcmi", "pooling", "lego:sbe+isar", "lego:sae+osar", "pank",
                                    "pank:ppr"])
def test_each_method_runs_as_its_paper_on_a_small_store(indexed: Any, method: str) -> None:
    out = indexed.retrieve_json(QUESTION, method, 5, {"preset": "paper"})
    block = out["method"]
    assert block["name"] == method and block["preset"] == "paper" and block["differs_from_paper"]
    assert 0 < len(out["chunks"]) <= 5
    if method.startswith("pank"):
        assert out["info"]["base"] == ("hybrid" if method == "pank" else "ppr")
        return
    pinned = PINNED["lego:sbe+isar" if method.startswith("lego:") else method]
    assert {k: block["params"][k] for k in pinned} == pinned
    if method != "mcmi":  # AGRAG's own chunk list is its hybrid chunks; the others serve only what they found
        assert out["info"]["backfill_share"] == 0.0
        assert ("short" in out["info"]) == (len(out["chunks"]) < 5)


def test_default_runs_name_the_preset_and_what_differs(indexed: Any) -> None:
    out = indexed.retrieve_json(QUESTION, "pathrag", 3, None)
    assert out["method"]["preset"] == "default" and out["method"]["params"]["top_nodes"] is None
    assert "N = 10" in out["method"]["differs_from_paper"]
    assert indexed.retrieve_json(QUESTION, "hybrid", 3, None)["method"]["differs_from_paper"] == ""


def test_a_parameter_named_beside_the_preset_wins(indexed: Any) -> None:
    out = indexed.retrieve_json(QUESTION, "pathrag", 3, {"preset": "paper", "top_nodes": 12})
    assert out["method"]["params"]["top_nodes"] == 12 and out["method"]["params"]["alpha"] == 0.7


def test_the_papers_own_values_come_only_with_its_preset(indexed: Any) -> None:
    for method, params in (("pathrag", {"targets": "retrieved"}), ("pooling", {"base_weight": 0}),
                           ("pooling", {"passages_from": "served"}), ("lego:sbe+sbr", {"names": "false"})):
        with pytest.raises(ConfigError, match="preset=paper"):
            indexed.retrieve(QUESTION, method, 3, params)
    with pytest.raises(ConfigError, match="unknown preset 'hipporag'"):
        indexed.retrieve(QUESTION, "ppr", 3, {"preset": "hipporag"})
    for gone in ({"tail_score": 0.5}, {"base_proper_names": 0.2}):  # lost variants are no settings
        with pytest.raises(ConfigError, match="unknown parameter"):
            indexed.retrieve(QUESTION, "pooling", 3, gone)


def test_the_paper_graph_needs_the_statistical_entities(corpus_dir: Path, tmp_path: Path) -> None:
    from pathweaver.service import Pathweaver

    pw = Pathweaver.open(tmp_path / "names-only", overrides={"models": {"llm_backend": "none"},
                                                            "extract": {"entities": "names"}})
    try:
        pw.index([corpus_dir])
        assert pw.retrieve(QUESTION, "pathrag", 3, None).chunks  # pathweaver's default walks the names
        with pytest.raises(ConfigError, match='entities = "names,statistical"'):
            pw.retrieve(QUESTION, "pathrag", 3, {"preset": "paper"})
    finally:
        pw.close()


def test_an_empty_store_names_the_preset_it_would_run(tmp_path: Path) -> None:
    """Nothing indexed yet: no chunks, but the method block still says which preset and parameters were asked for,
    and a bad parameter is still an error."""
    from pathweaver.service import Pathweaver

    with Pathweaver.open(tmp_path / "empty", overrides={"models": {"llm_backend": "none"}}) as pw:
        out = pw.retrieve_json(QUESTION, "pathrag", 3, {"preset": "paper"})
        assert out["chunks"] == [] and out["method"]["preset"] == "paper"
        assert {k: out["method"]["params"][k] for k in PINNED["pathrag"]} == PINNED["pathrag"]
        with pytest.raises(ConfigError, match="alpha"):
            pw.retrieve(QUESTION, "pathrag", 3, {"alpha": -3.0})
