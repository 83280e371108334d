"""Statistical extraction (AGRAG §III-B): n-gram candidates, ER (Eq. 2-3), co-occurrence relations, structure,
synonyms (Eq. 5) on real embedder vectors."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest

from pathweaver.extract.entities import candidate_grams, er_score, select_entities, words
from pathweaver.extract.relations import DEFAULT_LABEL, cooccurrence_relations, split_sentences
from pathweaver.extract.structure import link_relations, structural_entities
from pathweaver.extract.synonyms import synonym_pairs, synonym_pairs_for
from pathweaver.text import STOPWORDS, normalize


def test_stopwords_list_is_reasonable() -> None:
    assert len(STOPWORDS) >= 150
    assert {"the", "of", "and", "is", "which"} <= STOPWORDS
    assert "curie" not in STOPWORDS


def test_normalize_and_words() -> None:
    assert normalize('  "Marie   CURIE’s"!  ') == "marie curie"
    assert normalize("(Warsaw)") == "warsaw"
    assert words("Nolan's state-of-the-art film, don't stop; 3.5 km") == [
        "nolan",
        "state-of-the-art",
        "film",
        "don't",
        "stop",
        "3",
        "5",
        "km",
    ]


def test_candidate_grams_filtering() -> None:
    grams = candidate_grams("The director of the film, Christopher Nolan, won. Bank of America (2010) grew.")
    # stopword at either end -> dropped; inner stopwords kept
    assert "the director" not in grams and "director of" not in grams and "of the film" not in grams
    assert grams["bank of america"] == 1
    # commas, parentheses and sentence ends split runs: nothing crosses them
    assert "film christopher" not in grams and "nolan won" not in grams and "won bank" not in grams
    assert "america grew" not in grams  # the "(2010)" sits between them
    assert "2010" not in grams  # numeric-only
    assert grams["christopher nolan"] == 1 and grams["director"] == 1
    assert all(len(g.split()) <= 3 for g in grams)
    assert max(len(g.split()) for g in candidate_grams("alpha beta gamma delta", ngram_max=2)) == 2


def test_candidate_grams_counts_repeats() -> None:
    grams = candidate_grams("Marie Curie studied radium. Marie Curie discovered polonium.\nRadium glows.")
    assert grams["marie curie"] == 2 and grams["radium"] == 2 and grams["curie studied radium"] == 1
    with pytest.raises(ValueError):
        candidate_grams("x", ngram_max=0)


def test_er_score_hand_worked() -> None:
    # count=2, |t|=100, |T_c|=9, df=1:
    # 2 / (100 * ln 10) * ln(10 / 2) = 0.02 * ln5/ln10 = 0.02 * 0.698970004 = 0.0139794001
    assert er_score(2, 100, 9, 1) == pytest.approx(0.0139794001, rel=1e-9)
    # a term in every chunk carries no information: ln((9+1)/(9+1)) = 0
    assert er_score(5, 10, 9, 9) == 0.0
    # one chunk, one word, unseen elsewhere: 1/(1*ln2) * ln(2/2) = 0
    assert er_score(1, 1, 1, 1) == 0.0
    for bad in [(1, 0, 5, 1), (1, 10, 0, 0), (1, 10, 5, 6), (-1, 10, 5, 1)]:
        with pytest.raises(ValueError):
            er_score(*bad)


def test_select_entities_threshold_limit_and_ties() -> None:
    grams = Counter({"curie": 3, "radium": 1, "polonium": 1, "paris": 1})
    df = {"curie": 1, "radium": 2, "polonium": 2, "paris": 4}
    # |t| = 20, |T_c| = 4, ln5 = 1.6094379:
    # curie:    3/(20 ln5) * ln(5/2) = 0.0931994 * 0.9162907 = 0.0853980
    # radium:   1/(20 ln5) * ln(5/3) = 0.0310665 * 0.5108256 = 0.0158697 (polonium identical)
    # paris:    1/(20 ln5) * ln(5/5) = 0
    got = select_entities(grams, n_words=20, n_chunks=4, df=df, tau=0.01)
    assert list(got) == ["curie", "polonium", "radium"]  # score desc, ties by name
    assert got["curie"] == pytest.approx(3 / (20 * math.log(5)) * math.log(5 / 2))
    assert got["radium"] == pytest.approx(0.0158697, rel=1e-5)
    assert list(select_entities(grams, 20, 4, df, tau=0.01, limit=2)) == ["curie", "polonium"]
    assert select_entities(grams, 20, 4, df, tau=0.09) == {}  # ER must be > tau
    # a gram missing from df counts as df=1 (only this chunk); df beyond |T_c| is clipped
    assert select_entities(Counter({"new": 1}), 20, 4, {}, 0.0) == select_entities(
        Counter({"new": 1}), 20, 4, {"new": 1}, 0.0
    )
    assert select_entities(grams, 0, 4, df, 0.0) == {}


def test_select_entities_keeps_nested_grams() -> None:
    text = "Marie Curie won. Marie Curie taught."
    grams = candidate_grams(text)
    got = select_entities(grams, len(words(text)), 10, {"marie curie": 1, "marie": 1, "curie": 1}, tau=0.0)
    assert {"marie curie", "marie", "curie"} <= set(got)


def test_split_sentences() -> None:
    text = (
        "Mr. Smith met Dr. Jones in Paris. He said e.g. this works! J. K. Rowling wrote it?\n"
        "A heading line\n\nMarie Curie was born in 1867. the end"
    )
    got = [text[s:e] for s, e in split_sentences(text)]
    assert got == [
        "Mr. Smith met Dr. Jones in Paris.",
        "He said e.g. this works!",
        "J. K. Rowling wrote it?",
        "A heading line",
        "Marie Curie was born in 1867. the end",  # a lower-case continuation does not start a sentence
    ]
    assert split_sentences("   \n\n ") == []


def test_cooccurrence_relations_labels_and_order() -> None:
    text = "Pierre Curie married Marie Curie in Paris. Marie Curie was born in Warsaw, Poland."
    rels = cooccurrence_relations(text, ["Marie Curie", "Pierre Curie", "curie", "Paris", "Warsaw", "Poland"])
    got = [(r.src, r.label, r.dst) for r in rels]
    assert got == [
        ("pierre curie", "married", "marie curie"),  # longest match wins over "curie"
        ("pierre curie", DEFAULT_LABEL, "paris"),  # another mention in between -> no label
        ("marie curie", DEFAULT_LABEL, "paris"),  # "in" is stopword-only
        ("marie curie", "was born in", "warsaw"),
        ("marie curie", DEFAULT_LABEL, "poland"),
        ("warsaw", DEFAULT_LABEL, "poland"),  # no words between
    ]
    first = rels[0]
    assert text[first.start : first.end] == first.sentence == "Pierre Curie married Marie Curie in Paris."
    assert (
        cooccurrence_relations(text, ["Marie Curie", "Pierre Curie", "curie", "Paris", "Warsaw", "Poland"])
        == rels
    )


def test_cooccurrence_relations_limits() -> None:
    text = "Alpha one two three four five Beta. Alpha Alpha."
    assert [r.label for r in cooccurrence_relations(text, ["alpha", "beta"], label_max_words=4)] == [
        DEFAULT_LABEL
    ]
    assert [r.label for r in cooccurrence_relations(text, ["alpha", "beta"], label_max_words=5)] == [
        "one two three four five"
    ]
    # multi-word names never match across punctuation; same entity twice is no relation
    assert cooccurrence_relations("New, York is big. York York.", ["new york", "york"]) == []
    many = " ".join(f"e{i}" for i in range(20)) + "."
    capped = cooccurrence_relations(many, [f"e{i}" for i in range(20)], max_pairs_per_sentence=30)
    assert len(capped) == 30
    assert all(
        int(r.dst[1:]) - int(r.src[1:]) <= 2 for r in capped
    )  # nearest pairs first: 19 + 18 adjacent-ish
    with pytest.raises(ValueError):
        cooccurrence_relations(many, ["e1"], max_pairs_per_sentence=0)


def test_structural_entities_and_links() -> None:
    ents = structural_entities(
        "Marie Curie",
        [(0, "Marie Curie"), (10, "2.1 Nobel Prizes"), (20, "1903")],
        ["Warsaw", "Pierre_Curie", ""],
    )
    assert ents == [
        ("marie curie", "title"),
        ("nobel prizes", "heading"),
        ("warsaw", "link"),
        ("pierre_curie", "link"),
    ]
    assert link_relations("Marie Curie", ["Warsaw", "marie curie", "Warsaw", "Poland"]) == [
        ("marie curie", "warsaw", "links to"),
        ("marie curie", "poland", "links to"),
    ]
    assert link_relations("2024", ["Warsaw"]) == []


@pytest.fixture(scope="module")
def name_vectors() -> tuple[list[str], np.ndarray]:
    from pathweaver.models.embedder import get_embedder

    names = ["car", "automobile", "dog", "puppy", "film", "movie", "new york city", "nyc", "photosynthesis"]
    embedder = get_embedder()
    _ = (
        embedder.model
    )  # load outside encode(): Embedder.encode holds its lock while loading lazily (deadlock)
    return names, embedder.encode(names)


def _brute(ids: np.ndarray, vecs: np.ndarray, phi: float) -> list[tuple[int, int]]:
    sims = vecs @ vecs.T
    return [
        (int(min(ids[i], ids[j])), int(max(ids[i], ids[j])))
        for i in range(len(ids))
        for j in range(i + 1, len(ids))
        if sims[i, j] > phi
    ]


def test_synonym_pairs_on_real_vectors(name_vectors: tuple[list[str], np.ndarray]) -> None:
    names, vecs = name_vectors
    ids = np.arange(100, 100 + len(names))[::-1].copy()  # ids not in vector order
    sims = vecs @ vecs.T
    car, auto, photo = names.index("car"), names.index("automobile"), names.index("photosynthesis")
    assert sims[car, auto] > sims[car, photo] + 0.3  # synonyms sit far above unrelated words
    phi = float((sims[car, auto] + sims[car, photo]) / 2)  # a threshold between the two, from the real values
    for block in (1, 2, 4, 2048):  # the tiling must not change the answer
        got = synonym_pairs(ids, vecs, phi=phi, block=block)
        assert [(a, b) for a, b, _ in got] == sorted(_brute(ids, vecs, phi))
        assert all(a < b and c > phi for a, b, c in got)
    got = {(a, b): c for a, b, c in synonym_pairs(ids, vecs, phi=phi)}
    key = (int(min(ids[car], ids[auto])), int(max(ids[car], ids[auto])))
    assert got[key] == pytest.approx(float(sims[car, auto]), abs=1e-5)
    assert all(int(ids[photo]) not in pair for pair in got)


def test_synonym_pairs_for_matches_full(name_vectors: tuple[list[str], np.ndarray]) -> None:
    _, vecs = name_vectors
    ids = np.arange(len(vecs))
    full = synonym_pairs(ids, vecs, phi=0.8)
    assert full  # car/automobile (0.86) and nyc (0.92) on this model
    old, new = ids[:5], ids[5:]
    incremental = synonym_pairs(old, vecs[:5], phi=0.8) + synonym_pairs_for(
        new, vecs[5:], ids, vecs, phi=0.8, block=2
    )
    pairs = [(a, b) for a, b, _ in full]
    assert sorted((a, b) for a, b, _ in incremental) == pairs
    assert sorted(c for *_, c in incremental) == pytest.approx(sorted(c for *_, c in full), abs=1e-5)
    # new ids need not be in all_ids
    got = synonym_pairs_for(new, vecs[5:], old, vecs[:5], phi=0.8)
    assert [(a, b) for a, b, _ in got] == [p for p in pairs if p[1] >= 5]
    with pytest.raises(ValueError):
        synonym_pairs(np.array([1, 1]), vecs[:2])
    with pytest.raises(ValueError):
        synonym_pairs(ids, vecs, phi=1.0)


def test_synonym_pairs_blockwise_on_many_vectors() -> None:
    rng = np.random.default_rng(7)
    base = rng.normal(size=(3000, 64)).astype(np.float32)
    base[1500:1510] = base[:10] + 0.05 * rng.normal(size=(10, 64)).astype(
        np.float32
    )  # planted near-duplicates
    base /= np.linalg.norm(base, axis=1, keepdims=True)
    ids = np.arange(3000)
    got = synonym_pairs(ids, base, phi=0.95, block=512)
    assert [(a, b) for a, b, _ in got] == [(i, 1500 + i) for i in range(10)]


def test_composed_triple_vectors_track_encoded_ones() -> None:
    """``extract.triple_vectors = composed``: the sum of the parts' vectors ranks triples like their encoded text."""
    from pathweaver.extract.graph import ExtractParams, triple_text
    from pathweaver.models.embedder import get_embedder
    from pathweaver.numeric.vectors import compose_triple_vector, compose_triples

    emb = get_embedder()
    triples = [("marie curie", "discovered", "polonium"), ("pierre curie", "married", "marie curie"),
               ("warsaw", "capital of", "poland"), ("vistula", "flows through", "warsaw"),
               ("scrooge", "related to", "marley")]
    parts = sorted({x for t in triples for x in t})
    vec = dict(zip(parts, emb.encode(parts), strict=True))
    composed = np.stack([compose_triple_vector(vec[s], vec[lab], vec[d]) for s, lab, d in triples])
    assert compose_triples(triples, vec).tobytes() == composed.tobytes()  # the batched form: the same bits
    encoded = emb.encode([triple_text(*t) for t in triples])
    assert np.allclose(np.linalg.norm(composed, axis=1), 1.0, atol=1e-5)
    assert (composed * encoded).sum(1).min() > 0.75  # each composed vector is close to its own text's vector
    queries = emb.encode(["who discovered polonium", "which river flows through warsaw", "capital of poland"])
    assert ((queries @ composed.T).argmax(1) == (queries @ encoded.T).argmax(1)).all()
    with pytest.raises(Exception, match="triple_vectors"):
        ExtractParams(triple_vectors="magic").validate()


