"""The embedder: its single-text cache, and packed batches that equal the model's own encode."""

from __future__ import annotations

import numpy as np
import pytest

from pathweaver.models import embedder as embedder_mod
from pathweaver.models import packing, tokens
from pathweaver.models.embedder import get_embedder

pytestmark = pytest.mark.shipped_passes  # the passes' shapes and bits as shipped (tests/short_passes.py)


def test_single_text_cache_matches_batches_and_is_bounded(monkeypatch) -> None:
    emb = get_embedder()
    emb.clear_cache()
    batch = emb.encode(["who discovered polonium", "where is warsaw"])
    one = emb.encode_one("who discovered polonium")
    assert np.allclose(one, batch[0], atol=1e-5) and not one.flags.writeable
    assert emb.encode_one("who discovered polonium") is one  # a repeated question is not embedded again
    copy = emb.encode(["who discovered polonium"])
    assert copy.shape == (1, batch.shape[1]) and copy.flags.writeable
    copy[0, 0] = 42.0  # callers may modify what encode() returns without touching the cache
    assert emb.encode_one("who discovered polonium")[0] != 42.0
    monkeypatch.setattr(embedder_mod, "ONE_CACHE", 2)
    for text in ("a", "b", "c"):
        emb.encode_one(text)
    assert list(emb._one_cache) == ["b", "c"]
    emb.clear_cache()
    assert not emb._one_cache


def test_remember_embeds_unseen_texts_in_one_batch(monkeypatch) -> None:
    emb = get_embedder()
    emb.clear_cache()
    alone = emb.encode_one("where was marie curie born")
    calls: list[list[str]] = []
    real = emb._encode
    monkeypatch.setattr(emb, "_encode", lambda texts, batch_size=None: calls.append(list(texts)) or real(texts))
    emb.remember(["where was marie curie born", "who discovered radium", "who discovered radium", "what is polonium"])
    assert calls == [["who discovered radium", "what is polonium"]]  # one batch of the unseen, each once
    assert emb.encode_one("where was marie curie born") is alone
    radium = emb.encode_one("who discovered radium")
    assert calls == [["who discovered radium", "what is polonium"]] and not radium.flags.writeable
    emb.clear_cache()
    assert np.allclose(radium, emb.encode_one("who discovered radium"), atol=1e-4)  # as if embedded alone
    emb.remember([])
    emb.clear_cache()


def test_packed_batches_equal_the_models_own_encode() -> None:
    """Many texts per row (block-diagonal attention, own position ids) give each text's separate vector: single
    words, names, sentences, a text cut at the model's token limit, and an empty string."""
    emb = get_embedder()
    assert emb.packed  # all-MiniLM-L6-v2 is BERT + mean pooling + normalisation, and the probe agrees
    long_text = " ".join(f"word{i} of a long passage" for i in range(200))  # > 256 tokens: truncated alike
    texts = ["paris", "marie curie", "1987", "born 21 october", "Who directed the film Seven Samurai?",
             long_text, "", "the Seine flows through Paris and Rouen into the English Channel"] + \
        [f"entity {i}" for i in range(150)]
    packed = emb.encode(texts)
    plain = emb._plain(texts, 16)
    assert packed.shape == plain.shape and packed.dtype == np.float32
    assert np.abs(packed - plain).max() < 1e-5
    assert np.allclose(np.linalg.norm(packed, axis=1), 1.0, atol=1e-5)
    # a text's vector does not depend on the texts packed beside it
    assert np.abs(emb.encode(["paris", "a different neighbour text"])[0] - packed[0]).max() < 1e-5


def test_a_first_bfloat16_fixed_pass_keeps_packing() -> None:
    """The packing probe answers as it does outside bfloat16 autocast when an embedder's first call is a fixed-shape
    bfloat16 pass (the first index's invariance probe): under autocast its tolerance failed on an AMX Xeon, which
    turned packing off for that process and made its chunk vectors differ from another process's."""
    plain = get_embedder()
    first = embedder_mod.Embedder()
    first._model = plain.model
    first.encode(["a text", "another text"], precision="bfloat16", invariant=True)
    assert first.packed == plain.packed


