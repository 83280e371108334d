"""One document's share of the graph: entities, mentions and relations of its chunks, from stored inputs only.

``derive_document`` is a pure function of the document's chunks (text, candidate-gram counts, word count), its
structure (title, headings, links) and the corpus statistics (|T_c| and df) it is given. Indexing and refresh
both call it, so a refresh over the final corpus gives exactly what a fresh index gives.

- N-gram entities: ER (AGRAG §III-B Eq. 2) above tau (Eq. 3), at most ``max_entities`` per chunk; the mention
  count is count(v, t) and the mention score the ER value.
- Structural entities (DESIGN principle 7): the title is mentioned by the first chunk, a heading by the chunk that
  contains its offset (count = max(1, count(v, t))); a link target is supported by its link relation.
- Named entities (``extract.entities`` with "ner"): the chunk's spaCy entity spans (``ChunkInput.ner``, given by
  the caller, a pure function of the chunk text) that ``names.linkable`` accepts, kind "ner", count = occurrences.
  The statistical n-grams enter only with "statistical" in ``extract.entities``; with "ner" the document's own
  names (title, title without "(...)") also take part in its chunks' sentence relations.
- Relations: sentence co-occurrence of the entities a chunk mentions (the no-LLM stand-in for Eq. 4), with the
  sentence span moved into document coordinates; link relations "title links to target" supported by chunk 0.
"""

from __future__ import annotations

import bisect
import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from pathweaver.config import ConfigError, ExtractSettings
from pathweaver.extract.entities import grams_of, select_entities, word_spans
from pathweaver.extract.names import display_name, document_names, linkable
from pathweaver.extract.ner import entity_spans
from pathweaver.extract.relations import cooccurrence_relations
from pathweaver.extract.structure import link_relations, structural_entities
from pathweaver.models.packing import RECIPE
from pathweaver.models.precision import check_precision, resolve_precision
from pathweaver.numeric.vectors import VECTOR_MODES

# Which kind an entity keeps when several sources name it (authored structure beats statistics).
KIND_RANK = {"title": 0, "alias": 1, "heading": 2, "link": 3, "ner": 4, "ngram": 5}
ENTITY_SOURCES = ("names", "ner", "statistical")
NER_NAMES_VERSION = 2  # how ``ner_names`` turns spans into names; a change re-derives every store's graph


def parse_sources(value: str) -> frozenset[str]:
    """``extract.entities`` ("names,ner", "statistical", ...) as a set; "names" is always in it."""
    parts = {p.strip().lower() for p in value.replace("+", ",").split(",") if p.strip()}
    unknown = sorted(parts - set(ENTITY_SOURCES))
    if unknown or not parts:
        raise ConfigError(f"extract.entities must name some of {', '.join(ENTITY_SOURCES)} (comma-separated), "
                          f"got {value!r}")
    return frozenset(parts | {"names"})


_SETTINGS = ExtractSettings()  # the one home of the extraction defaults


