"""Seeds of a store whose entity vectors are encoded (``extract.entity_vectors = "encoded"``, and stores that recorded
no vector settings) come from the factorised search (store/composed.py), on both backends: the same rows and score
bits as a search of the full tables, and a server answering ppr never makes those tables."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from exact_search import assert_exact
from pathweaver.store import composed, reads

QUESTIONS = ("Where was Marie Curie born?", "Who discovered polonium?", "Which river flows through Warsaw?",
             "a question about nothing in these notes")
ENCODED = {"extract": {"entity_vectors": "encoded"}, "models": {"llm_backend": "none"}}


def _results(pw) -> dict[tuple[str, str], object]:  # type: ignore[no-untyped-def]
    """ppr, mcmi and pathrag on every question, without timings."""
    out = {}
    for method in ("ppr", "mcmi", "pathrag"):
        for question in QUESTIONS:
            got = {k: v for k, v in pw.retrieve_json(question, method, 3).items() if k != "seconds"}
            got["info"] = {k: v for k, v in got["info"].items() if not k.startswith("ms_")}
            out[(method, question)] = got
    return out


def test_encoded_entities_seed_from_the_factorised_search(corpus_dir: Path, backend,  # type: ignore[no-untyped-def]
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from pathweaver.service import Pathweaver

    location = backend("store")
    with Pathweaver.open(location, overrides=ENCODED) as pw:
        pw.index([corpus_dir])
        assert pw.reader.db.get_meta("vector_settings").startswith("entities:encoded,triples:composed")
        pw.reader.cache.clear()
        got = _results(pw)
        snap = pw.reader.cache.latest()
        assert snap is not None and snap.loaded("entity_vecs") is None and snap.loaded("rel_vecs") is None
        search = snap.composed.get()
        assert search is not None and search.encoded and snap.n_relations > 10
        assert search.half_product  # this torch sums float16 products in float32 (the build's check)
        for question, half in zip(QUESTIONS, (True, False, True, False), strict=True):
            search.half_product = half  # word scores by torch's float16 product, or numpy's float32 one
            assert_exact(search, snap, pw.embedder.encode_one(question))
        search.half_product = True
        assert search.entity_rows(np.arange(snap.n_entities)).tobytes() == snap.entity_vecs.tobytes()
        assert search.relation_rows(np.arange(snap.n_relations)).tobytes() == snap.rel_vecs.tobytes()
        # the relation norms were stored once, under the store's settings
        db = pw.reader.db
        assert db.conn.execute("SELECT count(*) FROM relation_norms").fetchone()[0] == snap.n_relations
        assert db.get_meta("norm_settings") == db.get_meta("vector_settings")
        # the methods' results are those of the table search (the code before the factorised search took them)
        monkeypatch.setattr(reads, "composed_search", lambda *a, **k: None)
        pw.reader.cache.clear()
        assert _results(pw) == got
        assert pw.reader.cache.latest().loaded("rel_vecs") is not None


def test_half_product_is_checked_against_its_bound() -> None:
    """torch's float16 product stays within its rounding bound of the float32 product here (the build check the
    factorised search relies on), and the check fails when the bound is too tight to hold."""
    from pathweaver.numeric.projection import half_mv, half_mv_holds

    rows = np.random.default_rng(1).standard_normal((3000, 384)).astype(np.float16)
    longest = float(np.linalg.norm(rows.astype(np.float32), axis=1).max())
    assert half_mv_holds(rows, composed.ERR + composed.HALF_PRODUCT * longest)
    assert not half_mv_holds(rows, 0.0)
    assert not half_mv_holds(rows[:0], 1.0)
    q = np.ones(384, dtype=np.float32) / np.sqrt(384)
    assert half_mv(rows, q).dtype == np.float32 and half_mv(rows, q).shape == (3000,)
