"""Method registry: a method name -> its function and its parameter dataclass (pathweaver's defaults), and the
presets (``retrieval/presets.py``): ``preset = "paper"`` runs a method as its paper writes it.

Methods are imported lazily so importing the registry costs nothing. ``lego:<extract>+<path>`` names compose a
LEGO-GraphRAG subgraph-extraction module with a path-retrieval module (e.g. ``lego:sbe+isar``). Overrides resolve
as: the preset's table, then the user's parameters (config table, CLI ``--param``, tool arguments), then what the
method's name fixes (LEGO modules).
"""

from __future__ import annotations

import dataclasses
import importlib
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pathweaver.config import ConfigError
from pathweaver.retrieval.presets import (
    PAPER,
    STATISTICAL_SETTING,
    differs_from_paper,
    preset_params,
    split_preset,
)
from pathweaver.retrieval.types import Query, RetrievalEnv, RetrievalResult
from pathweaver.store.snapshot import GraphSnapshot

# name -> (module, function, params dataclass)
_METHODS: dict[str, tuple[str, str, str]] = {
    "dense": ("pathweaver.retrieval.seeds", "dense_retrieve", "DenseParams"),
    "bm25": ("pathweaver.retrieval.seeds", "bm25_retrieve", "Bm25Params"),
    "hybrid": ("pathweaver.retrieval.seeds", "hybrid_retrieve", "HybridParams"),
    "ppr": ("pathweaver.retrieval.ppr", "ppr_retrieve", "PPRParams"),
    "pathrag": ("pathweaver.retrieval.pathrag", "pathrag_retrieve", "PathRAGParams"),
    "mcmi": ("pathweaver.retrieval.mcmi", "mcmi_retrieve", "MCMIParams"),
    "pooling": ("pathweaver.retrieval.pooling", "pooling_retrieve", "PoolingParams"),
    "lego": ("pathweaver.retrieval.lego", "lego_retrieve", "LegoParams"),
}
LEGO_EXTRACTORS = ("sbe", "sae")
LEGO_PATHS = ("sbr", "osar", "isar")


PANK = "pank"
# what ``ask`` and the ``answer`` tool retrieve with when no method is named: the walk over the names people wrote
# had the best answer support on the dev splits (docs/benchmarks.md, "Answers with the default method")
ANSWER_METHOD = "ppr"
# plain ``pank`` runs its plan over the default answer method: the question and every sub-question retrieve as
# ``ask`` does, so a question the planner leaves whole gets exactly ``ask``'s chunks (docs/benchmarks.md, "Why
# the defaults"); ``pank:hybrid`` is the earlier default
PANK_DEFAULT_BASE = ANSWER_METHOD
# plain ``pank`` under the paper preset: PankRAG retrieves with LightRAG, whose nearest here is hybrid (presets.py)
PANK_PAPER_BASE = "hybrid"
# the parameters that turn a method's final top-k set selection off, leaving its ranking: a fused pank plan reads
# each list's ranks as its confidence, and a set selection moves passages down for their document's sake
PLAIN_RANKING: dict[str, dict[str, Any]] = {"ppr": {"document_decay": 1.0, "unlinked": 1.0}}
# what a plan's sub-questions run with besides: ppr's dense seeds alone, as a sub-question's words are mostly the
# planner's and an earlier hop's answer (hybrid seeds there cost musique dev 0.54 -> 0.50; the whole question keeps
# them)
SUB_QUESTION: dict[str, dict[str, Any]] = {"ppr": {"hybrid_pool": 0}}
# what ``retrieve`` and a retrieval ``eval`` use when no method is named: AGRAG's hybrid seeds (Eq. 20-21)
RETRIEVE_METHOD = "hybrid"


def registry_method_names() -> list[str]:
    """The methods with their own parameters: the papers' retrievers and every LEGO combination."""
    base = [m for m in _METHODS if m != "lego"]
    return base + [f"lego:{e}+{p}" for e in LEGO_EXTRACTORS for p in LEGO_PATHS]


