"""Top-k set selection for ppr (issue 23): a document's passages share their slots, so the bridge's other end
gets one (MuSiQue dev question 24's passages, first sentences verbatim: three "Richard Feynman" paragraphs and
"Manhattan Project")."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import scipy.sparse as sp

from pathweaver.config import ConfigError
from pathweaver.retrieval.registry import plain_ranking, run_method
from pathweaver.retrieval.selection import document_keys, passage_links, select_passages
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
    keys = document_keys(snap, [0, 1, 2, 3])

    def chosen(k: int, decay: float, pool: int = 4) -> list[int]:
        return select_passages(np.arange(pool), scores[:pool], k, keys, decay).tolist()

    assert chosen(3, 1.0) == [BOILER, AFTER_WAR, ROYAL]  # the plain ranking
    # 0.3 × 0.25 = 0.075 < 0.1: the Manhattan Project takes the second slot; then 0.075 > 0.12 × 0.25
    assert chosen(3, 0.25) == [BOILER, MANHATTAN, AFTER_WAR]
    assert chosen(3, 0.5) == [BOILER, AFTER_WAR, MANHATTAN]
    assert chosen(4, 0.0) == [BOILER, MANHATTAN, AFTER_WAR, ROYAL]
    assert chosen(2, 0.0, pool=2) == [BOILER, AFTER_WAR]  # the choice is among the candidates
    assert chosen(0, 0.25) == []


def test_a_passage_the_chosen_ones_link_to_comes_first() -> None:
    snap = _store()
    pool = np.arange(4)
    # the second Feynman paragraph writes "Manhattan Project"; none writes the title "Richard Feynman"
    names = passage_links(snap, pool, name_links=True, proper_names=False)
    assert np.argwhere(names).tolist() == [[AFTER_WAR, MANHATTAN], [MANHATTAN, AFTER_WAR]]
    assert not passage_links(snap, pool, name_links=False, proper_names=False).any()
    # made-up ranking: Royal Society second, the Manhattan Project third; links index the candidates
    ranked, scores = np.array([BOILER, ROYAL, MANHATTAN, AFTER_WAR]), np.array([0.5, 0.3, 0.1, 0.05])
    links = np.zeros((4, 4), dtype=bool)
    links[0, 3] = links[3, 0] = links[2, 3] = links[3, 2] = True  # Boiler - After the war - Manhattan Project
    assert select_passages(ranked, scores, 3, links=links, unlinked=1.0).tolist() == [BOILER, ROYAL, MANHATTAN]
    # after the first: 0.3 and 0.1 join nothing chosen (0.075, 0.025), 0.05 does
    assert select_passages(ranked, scores, 3, links=links, unlinked=0.25).tolist() == [BOILER, ROYAL, AFTER_WAR]
    # once the second Feynman paragraph is in, the Manhattan Project it writes is joined
    assert select_passages(ranked, scores, 3, links=links, unlinked=0.0).tolist() == [BOILER, AFTER_WAR, MANHATTAN]


def test_ppr_gives_the_bridge_a_slot_beside_the_named_document() -> None:
    snap = _store()
    env = RetrievalEnv(snap, lambda t, k: [], lambda texts: np.zeros((len(texts), 4), dtype=np.float32))
    q = Query(QUESTION, np.array([1.0, 0.3, 0.2, 0.1], np.float32))
    plain = [h.passage for h in run_method(env, q, "ppr", 3, plain_ranking("ppr", None)).chunks]
    assert plain == [BOILER, AFTER_WAR, ROYAL]  # the question names Feynman: his paragraphs take every slot
    chosen = run_method(env, q, "ppr", 3, None).chunks  # the defaults
    assert [h.passage for h in chosen] == [BOILER, MANHATTAN, AFTER_WAR]
    assert chosen[0].score > chosen[2].score > chosen[1].score > 0  # each passage keeps its own walk score
    for bad in ({"document_decay": 1.5}, {"unlinked": -0.1}, {"select_pool": -1}):
        with pytest.raises(ConfigError):
            run_method(env, q, "ppr", 3, bad)


def test_plain_ranking_turns_only_the_selection_off_and_yields_to_the_caller() -> None:
    # what a fused pank plan asks its base for: the walk's ranking, with every other setting as given; its
    # sub-questions seed ppr by dense similarity alone
    assert plain_ranking("ppr", {"damping": 0.3}, sub_question=False) == {"document_decay": 1.0, "unlinked": 1.0,
                                                                          "damping": 0.3}
    assert plain_ranking("ppr", {"damping": 0.3}) == {"document_decay": 1.0, "unlinked": 1.0, "hybrid_pool": 0,
                                                      "damping": 0.3}
    assert plain_ranking("ppr", {"hybrid_pool": 5})["hybrid_pool"] == 5
    assert plain_ranking("ppr", {"unlinked": 0.25})["unlinked"] == 0.25
    given = {"alpha": 0.5}
    assert plain_ranking("hybrid", given) is given and plain_ranking("mcmi", None) is None
