"""Passages and their sentences, ranked by similarity to the question and idf-weighted word overlap."""

from __future__ import annotations

import functools
import itertools
import math
import re

import numpy as np

from pathweaver.extract.names import without_disambiguator
from pathweaver.extractive.questions import _WH, _WORD_RE
from pathweaver.extractive.types import ChunksLike, ExtractiveParams, Passage, Sentence, WordDfFn
from pathweaver.retrieval.context import Context, sentences
from pathweaver.retrieval.types import EncodeFn
from pathweaver.text import STOPWORDS


def passages_of(chunks: ChunksLike, max_chunks: int) -> list[Passage]:
    """Chunk texts with their citation numbers from a ``Context`` (its chunk items), or from a sequence of
    strings (cited 1, 2, ...), ``(text, n)``/``(text, n, title)`` tuples or objects with ``text`` and ``n``: the
    chunks of the first ``max_chunks`` notes. A note's first chunk (its best) ranks by the note's place; the others
    retrieved with it (items of the same ``doc``) rank after every note's best, in their order."""
    items = [i for i in chunks.items if i.kind == "chunk"] if isinstance(chunks, Context) else list(chunks)
    notes = [getattr(item, "doc", "") or at for at, item in enumerate(items)]
    place = {note: i for i, note in enumerate(dict.fromkeys(notes)) if i < max_chunks}
    later = itertools.count(len(place))
    seen: set[object] = set()
    out: list[Passage] = []
    for at, (item, note) in enumerate(zip(items, notes, strict=True)):
        if note not in place:
            continue
        rank = next(later) if note in seen else place[note]
        seen.add(note)
        if isinstance(item, str):
            out.append(Passage(item, at + 1, "", rank))
        elif isinstance(item, tuple):
            out.append(Passage(str(item[0]), int(item[1]), str(item[2]) if len(item) > 2 else "", rank))
        else:
            out.append(Passage(str(item.text), int(getattr(item, "n", at + 1)), str(getattr(item, "title", "")),
                               rank, tuple(getattr(item, "names", ()))))
    return out


_LIST_MARK = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+(?:\[[ xX]\]\s+)?")
_HEADING = re.compile(r"^\s*#{1,6}\s+")
_TABLE_RULE = re.compile(r"^\s*\|?\s*:?-{2,}:?\s*(?:\|\s*:?-{2,}:?\s*)*\|?\s*$")
_CELL_SPLIT = re.compile(r"(?<!\\)\|")
EMBED_CHARS = 300  # a sentence is embedded by its first characters: a batch costs as much as its longest text
_WRAP = 60  # a prose line at least this long that ends mid-sentence was wrapped: it goes on on the next line


def _cells(line: str) -> list[str]:
    """The cells of a table row, written "| a | b |" or (as the Markdown parser leaves it) "a | b"; an escaped
    pipe stays inside its cell."""
    body = line.strip()
    body = body[1:] if body.startswith("|") else body
    body = body[:-1] if body.endswith("|") and not body.endswith("\\|") else body
    return [" ".join(c.replace("\\|", "|").split()) for c in _CELL_SPLIT.split(body)]


def _is_row(line: str) -> bool:
    return bool(_CELL_SPLIT.search(line)) and len(_cells(line)) >= 2


def _row_text(cells: list[str], header: list[str]) -> str:
    """A table row as a sentence: "Header: cell; Header: cell" (the bare cells without a header)."""
    if header and len(header) == len(cells):
        return "; ".join(f"{h}: {c}" if h else c for h, c in zip(header, cells, strict=True) if c)
    return "; ".join(c for c in cells if c)


def _blocks(text: str) -> list[tuple[str, list[str]]]:
    """``text`` as ("table", rows) blocks of consecutive table rows and ("lines", lines) of everything else."""
    out: list[tuple[str, list[str]]] = []
    for line in text.splitlines():
        if _TABLE_RULE.match(line) and line.strip():
            continue
        kind = "table" if _is_row(line) else "lines"
        if out and out[-1][0] == kind and line.strip():
            out[-1][1].append(line)
        elif line.strip():
            out.append((kind, [line]))
        else:
            out.append(("lines", []))  # a blank line ends a paragraph
    return [b for b in out if b[1]]