def method_names() -> list[str]:
    """Every accepted ``--method`` value: the registry's, ``pank`` and ``pank:<each of them>``."""
    names = registry_method_names()
    return names + [PANK] + [f"{PANK}:{n}" for n in names]


def pank_base(name: str) -> str | None:
    """For ``pank`` / ``pank:<method>`` (a PankRAG plan run with a base method), the base method; else None."""
    if name == PANK:
        return PANK_DEFAULT_BASE
    if not name.startswith(PANK + ":"):
        return None
    base = name[len(PANK) + 1 :]
    if base == PANK or base.startswith(PANK + ":"):
        raise ConfigError(f"{name!r}: the base method of pank cannot itself be pank")
    parse_method(base)
    return base


def plain_ranking(base: str, params: dict[str, Any] | None, sub_question: bool = True) -> dict[str, Any] | None:
    """``params`` for ``base`` inside a fused plan: its set selection off (``PLAIN_RANKING``), and for a
    sub-question ``SUB_QUESTION``'s settings too; a value the caller set wins."""
    plain = {**PLAIN_RANKING.get(base, {}), **(SUB_QUESTION.get(base, {}) if sub_question else {})}
    return {**plain, **(params or {})} if plain else params


@dataclass(frozen=True)
class MethodSpec:
    name: str
    fn: Callable[..., RetrievalResult]
    params_cls: type


def parse_method(name: str) -> tuple[str, dict[str, Any]]:
    """Split ``lego:sbe+isar`` into the base method and its fixed parameters; validate the name."""
    if name.startswith("lego:"):
        combo = name[len("lego:") :]
        extract, _, path = combo.partition("+")
        if extract not in LEGO_EXTRACTORS or path not in LEGO_PATHS:
            raise ConfigError(
                f"unknown LEGO combination {name!r}; use lego:<{'|'.join(LEGO_EXTRACTORS)}>+<{'|'.join(LEGO_PATHS)}>"
            )
        return "lego", {"extractor": extract, "path_module": path}
    if name not in _METHODS or name == "lego":
        choices = ", ".join(registry_method_names())
        raise ConfigError(f"unknown method {name!r}; choose one of: {choices}, {PANK}, {PANK}:<method>")
    return name, {}


def get_method(name: str) -> tuple[MethodSpec, dict[str, Any]]:
    """The spec of ``name`` plus the parameters its name fixes (LEGO modules)."""
    base, fixed = parse_method(name)
    module_name, fn_name, params_name = _METHODS[base]
    module = importlib.import_module(module_name)
    return MethodSpec(base, getattr(module, fn_name), getattr(module, params_name)), fixed


def _coerce_field(cls: type, fld: dataclasses.Field[Any], value: Any) -> Any:
    hints = typing.get_type_hints(cls)
    target = hints.get(fld.name, Any)
    try:
        if target is bool:
            if isinstance(value, str):
                if value.lower() not in {"true", "false", "1", "0"}:
                    raise ValueError("expected true or false")
                return value.lower() in {"true", "1"}
            return bool(value)
        if target is int:
            if isinstance(value, float) and not value.is_integer():
                raise ValueError("expected an integer")
            return int(value)
        if target is float:
            return float(value)
        if target is str:
            return str(value)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"parameter {fld.name}: cannot use {value!r} ({exc})") from exc
    return value


def make_params(params_cls: type, overrides: dict[str, Any] | None) -> Any:
    """Instantiate a method's parameter dataclass with ``overrides``; unknown names are a clear error."""
    fields = {f.name: f for f in dataclasses.fields(params_cls)}
    values: dict[str, Any] = {}
    for key, value in (overrides or {}).items():
        if key not in fields:
            raise ConfigError(
                f"unknown parameter {key!r} for {params_cls.__name__}; known: {', '.join(sorted(fields))}"
            )
        values[key] = _coerce_field(params_cls, fields[key], value)
    params = params_cls(**values)
    validate = getattr(params, "validate", None)
    if callable(validate):
        validate()
    return params


def method_defaults(name: str, preset: str = "default") -> dict[str, Any]:
    """The parameters of a method under ``preset`` (pathweaver's default or the paper's), as a plain dict (for
    docs, config and tool schemas)."""
    spec, fixed = get_method(name)
    params = make_params(spec.params_cls, {**preset_params(spec.name, preset, {}), **fixed})
    return dataclasses.asdict(params)


