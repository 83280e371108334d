"""Token-window chunking (AGRAG Eq. 1, l_t/l_o) with the real MiniLM tokenizer."""

from __future__ import annotations

from pathlib import Path

import pytest

from pathweaver.config import ConfigError
from pathweaver.ingest.chunker import chunk_text
from pathweaver.ingest.parsers import parse_file

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture(scope="module")
def tokenize():
    from pathweaver.models.embedder import get_embedder

    return get_embedder().tokenize


@pytest.fixture(scope="module")
def document() -> tuple[str, list[tuple[int, str]]]:
    path = FIXTURES / "marie_curie.md"
    doc = parse_file(path, path.read_bytes())
    parts, headings, offset = [], [], 0
    for i in range(6):  # a longer document: the note six times, headings shifted accordingly
        headings += [(offset + o, f"{h} {i}") for o, h in doc.headings]
        parts.append(doc.text)
        offset += len(doc.text) + 2
    return "\n\n".join(parts), headings


def test_spans_reconstruct_text_and_respect_token_counts(tokenize, document) -> None:
    text, headings = document
    spans = tokenize(text)
    chunks = chunk_text(text, spans, chunk_tokens=64, overlap=8, headings=headings)
    assert len(chunks) > 5
    assert [c.ord for c in chunks] == list(range(len(chunks)))
    for c in chunks:
        assert c.text == text[c.start : c.end]
        assert 1 <= c.n_tokens <= 64
        assert c.n_tokens == sum(1 for s, e in spans if c.start <= s and e <= c.end)
        expected_heading = max((h for h in headings if h[0] <= c.start), default=(0, ""))[1]
        assert c.heading == expected_heading
    # consecutive windows share exactly `overlap` tokens and together cover every token
    for a, b in zip(chunks, chunks[1:], strict=False):
        shared = sum(1 for s, e in spans if b.start <= s and e <= a.end)
        assert shared == 8
    covered = [any(c.start <= s and e <= c.end for c in chunks) for s, e in spans]
    assert all(covered)
    assert chunks[0].start == spans[0][0] and chunks[-1].end == spans[-1][1]
    assert chunk_text(text, spans, 64, 8, headings) == chunks  # deterministic


def _is_boundary(text: str, spans: list[tuple[int, int]], k: int) -> bool:
    """After token k comes a line break, or token k ends a sentence ('.', '!', '?' then whitespace)."""
    gap = text[spans[k][1] : spans[k + 1][0]]
    return "\n" in gap or (text[spans[k][1] - 1] in ".!?" and gap[:1].isspace())


def test_prefers_sentence_or_paragraph_ends(tokenize, document) -> None:
    text, _ = document
    spans = tokenize(text)
    chunks = chunk_text(text, spans, chunk_tokens=64, overlap=0)
    first = 0
    natural = 0
    for c in chunks[:-1]:
        last = first + c.n_tokens - 1
        zone = range(first + 52 - 1, first + 64)  # cuts after 52..64 tokens: ceil(0.8 * 64) = 52
        if any(_is_boundary(text, spans, k) for k in zone):
            assert last in zone and _is_boundary(text, spans, last), repr(c.text[-40:])
            natural += 1
        else:
            assert c.n_tokens == 64
        first = last + 1
    assert natural >= len(chunks) // 2  # this text has short lines and sentences: most cuts are natural
    # paragraph breaks beat later sentence ends inside the zone
    para = "one two three four five six seven eight nine.\n\nTen eleven. Twelve thirteen. Fourteen."
    cut = chunk_text(para, tokenize(para), chunk_tokens=14, overlap=0, boundary_zone=0.9)
    assert cut[0].text == "one two three four five six seven eight nine."
    # overlap 0: chunks tile the text with only whitespace between them
    for a, b in zip(chunks, chunks[1:], strict=False):
        assert text[a.end : b.start].strip() == ""


def test_hard_cut_without_boundaries(tokenize) -> None:
    text = " ".join(f"word{i}" for i in range(300))  # no sentence or line ends anywhere
    spans = tokenize(text)
    chunks = chunk_text(text, spans, chunk_tokens=100, overlap=10)
    assert all(c.n_tokens == 100 for c in chunks[:-1])


def test_defaults_are_the_paper_values_and_small_texts(tokenize) -> None:
    text = "Marie Curie was born in Warsaw."
    chunks = chunk_text(text, tokenize(text))
    assert len(chunks) == 1 and chunks[0].text == text and chunks[0].heading == ""
    assert chunk_text("   \n\n  ", tokenize("   \n\n  ")) == []
    assert chunk_text("", []) == []


@pytest.mark.parametrize(("size", "overlap"), [(0, 0), (10, 10), (10, -1), (10, 20)])
def test_bad_arguments(size: int, overlap: int) -> None:
    with pytest.raises(ConfigError):
        chunk_text("some text", [(0, 4), (5, 9)], chunk_tokens=size, overlap=overlap)


def test_bad_spans() -> None:
    with pytest.raises(ConfigError, match="token spans"):
        chunk_text("abc", [(0, 10)])
    with pytest.raises(ConfigError, match="token spans"):
        chunk_text("abc def", [(4, 7), (0, 3)])
