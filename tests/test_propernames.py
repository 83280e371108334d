"""Proper-name phrase nodes for PPR (issue 23): which n-gram entities a passage writes as names, and the walk from
a named document to a passage that shares no title with it but writes the same person (MuSiQue dev question 19's
passages, verbatim)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import scipy.sparse as sp

from pathweaver.config import ConfigError
from pathweaver.retrieval.propernames import capital_runs, proper_mentions
from pathweaver.retrieval.registry import run_method
from pathweaver.retrieval.types import Query, RetrievalEnv
from pathweaver.store.snapshot import GraphSnapshot

PASSAGES = [
    "Dragon Dreams is a studio album released in 2008 by Canadian singer-songwriter Jane Siberry under the name "
    "Issa. The music was written, produced, and arranged by Jane Siberry.",
    "Gavin Bradley is an award-winning Canadian singer-songwriter and producer based in Toronto who has worked with "
    "artists like Nelly Furtado, Tori Amos and Jane Siberry. Born in June, he released Deep Freeze in 2006.",
    "Casa Loma is a Gothic Revival style mansion and garden in midtown Toronto, Ontario, Canada. It was built for "
    "Sir Henry Pellatt.",
    "Henry Pellatt was a Canadian financier who built Casa Loma in June 1911.",
]
TITLES = ["dragon dreams", "gavin bradley", "casa loma", "henry pellatt"]
GRAMS = ["jane siberry", "canadian", "toronto", "nelly furtado", "born", "june", "singer", "deep freeze", "issa"]
DRAGON, GAVIN, CASA, PELLATT = range(4)


def _store() -> GraphSnapshot:
    """Four real passages, their title entities (tied to them; Henry Pellatt's passage names Casa Loma) and some
    n-gram entities. Passage vectors one-hot; the question's vector is Dragon Dreams' with a little of Henry
    Pellatt's."""
    names = TITLES + GRAMS
    eye = np.eye(4, dtype=np.float32)
    snap = GraphSnapshot.from_arrays(
        names, [], passages=PASSAGES, mentions=[(p, p, 1) for p in range(4)] + [(PELLATT, CASA, 1)],
        entity_vecs=np.zeros((len(names), 4), dtype=np.float32), rel_vecs=np.zeros((0, 4), dtype=np.float32),
        chunk_vecs=eye.copy(),
    )
    ties = sp.csr_matrix((np.ones(4, dtype=np.float32), (list(range(4)), list(range(4)))), shape=(4, len(names)))
    named = sp.csr_matrix((np.ones(1, dtype=np.float32), ([PELLATT], [CASA])), shape=(4, len(names)))
    kinds = ["title"] * len(TITLES) + ["ngram"] * len(GRAMS)
    return dataclasses.replace(snap, ties=ties, name_mentions=named, entity_kinds=kinds)


def test_capital_runs_keep_names_whole_and_split_at_lower_case_and_punctuation() -> None:
    runs = [" ".join(s.word for s in run) for run in capital_runs(
        "The Lord of the Rings was filmed by Peter Jackson and Fran Walsh in New Zealand, Born there.")]
    assert runs == ["the lord of the rings", "peter jackson", "fran walsh", "new zealand", "born"]


def test_a_passage_mentions_the_names_it_writes_that_another_passage_writes_too() -> None:
    snap = _store()
    m = proper_mentions(snap).toarray()
    written = {snap.entity_names[e]: sorted(np.flatnonzero(m[:, e]).tolist()) for e in np.flatnonzero(m.sum(0))}
    # "canadian" and "toronto" bridge passages; "jane siberry" joins Dragon Dreams to Gavin Bradley (twice in the
    # first); "nelly furtado", "deep freeze", "issa" are written once; "Born" and "singer" are no names; "June" is a
    # date; titles belong to the name layer
    assert written == {"jane siberry": [DRAGON, GAVIN], "canadian": [DRAGON, GAVIN, PELLATT],
                       "toronto": [GAVIN, CASA]}
    assert m[DRAGON, snap.entity_index["jane siberry"]] == 2


def test_ppr_reaches_the_passage_that_writes_the_same_person_through_her_name_node() -> None:
    snap = _store()
    env = RetrievalEnv(snap, lambda t, k: [], lambda texts: np.zeros((len(texts), 4), dtype=np.float32))
    q = Query("Who is the spouse of the performer of Dragon Dreams?", np.array([1.0, 0.0, 0.0, 0.05], np.float32))
    without = run_method(env, q, "ppr", 4, {"proper_names": 0.0}).chunks
    with_names = [h.passage for h in run_method(env, q, "ppr", 4, None).chunks]
    assert [h.passage for h in without][:2] == [DRAGON, PELLATT]
    assert without[-1].passage == GAVIN and without[-1].score == 0.0  # no title joins Gavin Bradley to the album
    assert with_names[:2] == [DRAGON, GAVIN]  # Jane Siberry does
    # AGRAG's whole statistical graph (MCMI's HippoRAG reset walks it) has no proper-name layer
    full = {"statistical": 1.0}
    assert [h.passage for h in run_method(env, q, "ppr", 4, {**full, "proper_names": 5.0}).chunks] == \
        [h.passage for h in run_method(env, q, "ppr", 4, {**full, "proper_names": 0.0}).chunks]
    with pytest.raises(ConfigError):
        run_method(env, q, "ppr", 1, {"proper_names": -1.0})