def test_composed_phrase_vectors_are_order_stable_and_track_encoded_names() -> None:
    """``extract.entity_vectors = composed``: a name's vector is the normalised sum of its words' model vectors,
    bit-identical whatever else is composed in the same call, and it ranks names like their encoded text."""
    from pathweaver.extract.graph import ExtractParams
    from pathweaver.models.embedder import get_embedder
    from pathweaver.numeric.vectors import compose_phrases

    emb = get_embedder()
    names = ["marie curie", "nobel prize in physics", "vistula river", "university of paris", "radium", "warsaw"]
    words = sorted({w for n in names for w in n.split()})
    word_vecs = dict(zip(words, emb.encode(words), strict=True))
    alone = compose_phrases(names, word_vecs)
    mixed = compose_phrases(["paris university of paris", *reversed(names), "curie marie"], word_vecs)
    for n in names:
        assert alone[n].tobytes() == mixed[n].tobytes()  # same bits: incremental and refresh agree on synonyms
    want = word_vecs["marie"] + word_vecs["curie"]
    assert np.allclose(alone["marie curie"], want / np.linalg.norm(want), atol=1e-6)
    assert np.array_equal(alone["radium"], word_vecs["radium"])  # one word: its own model vector
    assert not compose_phrases(["", "radium"], word_vecs)[""].any()
    composed = np.stack([alone[n] for n in names])
    encoded = emb.encode(names)
    assert (composed * encoded).sum(1).min() > 0.6  # 2wiki dev names: mean 0.79 (docs/design-notes.md)
    queries = emb.encode(["who was marie curie", "the nobel prize for physics", "river through warsaw poland",
                          "a university in paris"])
    assert ((queries @ composed.T).argmax(1) == (queries @ encoded.T).argmax(1)).all()
    with pytest.raises(KeyError, match="no vector"):
        compose_phrases(["unknown word"], word_vecs)
    with pytest.raises(Exception, match="entity_vectors"):
        ExtractParams(entity_vectors="magic").validate()