def check_top_k(top_k: int) -> None:
    """A clear error for a result size below one."""
    if top_k < 1:
        raise ConfigError(f"top_k must be at least 1, got {top_k}")


def checked_method(name: str, top_k: int, overrides: dict[str, Any] | None = None) -> tuple[MethodSpec, Any]:
    """The spec of method ``name`` and its parameters (``overrides`` over its preset's table, pathweaver's
    defaults unless ``preset`` names the paper's), or a clear error for a bad name, preset, parameter or
    ``top_k``; also where nothing would run (an empty store)."""
    check_top_k(top_k)
    spec, fixed = get_method(name)
    preset, rest = split_preset(overrides)
    return spec, make_params(spec.params_cls, {**preset_params(spec.name, preset, rest), **fixed})


def has_statistical(snapshot: GraphSnapshot) -> bool:
    """Whether the store holds AGRAG's statistical n-gram entities (``extract.entities`` with ``statistical``)."""
    return "ngram" in snapshot.entity_kinds


def check_paper_graph(snapshot: GraphSnapshot, name: str) -> None:
    """A clear error where the paper preset of ``name`` needs the statistical graph this store does not hold."""
    base, _ = parse_method(name)
    if PAPER[base].statistical_graph and snapshot.n_entities and not has_statistical(snapshot):
        raise ConfigError(f"{name} with preset=paper walks the paper's graph (AGRAG's statistical n-gram entities and "
                          f"co-occurrence relations), which this store does not hold; set {STATISTICAL_SETTING} in "
                          f"pathweaver.toml and index again")


def method_block(name: str, preset: str, params: dict[str, Any]) -> dict[str, Any]:
    """What ``retrieve --json`` says about the method that ran: its name, preset, parameters and, in one line, what
    it does that its paper does not."""
    pank = pank_base(name)
    base, _ = parse_method(pank or name)
    differs = differs_from_paper("pank", preset) if pank else differs_from_paper(base, preset)
    if pank and base != "hybrid" and differs_from_paper(base, preset):
        differs += f"; its base {base}: {differs_from_paper(base, preset)}"
    return {"name": name, "preset": preset, "params": {k: v for k, v in params.items() if k != "preset"},
            "differs_from_paper": differs}


def run_method(
    env: RetrievalEnv, query: Query, name: str, top_k: int, overrides: dict[str, Any] | None = None
) -> RetrievalResult:
    """Run method ``name`` with config/CLI/tool ``overrides`` applied over its preset. pathweaver's default merges
    its chunks per note (``notes.per_note``); under the paper preset the chunk list holds only what the method found
    (``Preset.own_chunks``): back-fill is dropped and ``info["short"]`` says how many chunks are missing."""
    from pathweaver.retrieval.floor import note_steps
    from pathweaver.retrieval.linked import NoteSteps
    from pathweaver.retrieval.notes import per_note

    spec, params = checked_method(name, top_k, overrides)
    preset, _ = split_preset(overrides)
    if preset == "paper":
        check_paper_graph(env.snapshot, name)
        result = spec.fn(env, query, top_k, params)
    else:
        result = per_note(lambda k: spec.fn(env, query, k, params), env.snapshot.chunk_docs, top_k)
        if isinstance(params, NoteSteps):
            result = note_steps(env, query, result, top_k, params.hybrid_floor, params.linked_notes)
    result.method = name
    if preset == "paper" and PAPER[spec.name].own_chunks:
        result.chunks = [c for c in result.chunks if not c.backfill]
        if len(result.chunks) < top_k:
            result.info["short"] = (f"{name} (preset paper) found {len(result.chunks)} of {top_k} chunks; no "
                                    f"back-fill stands in for the rest")
    result.info["preset"] = preset
    # the preset leads the parameters, so an eval row or ledger entry that keeps only ``params`` still names it
    result.info.setdefault("params", {"preset": preset, **dataclasses.asdict(params)})
    return result