def _prose(lines: list[str]) -> list[str]:
    """The lines of a paragraph joined where a long line was wrapped mid-sentence; a short line (a title, a list
    item) stays one unit."""
    out: list[str] = []
    for raw in lines:
        line = _HEADING.sub("", _LIST_MARK.sub("", raw)).strip()
        prev = out[-1] if out else ""
        wrapped = prev and not _LIST_MARK.match(raw) and not prev.endswith((".", "!", "?", ":", '"', "”")) and (
            len(prev) >= _WRAP or (len(prev) >= 40 and line[:1].islower()))
        if wrapped:
            out[-1] = f"{prev} {line}"
        else:
            out.append(line)
    return out


def _titled(first: str, prose: list[str]) -> bool:
    """Whether a paragraph's first line is a title over the text that follows: a short line (at most eight words)
    without closing punctuation that is no list item, followed by a line that is a sentence."""
    line = prose[0]
    return (not _LIST_MARK.match(first) and len(line.split()) <= 8
            and not line.endswith((".", "!", "?", ":", ";", ",", '"', "”", ")"))
            and prose[1].endswith((".", "!", "?")) and len(prose[1].split()) > 8)


def units(text: str) -> list[tuple[str, bool]]:
    """``_units``: a chunk's units are read to rank its sentences, then again to complete the chosen ones (the
    sentence after, before, a section): split once per chunk text."""
    return list(_units(text))


@functools.lru_cache(maxsize=256)
def _units(text: str) -> tuple[tuple[str, bool], ...]:
    """The answer units of ``text`` with whether each is a heading: a list item or a short line (a title) is a
    unit of its own, a wrapped paragraph is read across its line breaks and split into sentences, and a table
    row is one unit written with its column headers (the block's first row). A heading is a paragraph of one line
    without closing punctuation."""
    out: list[tuple[str, bool]] = []
    for kind, lines in _blocks(text):
        if kind == "table":
            rows = [_cells(r) for r in lines]
            if len(rows) > 1 and lines[0].lstrip().startswith("|") and len(rows[1]) == len(rows[0]) + 1:
                rows[0] = ["", *rows[0]]  # "|  | a | b |" read as "| a | b": the empty corner over row labels
            header = rows[0] if len(rows) > 1 else []
            out += [(t, False) for t in (_row_text(r, header) for r in rows[1 if header else 0:]) if len(t) > 3]
            continue
        prose = _prose(lines)
        heading = len(prose) == 1 and not prose[0].endswith((".", "!", "?", ":", ";", '"', "”", ")"))
        if len(prose) > 1 and _titled(lines[0], prose):  # a title line over its text: "Jacob Marley\nJacob ..."
            out.append((prose[0], True))
            prose = prose[1:]
        for line in prose:
            pending = ""
            for a, b in sentences(line):
                s = " ".join(f"{pending} {line[a:b]}".split())
                if s.count("(") > s.count(")"):  # "(d. 20 March 851)": a stop inside brackets ends no sentence
                    pending = s
                    continue
                pending = ""
                if len(s) > 3:
                    out.append((s, heading))
            if len(pending) > 3:
                out.append((pending, heading))
    return tuple(out)


def split_sentences(text: str) -> list[str]:
    """The answer units of ``text`` (``units``) without their heading flags."""
    return [t for t, _ in units(text)]


_POSSESSIVE = re.compile(r"['’]s$")


def _tokens(text: str) -> list[str]:
    """Lower-case words, a possessive's "'s" dropped ("Scrooge's" -> "scrooge")."""
    return [_POSSESSIVE.sub("", w.lower()) for w in _WORD_RE.findall(text)]


def capitalised(text: str) -> set[str]:
    """The words of ``text`` written with a capital, after its first word (``_tokens`` form)."""
    words = _WORD_RE.findall(text)
    return {_POSSESSIVE.sub("", w.lower()) for w in words[1:] if w[0].isupper()}


def content_words(text: str) -> set[str]:
    return {w for w in _tokens(text) if w not in STOPWORDS and w not in _WH and len(w) > 1}


_SUFFIXES = ("ations", "ation", "ings", "ing", "ies", "ied", "es", "ed", "ly", "s")


def stem(word: str) -> str:
    """A crude stem: one inflection off, then the first six letters ("syncs", "synced" and "sync" meet;
    "configure" and "configuration"; "approved" and "approval")."""
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)]
            break
    if word.endswith("e") and len(word) >= 5:  # "cease" and "ceased", "trade" and "trading"
        word = word[:-1]
    return word[:6]


def stems(words: set[str]) -> set[str]:
    return {stem(w) for w in words}