def _reference_grams(text: str, ngram_max: int) -> Counter:
    """The candidate-gram rules written out plainly (module docstring of extract/entities.py)."""
    from pathweaver.extract.entities import word_spans
    from pathweaver.text import STOPWORDS

    runs: list[list[str]] = []
    for ws in word_spans(text):
        if ws.joined and runs:
            runs[-1].append(ws.word)
        else:
            runs.append([ws.word])
    out: Counter = Counter()
    for run in runs:
        for n in range(1, ngram_max + 1):
            for i in range(len(run) - n + 1):
                gram = run[i : i + n]
                if gram[0] in STOPWORDS or gram[-1] in STOPWORDS or all(w.isdigit() for w in gram):
                    continue
                if n == 1 and len(gram[0]) < 2:
                    continue
                out[" ".join(gram)] += 1
    return out


@pytest.mark.parametrize("text", [
    "The Bank of America opened in 1904, in San Francisco. It was the first bank of its kind!",
    "Marie Curie's 2 Nobel prizes: 1903 and 1911; x y z. Born 7 November 1867 in Warsaw.",
    "of the and a", "", "1999 2000 2001", "a b c d e f", "state-of-the-art don't O'Neill’s ideas\nnew line here",
])
def test_candidate_grams_follow_the_rules_from_one_pass_over_the_words(text: str) -> None:
    from pathweaver.extract.entities import candidate_grams, words
    from pathweaver.extract.graph import chunk_stats

    for n in (1, 2, 3, 4):
        assert candidate_grams(text, n) == _reference_grams(text, n)
    grams, n_words = chunk_stats(text, 3)
    assert grams == dict(_reference_grams(text, 3)) and n_words == len(words(text))


