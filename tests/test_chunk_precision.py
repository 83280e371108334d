"""``ingest.chunk_vector_precision``: bfloat16 chunk vectors in fixed-shape passes (an incremental index stores the
same bits as a fresh one), the precision a store records at its first index, and what a store of one precision
does when opened with another setting or on a CPU without native bfloat16."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import numpy as np
import pytest

from pathweaver.config import ConfigError, Settings
from pathweaver.ingest import chunk_precision, invariance
from pathweaver.ingest.pipeline import Indexer
from pathweaver.models import precision as precision_mod
from pathweaver.models.embedder import get_embedder
from pathweaver.models.precision import native_bf16
from pathweaver.store import writes as w
from pathweaver.store.db import Database
from pathweaver.store.meta import delete_meta

CORPUS = Path(__file__).parent / "corpus"
FIRST = ["marie-curie.md", "polonium.md", "vistula.txt"]  # the incremental store's first index; the rest come later

needs_bf16 = pytest.mark.skipif("not native_bf16()", reason="bfloat16 is emulated here: auto never picks it")


def settings(store: Path, precision: str = "auto") -> Settings:
    s = Settings(store_dir=store)
    s.ingest.chunk_vector_precision = precision
    return s


def chunk_vectors(db: Database) -> dict[str, bytes]:
    """Each stored chunk's vector by its text."""
    rows = db.conn.execute("SELECT c.text, v.embedding FROM chunks c JOIN chunk_vec v ON v.rowid = c.id")
    return {text: bytes(blob) for text, blob in rows}


def folder_of(tmp_path: Path, names: list[str] | None = None) -> Path:
    notes = tmp_path / "notes"
    notes.mkdir(exist_ok=True)
    for f in CORPUS.iterdir():
        if names is None or f.name in names:
            shutil.copy(f, notes / f.name)
    return notes


@needs_bf16
def test_bfloat16_chunk_vectors_incremental_equal_fresh(tmp_path: Path) -> None:
    """"auto" on a CPU with native bfloat16 (and an invariant probe) makes bfloat16 chunk vectors, records it, and
    caches them apart from float32's; chunks embedded in another company (a first index of half the files, then
    the rest) get the same bits as a fresh index of all of them, and stay within 1e-3 in cos of float32."""
    emb = get_embedder()
    assert emb.batch_invariant("bfloat16")
    notes = folder_of(tmp_path, FIRST)
    with Database(tmp_path / "inc") as db:
        Indexer(db, settings(tmp_path / "inc"), emb).index_paths([notes])
        folder_of(tmp_path)
        indexer = Indexer(db, settings(tmp_path / "inc"), emb)
        assert indexer.chunk_precision == "bfloat16" == db.get_meta(chunk_precision.META_KEY)
        indexer.index_paths([notes])
        incremental = chunk_vectors(db)
        cached = w.cache_get(db.conn, list(incremental), chunk_precision.cache_space("bfloat16"))
        assert not w.cache_get(db.conn, list(incremental))  # float32's key space holds none of them
    with Database(tmp_path / "fresh") as db:
        Indexer(db, settings(tmp_path / "fresh"), emb).index_paths([notes])
        fresh = chunk_vectors(db)
    assert len(fresh) > len(FIRST) and incremental == fresh
    assert {t: v.tobytes() for t, v in cached.items()} == fresh
    texts = sorted(fresh)
    low = np.stack([np.frombuffer(fresh[t], np.float32) for t in texts])
    assert low.tobytes() == emb.encode(texts[::-1], precision="bfloat16", invariant=True)[::-1].tobytes()
    full = emb.encode(texts)
    assert (low * full).sum(1).min() > 0.999 and low.tobytes() != full.tobytes()


