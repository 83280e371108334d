"""Parameter presets: ``default`` (pathweaver's tuned variants) and ``paper`` (each method as its paper writes it).

``--param preset=paper`` (a ``preset = "paper"`` line in ``[retrieval.<method>]``, or a tool's ``preset``
argument) puts a method's ``PAPER`` table under the user's own parameters: a parameter the user names still wins.
The paper preset also walks the paper's own graph (AGRAG's statistical n-gram entities, co-occurrence relations
and synonym edges; none of the name layer pathweaver adds), so it needs a store indexed with ``statistical`` in
``[extract] entities`` (the default), and it serves only the chunks the method itself found: no dense back-fill
stands in for the method, and a short list says so (``info["short"]``).

Choices a paper leaves open, and why (docs/design-notes.md, "Paper presets"):
- no method here calls an LLM, so LLM-extracted entities and relations (GraphRAG, HippoRAG 2's OpenIE, PathRAG's
  keywords) are AGRAG's statistical graph (TF-IDF n-grams, sentence co-occurrence, Eq. 2-5) and statistical
  keywords; HippoRAG 2's LLM fact filter has no stand-in (the top k_a facts by cosine seed the walk);
- PathRAG's θ: the paper gives none and the authors' code's 0.3 divides by neighbours inside one pair's path set;
  over whole-graph degrees it would stop nearly every flow at its start, so the preset keeps 0.001, whose bound
  1/((1-α)θ) ≈ 3,300 nodes per start is under the paper's |V| ~ 10^4;
- Path Pooling's base is SubgraphRAG's trained MLP scorer; the preset uses the naive scorer cos(query, triple
  text) the paper names as the untrained alternative (§2), and ranks passages by their triple's pooled score;
- LEGO assumes the question's topic entities are given: the preset takes the document names the question
  mentions, then the entities nearest the question (``seed_entities``); Freebase has no synonym edges, so
  neither has the preset's graph; PPR's damping is not in the appendix (0.85, PageRank's);
- PankRAG builds on LightRAG's retrieval, which pathweaver does not have: plain ``pank`` runs its plan over
  ``hybrid`` (dense + BM25, AGRAG Eq. 20-21) and fuses only the sub-questions' lists, not the whole question's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pathweaver.config import ConfigError

PRESETS = ("default", "paper")
STATISTICAL_SETTING = '[extract] entities = "names,statistical"'


@dataclass(frozen=True)
class Preset:
    """One method's paper preset: the parameters it sets, whether it walks the statistical graph, whether its
    chunk list drops back-fill, and what still differs from the paper."""

    params: dict[str, Any] = field(default_factory=dict)
    statistical_graph: bool = True
    own_chunks: bool = True
    differs: str = ""


PAPER: dict[str, Preset] = {
    "dense": Preset(statistical_graph=False, differs="no paper: plain dense retrieval"),
    "bm25": Preset(statistical_graph=False, differs="no paper: plain BM25"),
    "hybrid": Preset(statistical_graph=False, differs=""),  # AGRAG Eq. 20-21 as written in both presets
    "ppr": Preset(
        params={"damping": 0.5, "passage_weight": 0.05, "top_triples": 5, "dense_pool": 0, "specificity": True,
                "seed_entities": 0, "name_seeds": 0.0, "hybrid_pool": 0, "relation_weight": "count",
                "contains_weight": "one",
                "name_links": 0.0, "name_passages": 0.0, "statistical": 1.0, "proper_names": 0.0, "name_parts": 0,
                "document_decay": 1.0, "unlinked": 1.0, "linked_notes": 0, "hybrid_floor": False},
        differs="statistical n-gram triples stand in for OpenIE facts; no LLM fact filter",
    ),
    "pathrag": Preset(
        params={"top_nodes": 40, "top_paths": 15, "alpha": 0.7, "theta": 0.001, "max_hops": 3, "paths": "flow",
                "names": False, "statistical": 1.0, "name_nodes": False, "name_parts": 0, "dense_nodes": 0,
                "targets": "retrieved", "text_units": "none", "unnamed": "none", "linked_notes": 0, "hybrid_floor": False},
        differs="statistical keywords and AGRAG's graph stand in for LLM keywords and GraphRAG's graph; θ = 0.001 "
                "(the paper gives none)",
    ),
    "mcmi": Preset(
        params={"k_triples": 5, "damping": 0.5, "passage_score_factor": 0.05, "connector_cost": 10.0,
                "cycle_edges": True, "name_seeds": 0.0, "name_parts": 0, "name_links": 0.0, "statistical": 1.0,
                "chunks": "hybrid", "linked_notes": 0, "hybrid_floor": False},
        own_chunks=False,  # AGRAG's chunk list is its Step 3 hybrid chunks (Eq. 20-21), beside the subgraph
        differs="the chunk list is Eq. 20-21's hybrid chunks, as AGRAG serves them; the MCMI subgraph is returned "
                "beside them and ranks no chunk",
    ),
    "pooling": Preset(
        params={"mode": "reselect", "coarse_m": 500, "top_triples": 25, "pooling": "mean", "kernel": "dijkstra",
                "base": "cos", "names": False, "statistical": 1.0, "name_triples": 0, "name_parts": 0,
                "named_passages": False, "tail_passages": False, "base_weight": 0.0, "passages_from": "served",
                "fill": "served", "linked_notes": 0, "hybrid_floor": False},
        differs="cos(query, triple) stands in for SubgraphRAG's trained MLP scorer; passages are those of the "
                "served triples",
    ),
    "lego": Preset(
        params={"names": False, "statistical": 1.0, "use_synonyms": False, "tail_passages": False,
                "triple_passages": "all", "fill": "dense", "linked_notes": 0, "hybrid_floor": False,
                "triple_scoring": False},
        differs="AGRAG's statistical graph stands in for Freebase; the question's names and nearest entities stand "
                "in for given topic entities",
    ),
    "pank": Preset(
        params={}, statistical_graph=False, own_chunks=False,
        differs="heuristic plan (no LLM); hybrid (dense + BM25) stands in for LightRAG's retrieval",
    ),
}

# what every graph method's default adds on notes that link each other (retrieval/floor.py, retrieval/linked.py)
NOTES_DIFFERS = ("; on linked notes, hybrid's first notes keep their slots and the last goes to the method's best "
                 "note hybrid lacks or to a note linked to or from the top note")
# What pathweaver's default variant of each method changes against its paper (one line each; README, tools, JSON).
DEFAULT_DIFFERS: dict[str, str] = {
    "dense": "", "bm25": "", "hybrid": "",
    "ppr": "walks the names people wrote (titles, links) as well: named documents' passages seed it, passage name "
           "links x3, the dense top 5 at full weight (paper: every passage x0.05) and the hybrid top 5 when the "
           "question names no document, 1 seed triple (paper: 5), top-k set selection" + NOTES_DIFFERS,
    "pathrag": "N = 10 led by the question's named documents and the top dense documents, directed name edges, "
               "paths may end wherever a named node's flow reached, named nodes' text units beside the paths, "
               "dense back-fill" + NOTES_DIFFERS,
    "mcmi": "Eq. 11 over the name layer with the question's names as terminals; chunks alternate walk-influence "
            "passages with the hybrid chunks (paper: hybrid chunks alone)" + NOTES_DIFFERS,
    "pooling": "base scorer is ppr (paper: SubgraphRAG's MLP), name triples join, passages score "
               "base^0.5 x pooled^0.5 over all coarse triples" + NOTES_DIFFERS,
    "lego": "walks the name edges beside the triples, a name edge brings the named document's passage, the "
            "extracted subgraph fills before dense back-fill, ISAR scores each step's new triple (B.8 (1); paper "
            "Algorithm 1: the whole path's text)" + NOTES_DIFFERS,
    "pank": "runs over ppr and fuses the whole question's ranking with the sub-questions' (paper: LightRAG "
            "retrieval per sub-question)",
}

# Parameter values that only the paper preset sets: the paper's own behaviour, which lost as a variant on the dev
# splits (/work/notes/paper.md), so it is no free knob; with ``preset = "paper"`` a user may still name it.
PAPER_ONLY: dict[str, dict[str, Any]] = {
    "pathrag": {"targets": "retrieved", "names": False},
    "pooling": {"base_weight": 0.0, "passages_from": "served", "fill": "served", "names": False},
    "lego": {"names": False, "fill": "dense"},
}


def split_preset(overrides: dict[str, Any] | None) -> tuple[str, dict[str, Any]]:
    """(the preset named in ``overrides``, default "default"; the other overrides); a bad name is an error."""
    rest = dict(overrides or {})
    preset = str(rest.pop("preset", "default") or "default").strip().lower()
    if preset not in PRESETS:
        raise ConfigError(f"unknown preset {preset!r}; choose one of: {', '.join(PRESETS)}")
    return preset, rest


def preset_params(base: str, preset: str, overrides: dict[str, Any]) -> dict[str, Any]:
    """The preset's table for method ``base`` under ``overrides`` (the user's parameters win). Outside the paper
    preset a ``PAPER_ONLY`` value is a clear error pointing to the preset."""
    if preset == "paper":
        return {**PAPER[base].params, **overrides}
    for key, value in PAPER_ONLY.get(base, {}).items():
        if key in overrides and _same(overrides[key], value):
            raise ConfigError(f"{base} {key} = {value!r} is the paper's own behaviour and only the paper preset sets "
                              f"it; use --param preset=paper (or preset = \"paper\" in [retrieval.{base}])")
    return overrides


def _same(given: Any, value: Any) -> bool:
    if isinstance(value, bool):
        return str(given).lower() in (("false", "0") if not value else ("true", "1"))
    if isinstance(value, float):
        try:
            return float(given) == value
        except (TypeError, ValueError):
            return False
    return str(given) == str(value)


def differs_from_paper(base: str, preset: str) -> str:
    """One line: what this run of ``base`` does that its paper does not ("" where nothing does)."""
    return PAPER[base].differs if preset == "paper" else DEFAULT_DIFFERS.get(base, "")