def test_entity_name_keys_take_the_short_path_only_for_canonical_names() -> None:
    from pathweaver.extract.entities import word_spans
    from pathweaver.extract.relations import _name_key
    from pathweaver.text import normalize

    names = ["marie curie", "bank of america", "don't stop", "state-of-the-art design", "1867", "l'été",
             "Marie Curie", "o'neill's bar", "c++ primer", "a/b testing", "  spaced   out ", "l’été", "x-ray's",
             "trailing-", "émile zola", "naïve bayes", "straße"]
    for name in names:
        norm = normalize(name)
        assert _name_key(name) == (norm, tuple(w.word for w in word_spans(norm))), name


def test_entity_selection_scores_are_er_bit_for_bit() -> None:
    """``select_entities`` inlines AGRAG Eq. 2; its scores are ``er_score``'s, to the last bit."""
    from pathweaver.extract.entities import er_score, select_entities

    rng = np.random.default_rng(4)
    grams = {f"g{i}": int(c) for i, c in enumerate(rng.integers(1, 9, 300))}
    df = {g: int(d) for g, d in zip(grams, rng.integers(0, 900, 300), strict=True)}
    df.pop("g7")  # a gram the statistics have not seen yet counts as df = 1
    chosen = select_entities(grams, 120, 800, df, tau=0.0, limit=1000)
    for gram, score in chosen.items():
        d = min(max(1, df.get(gram, 1)), 800)
        assert score == er_score(grams[gram], 120, 800, d)
    assert list(chosen) == sorted(chosen, key=lambda g: (-chosen[g], g))