def test_without_native_bfloat16_auto_is_float32_as_before(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """On a CPU without native bfloat16, "auto" records float32 and chunk vectors are the packed float32 ones, with
    no probe run for them."""
    monkeypatch.setattr(precision_mod, "native_bf16", lambda: False)
    monkeypatch.setattr(chunk_precision, "native_bf16", lambda: False)
    emb = get_embedder()
    probed: list[str] = []
    probe = emb.batch_invariant
    monkeypatch.setattr(emb, "batch_invariant", lambda p="float32": probed.append(p) or probe(p))
    notes = folder_of(tmp_path)
    with Database(tmp_path / "store") as db:
        indexer = Indexer(db, settings(tmp_path / "store"), emb)
        assert indexer.chunk_precision == "float32" == db.get_meta(chunk_precision.META_KEY)
        indexer.index_paths([notes])
        stored = chunk_vectors(db)
    texts = sorted(stored)
    got = np.stack([np.frombuffer(stored[t], np.float32) for t in texts])
    assert np.abs(got - emb.encode(texts)).max() < 1e-6 and not probed


def test_a_store_keeps_its_chunk_precision(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                           caplog: pytest.LogCaptureFixture) -> None:
    """A store of bfloat16 chunks: an explicit float32 setting is refused with a clear message (mixed precisions
    would rank chunks by when they were indexed); "auto" on a CPU without native bfloat16 keeps bfloat16 (emulated,
    with a warning) and a new chunk gets the vector a fresh bfloat16 index gives it. A store with chunks from
    before the record is float32, and refuses bfloat16. A bad name is a clear error."""
    emb = get_embedder()
    notes = folder_of(tmp_path, FIRST)
    store = tmp_path / "store"
    with Database(store) as db:
        Indexer(db, settings(store, "bfloat16"), emb).index_paths([notes])
        assert db.get_meta(chunk_precision.META_KEY) == "bfloat16"
        with pytest.raises(ConfigError, match="chunk vectors are bfloat16.*chunk_vector_precision = float32"):
            Indexer(db, settings(store, "float32"), emb)
        monkeypatch.setattr(precision_mod, "native_bf16", lambda: False)
        monkeypatch.setattr(chunk_precision, "native_bf16", lambda: False)
        with caplog.at_level(logging.WARNING, logger=chunk_precision.__name__):
            indexer = Indexer(db, settings(store), emb)
        assert indexer.chunk_precision == "bfloat16" and "emulates" in caplog.text
        folder_of(tmp_path)
        indexer.index_paths([notes])
        kept = chunk_vectors(db)
        monkeypatch.undo()
        with db.write(bump_version=False) as conn:
            delete_meta(conn, chunk_precision.META_KEY)  # as a store indexed before the record
        assert Indexer(db, settings(store), emb).chunk_precision == "float32"
        with pytest.raises(ConfigError, match="chunk vectors are float32"):
            Indexer(db, settings(store, "bfloat16"), emb)
    with Database(tmp_path / "fresh") as db:
        Indexer(db, settings(tmp_path / "fresh", "bfloat16"), emb).index_paths([notes])
        fresh = chunk_vectors(db)
    if native_bf16():  # emulated bfloat16 is not probed for batch invariance
        assert kept == fresh
    with Database(tmp_path / "bad") as db, pytest.raises(ConfigError, match="ingest.chunk_vector_precision"):
        Indexer(db, settings(tmp_path / "bad", "half"), emb)


def test_a_machine_probes_once_for_all_its_stores(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The probe's answer is kept on the machine (the user data directory) as well as in the store: a second fresh
    store on the same machine does not probe; a store's own record wins over the machine's; an unreadable machine
    file is passed over (probed again and rewritten)."""
    machine = tmp_path / "data" / "batch_invariance.json"
    monkeypatch.setattr(invariance, "machine_file", lambda: machine)
    emb = get_embedder()
    probed: list[str] = []
    probe = emb.batch_invariant
    monkeypatch.setattr(emb, "batch_invariant", lambda p="float32": probed.append(p) or probe(p))
    with Database(tmp_path / "one") as db:
        first = invariance.recorded_invariance(db, emb, emb.model_name)("bfloat16")
    key = next(iter(invariance.machine_answers()))
    assert probed == ["bfloat16"] and invariance.machine_answers() == {key: first} and "|bfloat16|" in key
    with Database(tmp_path / "two") as db:
        assert invariance.recorded_invariance(db, emb, emb.model_name)("bfloat16") is first
        assert probed == ["bfloat16"] and key in db.get_meta(invariance.META_KEY)
        invariance.remember_on_machine(key, not first)  # the store's record answers before the machine's
        assert invariance.recorded_invariance(db, emb, emb.model_name)("bfloat16") is first
    machine.write_bytes(b"\xff not json")
    with Database(tmp_path / "three") as db:
        assert invariance.recorded_invariance(db, emb, emb.model_name)("bfloat16") is first
    assert probed == ["bfloat16"] * 2 and invariance.machine_answers() == {key: first}


@needs_bf16
@pytest.mark.shipped_passes
def test_a_machines_first_index_probes_in_five_passes_and_falls_back_when_it_fails(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A machine's first index probes bfloat16 in five fixed passes (each probe text twice in one pass per width,
    two texts alone) and records bfloat16; where a text's vector moves with its company, the same first index
    records float32 and keeps the packed float32 chunk vectors."""
    from pathweaver.models import embedder as embedder_mod

    monkeypatch.setattr(invariance, "machine_file", lambda: tmp_path / "data" / "batch_invariance.json")
    notes = folder_of(tmp_path, FIRST)
    emb = embedder_mod.Embedder()
    emb._model = get_embedder().model  # the loaded model, probed afresh
    assert emb.packed  # the packing probe's passes are not the invariance probe's
    passes: list[tuple[int, ...]] = []
    hook = emb.model[0].auto_model.register_forward_hook(lambda m, args, kwargs, out: passes.append(
        tuple(kwargs["input_ids"].shape)), with_kwargs=True)
    try:
        with Database(tmp_path / "holds") as db:
            assert Indexer(db, settings(tmp_path / "holds"), emb).chunk_precision == "bfloat16"
    finally:
        hook.remove()
    assert sorted(passes) == sorted([(128, 32)] * 2 + [(64, 64)] + [(16, 256)] * 2)
    real = embedder_mod.fixed_packed
    monkeypatch.setattr(embedder_mod, "fixed_packed", lambda model, texts: real(model, texts) + 1e-6 * len(texts))
    monkeypatch.setattr(invariance, "machine_file", lambda: tmp_path / "other" / "batch_invariance.json")
    drifting = embedder_mod.Embedder()
    drifting._model = emb.model
    with Database(tmp_path / "fails") as db:
        indexer = Indexer(db, settings(tmp_path / "fails"), drifting)
        assert indexer.chunk_precision == "float32" == db.get_meta(chunk_precision.META_KEY)
        indexer.index_paths([notes])
        stored = chunk_vectors(db)
    assert list(invariance.machine_answers().values()) == [False]
    texts = sorted(stored)
    got = np.stack([np.frombuffer(stored[t], np.float32) for t in texts])
    assert np.abs(got - emb.encode(texts)).max() < 1e-6
