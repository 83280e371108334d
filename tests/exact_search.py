"""A check shared by the factorised seed search's tests (``store.composed``): its answers are the exact search's."""

from __future__ import annotations

from typing import Any

import numpy as np

from pathweaver.numeric.projection import exact_top_k


def assert_exact(search: Any, snap: Any, q: np.ndarray) -> None:
    """``search``'s top relations and entities for ``q`` equal the exact search over the snapshot's tables at several
    k (one past every row included): the same rows and the same score bits."""
    for k in (1, 3, 10, snap.n_relations + 5):
        for got, table in ((search.top_relations(q, k), snap.rel_vecs), (search.top_entities(q, k), snap.entity_vecs)):
            want_rows, want_scores = exact_top_k(table, None, q, k)
            assert got[0].tolist() == want_rows.tolist() and got[1].tobytes() == want_scores.tobytes()
