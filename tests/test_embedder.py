"""The embedder's single-text cache: same vectors as a batch, bounded, safe to modify, clearable."""

from __future__ import annotations

import numpy as np

from pathweaver.models import embedder as embedder_mod
from pathweaver.models.embedder import get_embedder


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