def test_vector_tables_compose_in_blocks_with_the_same_bits(monkeypatch: pytest.MonkeyPatch) -> None:
    from pathweaver.numeric import vectors
    from pathweaver.numeric.vectors import LayeredVectors, VectorTable, compose_phrases, compose_triples

    rng = np.random.default_rng(9)
    words = [f"w{i}" for i in range(50)]
    wv = dict(zip(words, vectors.normalise_rows(rng.standard_normal((50, 8))), strict=True))
    phrases = [" ".join(rng.choice(words, int(k))) for k in rng.integers(1, 4, 400)]
    triples = [(phrases[i], phrases[i + 1], phrases[i + 2]) for i in range(0, 390, 3)]
    whole = compose_phrases(phrases, wv)
    whole_t = compose_triples(triples, whole)
    monkeypatch.setattr(vectors, "BLOCK_ROWS", 7)  # many blocks, a short last one
    blocked = compose_phrases(phrases, wv)
    assert blocked.matrix.tobytes() == whole.matrix.tobytes() and blocked.index == whole.index
    assert compose_triples(triples, blocked).tobytes() == whole_t.tobytes()
    table = VectorTable.of(wv)
    assert VectorTable.of(table) is table and len(table) == 50 and "w3" in table and "nope" not in table
    assert np.array_equal(table.rows(["w2", "w0"]), np.stack([wv["w2"], wv["w0"]]))
    other = VectorTable({"w0": 0, "extra": 1}, np.ones((2, 8), np.float32))
    layered = LayeredVectors(table, other)
    assert np.array_equal(layered["w0"], wv["w0"]) and np.array_equal(layered["extra"], np.ones(8))  # first wins
    assert len(layered) == 51 and list(layered)[-1] == "extra"
    assert np.array_equal(layered.rows(["extra", "w1"]), np.stack([np.ones(8), wv["w1"]]))
    with pytest.raises(KeyError):
        layered["missing"]