def test_a_few_texts_go_as_one_padded_batch(monkeypatch) -> None:
    """Fewer padded tokens than packed rows: plain padded batches (no 4-d mask), the same vectors; many short
    texts still pack."""
    emb = get_embedder()
    assert emb.packed
    used: list[str] = []
    for name in ("_padded", "_packed"):
        real = getattr(packing, name)
        monkeypatch.setattr(packing, name, lambda *a, _n=name, _r=real: used.append(_n) or _r(*a))
    few = ["Who is the spouse of the Green performer?", "Green performer",
           "Changed It is a song by Nicki Minaj and Lil Wayne, released in 2017."]
    padded = packing.encode_packed(emb.model, few)
    assert used == ["_padded"]
    assert np.abs(padded - emb._plain(few, 16)).max() < 1e-5
    assert np.abs(padded - packing.encode_packed(emb.model, few, pad_when_cheaper=False)).max() < 1e-5
    assert used == ["_padded", "_packed"]
    words = [f"entity {i}" for i in range(100)] + ["a much longer text that would pad every short one to its size"]
    packing.encode_packed(emb.model, words)
    assert used[-1] == "_packed"


def test_rows_hold_every_text_once_within_the_row_length() -> None:
    lengths = np.array([3, 64, 5, 40, 4, 4, 60, 2, 33, 17, 9])
    rows = packing.rows_for(lengths, 64)
    members = sorted(m for row in rows for m in row)
    assert members == list(range(len(lengths)))
    assert all(lengths[row].sum() <= 64 for row in rows)
    assert len(rows) < len(lengths)  # short texts share rows
    assert packing.row_length(3, 256) == packing.MIN_ROW == 32 and packing.row_length(33, 256) == 64
    assert packing.row_length(100, 256) == 128
    assert packing.row_length(300, 256) == 256


def test_a_model_that_cannot_be_packed_uses_its_own_encode() -> None:
    plain = embedder_mod.Embedder(packed=False)
    assert not plain.packed
    assert not packing.packable(object())
    texts = ["marie curie", "polonium and radium"]
    assert np.abs(plain.encode(texts) - get_embedder().encode(texts)).max() < 1e-5


def test_a_probe_that_fails_falls_back_to_the_models_encode(monkeypatch) -> None:
    """A transformers release that rejects the packed inputs must not break embedding: the probe says no."""
    def broken(model, texts):
        raise TypeError("unexpected keyword argument 'position_ids'")

    monkeypatch.setattr(embedder_mod, "encode_packed", broken)
    emb = embedder_mod.Embedder()
    emb._model = get_embedder().model  # share the loaded model
    assert not emb.packed
    assert emb.encode(["marie curie", "polonium"]).shape == (2, 384)


INVARIANCE_WORDS = ["warsaw", "polonium", "radioactivity", "1867", "curie", "vistula", "sorbonne", "nobel"]
LONG_TEXT = " ".join(["a longer text that needs a wider packed row than any single word"] * 4)  # > 32 tokens


@pytest.mark.parametrize("precision", ["float32", "bfloat16"])
def test_graph_vectors_do_not_depend_on_their_batch(precision: str) -> None:
    """``encode(..., invariant=True)`` (the words, names and triples behind graph vectors): a text's vector is the
    same bits alone, among others, in any order and beside texts of other widths, at either precision, on whatever
    kernels this CPU picks (``tests/test_isa_matrix.py`` runs this under each ``ONEDNN_MAX_CPU_ISA``). bfloat16
    stays within 1e-3 of float32 in cos, and the query path (packed or padded to its call) within float rounding."""
    from pathweaver.models.precision import native_bf16

    if precision == "bfloat16" and not native_bf16():
        pytest.skip("bfloat16 is emulated here: slow, and extract.graph_vector_precision = auto never picks it")
    emb = get_embedder()
    words = INVARIANCE_WORDS
    together = emb.encode(words, precision=precision, invariant=True)
    assert together.dtype == np.float32 and np.allclose(np.linalg.norm(together, axis=1), 1.0, atol=1e-5)
    alone = np.stack([emb.encode([w], precision=precision, invariant=True)[0] for w in words])
    mixed = emb.encode([LONG_TEXT, *reversed(words), "nobel prize in physics"], precision=precision,
                       invariant=True)[1:-1][::-1]
    assert together.tobytes() == alone.tobytes() == mixed.tobytes()
    assert emb.batch_invariant(precision)
    full = emb.encode(words, invariant=True)
    assert (together * full).sum(1).min() > (0.999 if precision == "bfloat16" else 1 - 1e-6)
    query = np.stack([emb.encode([w])[0] for w in words])  # padded batches of one: rounding apart at most
    assert np.abs(query - full).max() < 1e-5


