"""Top-k set selection for ppr (issue 23): a document's passages share their slots, so the bridge's other end
gets one (MuSiQue dev question 24's passages, first sentences verbatim: three "Richard Feynman" paragraphs and
"Manhattan Project")."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import scipy.sparse as sp

from pathweaver.config import ConfigError
from pathweaver.retrieval.registry import run_method
from pathweaver.retrieval.selection import document_keys, select_passages
from pathweaver.retrieval.types import Query, RetrievalEnv
from pathweaver.store.snapshot import GraphSnapshot

PASSAGES = [
    "Feynman's other work at Los Alamos included calculating neutron equations for the Los Alamos \"Water Boiler\", "
    "a small nuclear reactor, to measure how close an assembly of fissile material was to criticality.",
    "After the war, Feynman declined an offer from the Institute for Advanced Study in Princeton, New Jersey. "
    "During a temporary depression following the destruction of Hiroshima by the bomb produced by the Manhattan "
    "Project, he focused on complex physics problems, not for utility, but for self-satisfaction.",
    "Feynman was elected a Foreign Member of the Royal Society (ForMemRS) in 1965.",
    "The Manhattan Project was a research and development undertaking during World War II that produced the first "
    "nuclear weapons. Nuclear physicist Robert Oppenheimer was the director of the Los Alamos Laboratory that "
    "designed the actual bombs.",
]
TITLES = ["Richard Feynman", "Richard Feynman", "Richard Feynman", "Manhattan Project"]
ENTITIES = ["richard feynman", "manhattan project"]
BOILER, AFTER_WAR, ROYAL, MANHATTAN = range(4)
QUESTION = ("Who was the US physicist who directed the project that developed the first atomic bomb at the same "
            "place where Feynman worked on Water Boiler?")


def _store() -> GraphSnapshot:
    """The four passages, their title entities tied to them, and the name "Manhattan Project" that the second
    Feynman paragraph writes. Passage vectors one-hot."""
    snap = GraphSnapshot.from_arrays(
        ENTITIES, [], passages=PASSAGES, mentions=[(p, 0, 1) for p in range(3)] + [(MANHATTAN, 1, 1)],
        entity_vecs=np.zeros((2, 4), dtype=np.float32), rel_vecs=np.zeros((0, 4), dtype=np.float32),
        chunk_vecs=np.eye(4, dtype=np.float32),
    )
    ties = sp.csr_matrix((np.ones(4, dtype=np.float32), ([0, 1, 2, 3], [0, 0, 0, 1])), shape=(4, 2))
    named = sp.csr_matrix((np.ones(1, dtype=np.float32), ([AFTER_WAR], [1])), shape=(4, 2))
    return dataclasses.replace(snap, ties=ties, name_mentions=named, entity_kinds=["title", "title"],
                               chunk_titles=list(TITLES), chunk_docs=[f"{i:06d}.md" for i in range(4)])


def test_passages_of_one_title_are_one_document() -> None:
    snap = _store()
    assert document_keys(snap, [0, 1, 2, 3]) == ["richard feynman"] * 3 + ["manhattan project"]
    untitled = dataclasses.replace(snap, chunk_titles=["", "", "", ""])
    assert document_keys(untitled, [0, 3]) == ["000000.md", "000003.md"]  # no title: the file is the document


def test_decay_shares_a_documents_slots() -> None:
    snap = _store()
    scores = np.array([0.5, 0.3, 0.12, 0.1])
    assert select_passages(snap, scores, 3, 1.0, 20).tolist() == [BOILER, AFTER_WAR, ROYAL]  # the plain ranking
    # 0.3 × 0.25 = 0.075 < 0.1: the Manhattan Project takes the second slot; then 0.075 > 0.12 × 0.25
    assert select_passages(snap, scores, 3, 0.25, 20).tolist() == [BOILER, MANHATTAN, AFTER_WAR]
    assert select_passages(snap, scores, 3, 0.5, 20).tolist() == [BOILER, AFTER_WAR, MANHATTAN]
    assert select_passages(snap, scores, 4, 0.0, 20).tolist() == [BOILER, MANHATTAN, AFTER_WAR, ROYAL]
    # the choice is among the pool's passages, at least k of them
    assert select_passages(snap, scores, 2, 0.0, 1).tolist() == [BOILER, AFTER_WAR]
    assert select_passages(snap, scores, 0, 0.25, 20).size == 0


def test_ppr_gives_the_bridge_a_slot_beside_the_named_document() -> None:
    snap = _store()
    env = RetrievalEnv(snap, lambda t, k: [], lambda texts: np.zeros((len(texts), 4), dtype=np.float32))
    q = Query(QUESTION, np.array([1.0, 0.3, 0.2, 0.1], np.float32))
    plain = [h.passage for h in run_method(env, q, "ppr", 3, None).chunks]
    assert plain == [BOILER, AFTER_WAR, ROYAL]  # the question names Feynman: his paragraphs take every slot
    chosen = run_method(env, q, "ppr", 3, {"document_decay": 0.25}).chunks
    assert [h.passage for h in chosen] == [BOILER, MANHATTAN, AFTER_WAR]
    assert chosen[0].score > chosen[2].score > chosen[1].score > 0  # each passage keeps its own walk score
    with pytest.raises(ConfigError):
        run_method(env, q, "ppr", 3, {"document_decay": 1.5})
    with pytest.raises(ConfigError):
        run_method(env, q, "ppr", 3, {"select_pool": -1})