def coverage(question: str, texts: list[str], word_df: WordDfFn | None = None, n_docs: int = 0) -> float:
    """The share of the question's content-word idf weight whose stems ``texts`` hold (1.0 for a question without
    content words)."""
    asked = content_words(question)
    if not asked:
        return 1.0
    weight = _weights(asked, word_df, n_docs)
    have = stems(set().union(*(content_words(t) for t in texts))) if texts else set()
    total = sum(weight.values()) or 1.0
    return sum(w for word, w in weight.items() if stem(word) in have) / total


def _weights(words: set[str], word_df: WordDfFn | None, n_docs: int) -> dict[str, float]:
    if word_df is None or n_docs <= 0:
        return dict.fromkeys(words, 1.0)
    df = word_df(sorted(words))
    return {w: math.log(1.0 + (n_docs - min(df.get(w, 0), n_docs) + 0.5) / (df.get(w, 0) + 0.5)) for w in words}


def _title_named(passage: Passage, asked: set[str]) -> bool:
    """The question names the passage's title or another name of its note (or, without a title, its short first
    line)."""
    for title in (passage.title, passage.text.split("\n", 1)[0], *passage.names):
        words = [w for w in _tokens(title) if w not in STOPWORDS and not w.isdigit()]
        if 0 < len(words) <= 12 and all(w in asked for w in words):
            return True
    return False


_SUBJECT_PRONOUN = re.compile(r"^(?P<p>He|She)\s+(?=[a-z])")
_NAME_TITLE = re.compile(r"^[A-Z][\w'’.\-]*(?:\s+(?:(?:of|de|van|von|da|di|del|der|le|la)\s+)?[A-Z][\w'’.\-]*){0,3}$")


def resolve_subject(text: str, passage: Passage) -> str:
    """A sentence whose subject is a leading "He" or "She" with that pronoun replaced by the note's title, when
    the note is about one named entity: the title is a name (capitalised words, no digits) that the note writes
    before the sentence. "It" stays: an "it" of its own ("It is easy to ...") is common, and a thing's name made
    the subject reads as a span of the sentence."""
    m = _SUBJECT_PRONOUN.match(text)
    named = passage.title or passage.text.split("\n", 1)[0]  # an untitled passage's first line is its title
    title = without_disambiguator(named) or named.strip()
    if not m or not _NAME_TITLE.match(title) or any(ch.isdigit() for ch in title):
        return text
    at = passage.text.find(text[:40])
    if title not in passage.text[: at if at >= 0 else len(passage.text)]:
        return text
    return f"{title} {text[m.end():]}"


def rank_sentences(
    question: str,
    passages: list[Passage],
    encode: EncodeFn | None,
    params: ExtractiveParams,
    word_df: WordDfFn | None = None,
    n_docs: int = 0,
) -> list[Sentence]:
    """Every sentence of ``passages``, best first: embed_weight * cosine + overlap_weight * the share of the
    question's idf weight it holds - rank_decay * chunk rank + title_bonus when the question names the chunk's
    title."""
    cands = []
    for p in passages:
        found = units(p.text)
        cands += [(resolve_subject(s, p), p, i, h) for i, (s, h) in enumerate(found)]
    if not cands:
        return []
    asked = content_words(question)
    weight = _weights(asked, word_df, n_docs)
    total = sum(weight.values()) or 1.0
    asked_stems = {w: stem(w) for w in asked}
    overlap = np.array([sum(weight[w] for w in asked if asked_stems[w] in stems(content_words(s))) / total
                        for s, _, _, _ in cands])
    if encode is not None and params.embed_weight and len(cands) > params.embed_max:
        # embedding is what an answer costs: only the sentences best by words and chunk rank are embedded
        pre = params.overlap_weight * overlap - params.rank_decay * np.array([c[1].rank for c in cands])
        keep = np.sort(np.argsort(-pre, kind="stable")[: params.embed_max])
        cands = [cands[i] for i in keep]
        overlap = overlap[keep]
    sims = np.zeros(len(cands))
    if encode is not None and params.embed_weight:
        vecs = np.asarray(encode([c[0][:EMBED_CHARS] for c in cands]))
        qv = np.asarray(encode([question]))[0]
        sims = vecs @ qv
    score = params.embed_weight * sims + params.overlap_weight * overlap
    score -= params.rank_decay * np.array([c[1].rank for c in cands])
    asked_all = set(_tokens(question))
    named = {p.n: _title_named(p, asked_all) for p in passages}
    score += params.title_bonus * np.array([named[c[1].n] for c in cands])
    order = np.argsort(-score, kind="stable")
    return [Sentence(cands[i][0], cands[i][1], float(score[i]), float(sims[i]), cands[i][2], cands[i][3])
            for i in order]