def places(emb: embedder_mod.Embedder, texts: list[str]) -> list[tuple[int, int, int]]:
    """Each text's (row width, row, offset in the row) in one ``fixed_packed`` call of ``texts``."""
    limit = int(emb.model.max_seq_length)
    lengths = np.array([len(ids) for ids in tokens.token_ids(emb.model.tokenizer, texts, limit)])
    widths = np.array([max(packing.MIN_ROW, packing.fixed_width(int(n), limit)) for n in lengths])
    found: list[tuple[int, int, int]] = [(0, 0, 0)] * len(texts)
    for width in np.unique(widths).tolist():
        members = np.flatnonzero(widths == width)
        rows = ([[int(members[i]) for i in row] for row in packing.rows_for(lengths[members], width)]
                if width == packing.MIN_ROW else [[int(m)] for m in members])
        for r, row in enumerate(rows):
            at = 0
            for m in row:
                found[m] = (width, r, at)
                at += int(lengths[m])
    return found


def test_the_invariance_probe_tests_each_row_width_in_five_passes() -> None:
    """``batch_invariant``'s probe is not vacuous: at least two texts share each row width (32, 64 and a chunk's
    256), each text's second copy in the call sits at another row or offset than its first, a text checked alone
    sits elsewhere in that call (after a longer text in its row, or in a later row of its pass); and it costs five
    fixed-shape passes (one per width for both copies, two alone)."""
    emb = embedder_mod.Embedder()
    emb._model = get_embedder().model  # share the loaded model, probe afresh
    assert emb.packed
    probe = embedder_mod.INVARIANCE_PROBE
    both = places(emb, probe + probe[::-1])
    n = len(probe)
    widths = [w for w, _, _ in both[:n]]
    assert widths.count(32) >= 2 and widths.count(64) >= 2 and widths.count(256) >= 2
    assert set(widths) == {32, 64, 256}
    assert all(both[i] != both[2 * n - 1 - i] for i in range(n))
    word, long_text = embedder_mod.INVARIANCE_APART
    assert both[word][2] > 0 and both[2 * n - 1 - word][2] > 0
    assert both[long_text][1] > 0 and both[2 * n - 1 - long_text][1] > 0
    passes: list[tuple[int, ...]] = []
    hook = emb.model[0].auto_model.register_forward_hook(lambda m, args, kwargs, out: passes.append(
        tuple(kwargs["input_ids"].shape)), with_kwargs=True)
    try:
        assert emb.batch_invariant("float32")
    finally:
        hook.remove()
    assert sorted(passes) == sorted([(128, 32)] * 2 + [(64, 64)] + [(16, 256)] * 2)


def test_the_invariance_probe_sees_a_vector_that_depends_on_its_company(monkeypatch) -> None:
    """A pass whose vectors move with their company, or with their order, fails the probe."""
    real, passes = embedder_mod.fixed_packed, {}

    def vectors(model, texts):  # type: ignore[no-untyped-def]
        """The real pass; the second probe's passes are the first's (the same texts in the same calls)."""
        key = tuple(texts)
        if key not in passes:
            passes[key] = real(model, texts)
        return passes[key].copy()

    for drift in (lambda texts: 1e-6 * len(texts), lambda texts: 1e-6 * np.arange(len(texts))[:, None]):
        emb = embedder_mod.Embedder()
        emb._model = get_embedder().model
        monkeypatch.setattr(embedder_mod, "fixed_packed",
                            lambda model, texts, d=drift: vectors(model, texts) + d(texts))
        assert not emb.batch_invariant("float32")