@dataclass(frozen=True)
class ExtractParams:
    """Graph-construction parameters (AGRAG §III-B); the defaults are ``ExtractSettings``'s."""

    ngram_max: int = _SETTINGS.ngram_max  # b
    tau: float = _SETTINGS.tau  # ER threshold, Eq. 3
    max_entities: int = _SETTINGS.max_entities_per_chunk
    label_max_words: int = _SETTINGS.relation_label_max_words
    synonym_phi: float = _SETTINGS.synonym_phi  # phi, Eq. 5
    triple_vectors: str = _SETTINGS.triple_vectors  # composed | encoded (numeric/vectors.py)
    entity_vectors: str = _SETTINGS.entity_vectors  # composed | encoded (numeric/vectors.py)
    precision: str = _SETTINGS.graph_vector_precision  # of the model passes behind entity and relation vectors
    entities: str = _SETTINGS.entities  # entity sources (``parse_sources``)
    ner_model: str = _SETTINGS.ner_model
    ner_labels: tuple[str, ...] = ()  # spaCy labels that count ("ner" only)
    ner_processes: int = _SETTINGS.ner_processes  # how many run the spaCy pass; the spans do not depend on it

    @property
    def sources(self) -> frozenset[str]:
        return parse_sources(self.entities)

    @property
    def uses_ner(self) -> bool:
        return "ner" in self.sources

    @property
    def entity_settings(self) -> str:
        """What decides which entities chunks yield (kept in meta; a change re-derives the graph)."""
        srcs = ",".join(sorted(self.sources))
        if not self.uses_ner:
            return srcs
        return f"{srcs};{self.ner_model};{','.join(sorted(self.ner_labels))};names:{NER_NAMES_VERSION}"

    def validate(self) -> None:
        """Raise ``ConfigError`` naming the bad setting."""
        if self.ngram_max < 1:
            raise ConfigError(f"extract.ngram_max must be >= 1, got {self.ngram_max}")
        if self.max_entities < 0 or self.label_max_words < 0:
            raise ConfigError("extract.max_entities_per_chunk and extract.relation_label_max_words must be >= 0")
        if not -1.0 <= self.synonym_phi < 1.0:
            raise ConfigError(f"extract.synonym_phi must be in [-1, 1), got {self.synonym_phi}")
        for name, mode in (("triple_vectors", self.triple_vectors), ("entity_vectors", self.entity_vectors)):
            if mode not in VECTOR_MODES:
                raise ConfigError(f"extract.{name} must be one of {', '.join(VECTOR_MODES)}, got {mode!r}")
        check_precision(self.precision)
        parse_sources(self.entities)
        if self.ner_processes < 0:
            raise ConfigError(f"extract.ner_processes must be >= 0 (0 = one per core), got {self.ner_processes}")

    @property
    def vector_settings(self) -> str:
        """What decides the stored entity and relation vectors and the synonym edges between them (kept in meta;
        a change re-makes them all). Synonyms of existing entities are otherwise never revisited (Eq. 5 pairs each
        entity once), so phi belongs here, and so does a precision other than float32 (stores made before it was
        recorded were float32, and keep their string)."""
        modes = (f"entities:{self.entity_vectors},triples:{self.triple_vectors},phi:{self.synonym_phi:g},"
                 f"passes:{RECIPE}")
        return modes if self.precision == "float32" else f"{modes},precision:{self.precision}"

    @classmethod
    def from_settings(cls, s: ExtractSettings) -> ExtractParams:
        from pathweaver.extract.ner import label_set

        return cls(s.ngram_max, s.tau, s.max_entities_per_chunk, s.relation_label_max_words, s.synonym_phi,
                   s.triple_vectors, s.entity_vectors, s.graph_vector_precision, s.entities, s.ner_model,
                   tuple(sorted(label_set(s.ner_labels))), s.ner_processes)

    def resolved(self, invariant: Callable[[str], bool]) -> ExtractParams:
        """These parameters with "auto" precision decided for this CPU and embedder (what the store records;
        ``invariant`` is ``Embedder.batch_invariant``)."""
        return replace(self, precision=resolve_precision(self.precision, invariant))


@dataclass(frozen=True)
class ChunkInput:
    """What derivation needs of a chunk; ``key`` identifies it to the caller (chunk id or list position)."""

    key: int
    start: int
    end: int
    text: str
    grams: Mapping[str, int]
    n_words: int
    ner: tuple[str, ...] = ()  # texts of the chunk's entity spans of ``ExtractParams.ner_labels``, in text order


@dataclass(frozen=True)
class Structure:
    title: str
    headings: Sequence[tuple[int, str]] = ()
    links: Sequence[str] = ()


@dataclass(frozen=True)
class RelationRow:
    src: str
    dst: str
    label: str
    kind: str  # 'cooccur' | 'link'
    chunk: int  # ChunkInput.key
    start: int  # sentence span in document coordinates
    end: int
    sentence: str


@dataclass
class DocGraph:
    kinds: dict[str, str] = field(default_factory=dict)  # entity name -> kind
    mentions: dict[tuple[str, int], tuple[int, float]] = field(default_factory=dict)  # (name, key) -> (count, ER)
    relations: list[RelationRow] = field(default_factory=list)


def chunk_stats(text: str, ngram_max: int) -> tuple[dict[str, int], int]:
    """Candidate-gram counts and word count |t| of one chunk (inputs of Eq. 2), from one pass over its words."""
    spans = word_spans(text)
    return dict(grams_of(spans, ngram_max)), len(spans)


def ner_names(spans: Sequence[str]) -> dict[str, int]:
    """{entity name: occurrences} of a chunk's entity span texts: ``names.display_name`` form without a leading
    "the" (spaCy's "the United States" is Wikipedia's "United States"), linkable only (no stopword-only,
    number-only or one-letter names)."""
    out: dict[str, int] = {}
    for text in spans:
        name = display_name(text)
        if name.startswith("the "):
            name = display_name(name[4:])  # again: "the 'Lex Burgundionum'" keeps a quote until "the" goes
        if name and linkable(name):
            out[name] = out.get(name, 0) + 1
    return out