def test_fixed_padded_passes_are_the_models_vectors() -> None:
    """``packing.fixed_padded`` goes through the model's own modules (any sentence-transformers model): the same
    bits alone and in company, and the model's own ``encode`` to rounding."""
    model = get_embedder().model
    words = INVARIANCE_WORDS
    together = packing.fixed_padded(model, [*words, LONG_TEXT])
    alone = np.stack([packing.fixed_padded(model, [w])[0] for w in words])
    assert together[:-1].tobytes() == alone.tobytes()
    plain = model.encode([*words, LONG_TEXT], normalize_embeddings=True, convert_to_numpy=True)
    assert np.abs(together - plain).max() < 1e-5


def test_precision_names_and_auto() -> None:
    """Precision names are checked; "auto" is bfloat16 only where the CPU has it natively and the embedder's
    bfloat16 vectors are batch-invariant, else float32."""
    from pathweaver.models.precision import native_bf16, resolve_precision

    emb = get_embedder()
    with pytest.raises(ValueError, match="precision"):
        emb.encode(INVARIANCE_WORDS, precision="float16")
    assert resolve_precision("float32", emb.batch_invariant) == "float32"
    want = "bfloat16" if native_bf16() and emb.batch_invariant("bfloat16") else "float32"
    assert resolve_precision("auto", emb.batch_invariant) == want
    assert resolve_precision("auto", lambda precision: False) == "float32"
    with pytest.raises(Exception, match="graph_vector_precision"):
        resolve_precision("half", emb.batch_invariant)


def test_backend_tokens_equal_the_wrappers() -> None:
    """Ids (with truncation at the model's limit), offsets and counts from the Rust backend copies are the
    wrapper's, on texts with accents, CJK, control characters, emoji, punctuation, an empty text and one far
    past the limit; and the wrapper's own settings do not leak into the copies."""
    emb = get_embedder()
    tok, limit = emb.model.tokenizer, emb.max_tokens
    texts = ["", "Paris", "Café déjà-vu, naïve O'Brien's", "北京大学 is in 海淀区", "tab\there\x00ctrl\u200b",
             "emoji 🙂 and x-ray (1999)!", "word " * 700, "supercalifragilisticexpialidocious"]
    want = tok(texts, add_special_tokens=True, truncation=True, max_length=limit, verbose=False)["input_ids"]
    assert tokens.token_ids(tok, texts, limit) == want
    assert len(want[6]) == limit  # the long text really is truncated
    tok(texts, padding="max_length", truncation=True, max_length=16, verbose=False)  # the wrapper's own settings
    assert tokens.token_ids(tok, texts, limit) == want
    for text in texts:
        enc = tok(text, add_special_tokens=False, return_offsets_mapping=True, verbose=False)
        assert emb.tokenize(text) == [tuple(span) for span in enc["offset_mapping"]]
        assert emb.count_tokens(text) == len(enc["input_ids"])
    assert emb.count_tokens(texts[6]) > limit  # counts are not truncated


def test_a_tokenizer_without_a_backend_goes_through_the_wrapper() -> None:
    emb = get_embedder()

    class Wrapper:  # no ``backend_tokenizer``: the slow tokenizers' interface only
        def __call__(self, *args, **kwargs):  # type: ignore[no-untyped-def]
            return emb.model.tokenizer(*args, **kwargs)

    slow, real = Wrapper(), emb.model.tokenizer
    texts = ["Marie Curie", "word " * 600]
    assert tokens.token_ids(slow, texts, 512) == tokens.token_ids(real, texts, 512)
    assert tokens.offsets(slow, texts[0], 512) == tokens.offsets(real, texts[0], 512)
    assert tokens.count(slow, texts[1], 512) == tokens.count(real, texts[1], 512) == 600


def test_the_suites_short_passes_give_the_shipped_bits(short_passes) -> None:  # type: ignore[no-untyped-def]
    """The suite's shorter graph-vector passes (tests/short_passes.py) change no bit of any vector: where this
    machine's short passes differ from the shipped ones, the suite runs the shipped ones."""
    model = get_embedder().model
    texts = [*INVARIANCE_WORDS, LONG_TEXT, "nobel prize in physics", "Marie Curie, born in Warsaw in 1867"]
    short_passes.enabled = True
    try:
        short = short_passes(model, texts)
    finally:
        short_passes.enabled = False
    assert short.tobytes() == short_passes.real(model, texts).tobytes()