def question_ner_names(params: ExtractParams) -> Callable[[str], list[str]] | None:
    """What finds the entity names of a question with the indexer's pipeline, labels and span-to-name rule
    (``ner_names``), or None when ``params`` has no ``ner``. spaCy is imported on the first question, not here."""
    if not params.uses_ner:
        return None
    labels = frozenset(params.ner_labels)

    @functools.lru_cache(maxsize=256)  # one question reaches several methods (pank, an eval's baselines)
    def names(text: str) -> tuple[str, ...]:
        spans = entity_spans([text], params.ner_model)[0]
        return tuple(ner_names([t for label, t in spans if label in labels]))

    return lambda text: list(names(text))


def merge_kind(current: str | None, new: str) -> str:
    if current is None:
        return new
    return new if KIND_RANK.get(new, 9) < KIND_RANK.get(current, 9) else current


def _heading_chunk(chunks: Sequence[ChunkInput], offset: int) -> ChunkInput:
    starts = [c.start for c in chunks]
    i = max(0, bisect.bisect_right(starts, offset) - 1)
    return chunks[i]


def derive_document(
    chunks: Sequence[ChunkInput],
    structure: Structure,
    n_chunks: int,
    df: Mapping[str, int],
    params: ExtractParams,
) -> DocGraph:
    """Entities, mentions and relations of one document (chunks sorted by ``start``); see the module docstring."""
    out = DocGraph()
    if not chunks:
        return out
    chunks = sorted(chunks, key=lambda c: (c.start, c.key))
    named: dict[int, set[str]] = {c.key: set() for c in chunks}
    sources = params.sources
    for c in chunks:
        if "statistical" in sources:
            chosen = select_entities(c.grams, c.n_words, n_chunks, df, params.tau, params.max_entities)
            for name, er in chosen.items():
                out.kinds[name] = merge_kind(out.kinds.get(name), "ngram")
                out.mentions[(name, c.key)] = (int(c.grams[name]), float(er))
                named[c.key].add(name)
        if "ner" in sources:
            for name, count in ner_names(c.ner).items():
                out.kinds[name] = merge_kind(out.kinds.get(name), "ner")
                old, score = out.mentions.get((name, c.key), (0, 0.0))
                out.mentions[(name, c.key)] = (max(old, count), score)
                named[c.key].add(name)
    if "ner" in sources:  # the document's own names relate to what its sentences name (they are tied to it)
        for name, kind in document_names(structure.title).items():
            if linkable(name):
                out.kinds[name] = merge_kind(out.kinds.get(name), kind)
                for c in chunks:
                    named[c.key].add(name)
    heading_at: dict[str, int] = {}
    for off, text in structure.headings:
        for name, _ in structural_entities("", [(off, text)], []):
            heading_at.setdefault(name, off)
    first = chunks[0]
    for name, kind in structural_entities(structure.title, list(structure.headings), list(structure.links)):
        if kind == "link":
            continue  # supported by its link relation below, not by a mention
        out.kinds[name] = merge_kind(out.kinds.get(name), kind)
        target = _heading_chunk(chunks, heading_at[name]) if kind == "heading" and name in heading_at else first
        count, score = out.mentions.get((name, target.key), (0, 0.0))
        out.mentions[(name, target.key)] = (max(1, count, int(target.grams.get(name, 0))), score)
        named[target.key].add(name)
    for c in chunks:
        for rel in cooccurrence_relations(c.text, named[c.key], params.label_max_words):
            out.relations.append(
                RelationRow(rel.src, rel.dst, rel.label, "cooccur", c.key, c.start + rel.start, c.start + rel.end,
                            rel.sentence)
            )
    for src, dst, label in link_relations(structure.title, list(structure.links)):
        out.kinds[src] = merge_kind(out.kinds.get(src), "title")
        out.kinds[dst] = merge_kind(out.kinds.get(dst), "link")
        out.relations.append(RelationRow(src, dst, label, "link", first.key, 0, 0, ""))
    return out


def triple_text(src: str, label: str, dst: str) -> str:
    """The text embedded for a relation ("subject label object"), as ``GraphSnapshot.triple_text``."""
    return f"{src} {label} {dst}"
