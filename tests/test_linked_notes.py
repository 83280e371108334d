"""Graph retrieval on linked notes (issue 37): where the notes link each other, a graph method's result stands on
hybrid's notes, whose first k - 1 keep their slots, and the last slot goes to the method's best note hybrid lacks or
to a note the top note links to (or that links to it), so a two-note question's second note, which the question's
words alone rank low, is reached through the link; the paper preset does neither. Also: links resolve as Obsidian resolves them, a heading is never called by its last word, and LEGO's
path scores are kept across the per-note widening's reruns."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pathweaver.retrieval.floor import hybrid_floor, kept_slots
from pathweaver.retrieval.keywords import question_names
from pathweaver.retrieval.lego_paths import PathScorer
from pathweaver.retrieval.linked import follow_links, linked_documents, residual
from pathweaver.retrieval.registry import method_defaults
from pathweaver.retrieval.types import ChunkHit, RetrievalResult
from pathweaver.service import Pathweaver

# the link's display text names nothing and the file name is not the title, so only the written link joins the two
NOTES = {
    "Sourdough.md": "# Sourdough\n\nFeed the starter the night before. Mix the flour, water and salt, fold the dough "
                    "four times, then let it rise in the fridge for 12 hours. For the heat, use "
                    "[my usual table](oven-settings.md).\n",
    "oven-settings.md": "# Oven Settings\n\nPreheat to 250 °C with a tray of water on the bottom shelf; after twenty "
                        "minutes turn it down to 220 °C.\n",
    "Starter.md": "# Starter\n\nA sourdough starter is flour and water fermented by wild yeast. Fed at night, it "
                  "doubles by morning.\n",
    "Rye Bread.md": "# Rye bread\n\nRye dough is sticky and rises slowly: give it 16 hours at room temperature before "
                    "shaping.\n",
    "Pizza Dough.md": "# Pizza dough\n\nPizza dough rises best over two days in the fridge, then rests an hour on the "
                      "counter.\n",
    "Focaccia.md": "# Focaccia\n\nFocaccia dough rises in the tin with plenty of olive oil until it is bubbly, about 4 "
                   "hours.\n",
    "Bagels.md": "# Bagels\n\nBagel dough is stiff; it rises only briefly, then the bagels are boiled before baking.\n",
    "Garden.md": "# Garden\n\nTomatoes need staking in June and watering every morning.\n",
}
# how links resolve, and a heading's last word
OTHERS = {
    "Kneading.md": "# Kneading\n\nSee [[Proofing]] and [[proofing]] and [[No Such Note]].\n",
    "Proofing.md": "# Proofing\n\nLet it rise.\n",
    "old/Proofing.md": "# Proofing (old)\n\nAn older copy.\n",
    "Maintainers.md": "# Maintainers\n\n## Use Homebrew\n\nInstall the tools with Homebrew.\n",
}
QUESTION = "How long does my sourdough rise, and what heat do I start at?"
GRAPH_METHODS = ["ppr", "pathrag", "mcmi", "pooling", "lego:sae+sbr"]


def indexed(root: Path, notes: dict[str, str]) -> Pathweaver:
    vault = root / "vault"
    for name, text in notes.items():
        (vault / name).parent.mkdir(parents=True, exist_ok=True)
        (vault / name).write_text(text, "utf-8")
    pw = Pathweaver.open(root / "store", overrides={"models": {"llm_backend": "none"}})
    pw.index([vault])
    return pw


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Pathweaver:
    pw = indexed(tmp_path_factory.mktemp("linked"), NOTES)
    yield pw
    pw.close()


@pytest.fixture(scope="module")
def unlinked(tmp_path_factory: pytest.TempPathFactory) -> Pathweaver:
    # the same notes with the link written as plain text: no document links another
    notes = {**NOTES, "Sourdough.md": NOTES["Sourdough.md"].replace("[my usual table](oven-settings.md)", "my table")}
    pw = indexed(tmp_path_factory.mktemp("unlinked"), notes)
    yield pw
    pw.close()


@pytest.fixture(scope="module")
def others(tmp_path_factory: pytest.TempPathFactory) -> Pathweaver:
    pw = indexed(tmp_path_factory.mktemp("others"), OTHERS)
    yield pw
    pw.close()


def names(pw: Pathweaver, result: RetrievalResult) -> list[str]:
    """The notes of ``result``'s chunks, as paths inside the vault."""
    docs = pw.snapshot().chunk_docs
    root = Path(next(d for d in docs if d.endswith("Garden.md"))).parent
    return [Path(docs[h.passage]).relative_to(root).as_posix() for h in result.chunks]


def test_links_resolve_as_obsidian_resolves_them(service: Pathweaver, others: Pathweaver) -> None:
    def links(pw: Pathweaver) -> dict[str, list[str]]:
        root = Path(next(d for d in pw.snapshot().chunk_docs if "/old/" not in d)).parent
        return {Path(a).relative_to(root).as_posix(): sorted(Path(b).relative_to(root).as_posix() for b in bs)
                for a, bs in pw.snapshot().doc_links.items()}

    # a Markdown link by file name; a wiki link case-insensitively, to the shortest path; nothing for a missing note
    assert links(service) == {"Sourdough.md": ["oven-settings.md"]}
    assert links(others) == {"Kneading.md": ["Proofing.md"]}
    snap = service.snapshot()
    sourdough = next(d for d in snap.doc_links if d.endswith("Sourdough.md"))
    oven = snap.doc_links[sourdough][0]
    assert linked_documents(snap, oven) == [sourdough]  # a link is followed both ways


@pytest.mark.parametrize("method", GRAPH_METHODS)
def test_the_second_note_is_reached_through_the_link(service: Pathweaver, method: str) -> None:
    # two slots: hybrid's top note keeps the first, the second is open to the graph
    plain = service.retrieve(QUESTION, method="hybrid", top_k=2)
    assert names(service, plain)[0] == "Sourdough.md" and "oven-settings.md" not in names(service, plain)
    alone = service.retrieve(QUESTION, method=method, top_k=2, params={"linked_notes": 0, "hybrid_floor": False})
    assert "oven-settings.md" not in names(service, alone)
    result = service.retrieve(QUESTION, method=method, top_k=2)
    got = names(service, result)
    assert got == ["Sourdough.md", "oven-settings.md"], got
    placed = result.info["linked_notes"]
    assert [(Path(p["note"]).name, Path(p["linked_with"]).name) for p in placed] == [("oven-settings.md",
                                                                                      "Sourdough.md")]
    assert "hybrid_floor" in result.info  # these notes link each other


@pytest.mark.parametrize("method", GRAPH_METHODS)
@pytest.mark.parametrize("question", [QUESTION, "How long does rye dough rise before shaping?"])
def test_hybrids_first_notes_keep_their_slots(service: Pathweaver, method: str, question: str) -> None:
    hybrid = names(service, service.retrieve(question, method="hybrid", top_k=3))
    result = service.retrieve(question, method=method, top_k=3)
    assert names(service, result)[:kept_slots(3, question)] == hybrid[:kept_slots(3, question)]
    assert kept_slots(3, question) == 2 and len(set(names(service, result))) == 3


@pytest.mark.parametrize("method", GRAPH_METHODS)
def test_a_question_for_notes_keeps_hybrids_notes(service: Pathweaver, method: str) -> None:
    # the notes asked for match in their own words: no graph note and no linked note takes a slot (pathrag and
    # LEGO placed "Rye Bread.md" last before)
    question = "Which notes say how long a dough rises?"
    assert kept_slots(3, question) == 3
    hybrid = names(service, service.retrieve(question, method="hybrid", top_k=3))
    result = service.retrieve(question, method=method, top_k=3)
    assert names(service, result) == hybrid and len(set(hybrid)) == 3
    assert not result.info.get("linked_notes") and not result.info["hybrid_floor"]["graph_notes"]


def test_pank_fuses_on_hybrids_floor(service: Pathweaver) -> None:
    # the plan's fused list keeps hybrid's first notes as its base's own list does, and holds distinct notes
    result = service.retrieve(QUESTION, method="pank", top_k=3)
    assert result.info["plan_nodes"] > 1 and "hybrid_floor" in result.info
    hybrid = names(service, service.retrieve(QUESTION, method="hybrid", top_k=3))
    assert names(service, result)[:2] == hybrid[:2] and len(set(names(service, result))) == 3
    paper = service.retrieve(QUESTION, method="pank", top_k=3, params={"preset": "paper"})
    assert "hybrid_floor" not in paper.info


def test_the_methods_note_takes_the_last_slot(service: Pathweaver) -> None:
    env, query = service.env(), service.query(QUESTION)
    docs = env.snapshot.chunk_docs
    garden = next(p for p, d in enumerate(docs) if d.endswith("Garden.md"))
    hybrid = names(service, service.retrieve(QUESTION, method="hybrid", top_k=3))
    assert "Garden.md" not in hybrid
    # a note the method reached and hybrid did not takes the open slot; hybrid's notes the method missed are back-fill
    result = hybrid_floor(env, query, RetrievalResult(method="ppr", chunks=[ChunkHit(garden, 1.0)]), 3)
    assert names(service, result) == [*hybrid[:2], "Garden.md"]
    assert [h.backfill for h in result.chunks] == [True, True, False]
    assert result.info["hybrid_floor"] == {"graph_notes": [docs[garden]]}
    # nothing new: hybrid's list as it is
    same = hybrid_floor(env, query, RetrievalResult(method="ppr", chunks=list(result.chunks[:2])), 3)
    assert names(service, same) == hybrid and same.info["hybrid_floor"] == {"graph_notes": []}


def test_a_linked_note_takes_only_an_open_slot(service: Pathweaver) -> None:
    snap = service.snapshot()
    docs = snap.chunk_docs
    first = {Path(d).name: p for p, d in reversed(list(enumerate(docs)))}
    order = ["Sourdough.md", "Starter.md", "Garden.md"]
    qvec = service.query(QUESTION).vec

    def run(keep: int) -> list[str]:
        result = RetrievalResult(method="ppr", chunks=[ChunkHit(first[n], 1.0 - i / 10) for i, n in enumerate(order)])
        return names(service, follow_links(snap, qvec, result, 1, keep))

    # the oven note answers what the sourdough note leaves out; with two slots kept only the last is open to it
    assert run(2) == ["Sourdough.md", "Starter.md", "oven-settings.md"]
    assert run(1)[0] == "Sourdough.md" and "oven-settings.md" in run(1)
    assert run(3) == order  # no open slot


def test_a_store_without_written_links_keeps_the_methods_list(unlinked: Pathweaver) -> None:
    assert unlinked.snapshot().doc_links == {}
    for method in GRAPH_METHODS:
        result = unlinked.retrieve(QUESTION, method=method, top_k=3)
        plain = unlinked.retrieve(QUESTION, method=method, top_k=3, params={"linked_notes": 0, "hybrid_floor": False})
        assert "hybrid_floor" not in result.info and "linked_notes" not in result.info
        assert [h.passage for h in result.chunks] == [h.passage for h in plain.chunks]


def test_a_one_note_question_keeps_its_note(service: Pathweaver) -> None:
    result = service.retrieve("How long does rye dough rise before shaping?", method="ppr", top_k=3)
    assert names(service, result)[0] == "Rye Bread.md"


@pytest.mark.parametrize("method", GRAPH_METHODS)
def test_the_paper_preset_follows_no_link(service: Pathweaver, method: str) -> None:
    paper = method_defaults(method, "paper")
    assert paper["linked_notes"] == 0 and paper["hybrid_floor"] is False
    default = method_defaults(method)
    assert default["linked_notes"] == 1 and default["hybrid_floor"] is True
    result = service.retrieve(QUESTION, method=method, top_k=3, params={"preset": "paper"})
    assert "linked_notes" not in result.info and "hybrid_floor" not in result.info


def test_bad_linked_notes_is_a_clear_error(service: Pathweaver) -> None:
    with pytest.raises(Exception, match="linked_notes must be >= 0"):
        service.retrieve(QUESTION, method="ppr", top_k=3, params={"linked_notes": -1})


def test_a_heading_is_not_called_by_its_last_word(others: Pathweaver) -> None:
    snap = others.snapshot()
    # "Use Homebrew" is a heading of Maintainers.md: "Homebrew" alone means the program, not that section
    assert question_names(snap, "Does running Homebrew in a virtual machine count as supported?") == []
    assert [snap.entity_names[e] for e in question_names(snap, "What does the Use Homebrew part say?")] == \
        ["use homebrew"]


def test_residual_drops_the_top_chunks_direction() -> None:
    q = np.array([0.6, 0.8, 0.0])
    rest = residual(q, np.array([0.0, 1.0, 0.0]))
    assert rest is not None and np.allclose(rest, [1.0, 0.0, 0.0])
    assert residual(q, q) is None


def test_lego_path_scores_are_kept_for_a_rerun(service: Pathweaver) -> None:
    calls: list[list[str]] = []

    def encode(texts: list[str]) -> np.ndarray:
        calls.append(list(texts))
        return np.tile(np.eye(1, 4, dtype=np.float32), (len(texts), 1))

    snap = service.snapshot()
    kept: dict[str, float] = {}
    first = PathScorer(snap, encode, np.eye(1, 4, dtype=np.float32)[0], cache=kept).texts(["a b", "c d"])
    again = PathScorer(snap, encode, np.eye(1, 4, dtype=np.float32)[0], cache=kept).texts(["c d", "a b"])
    assert calls == [["a b", "c d"]] and list(first) == list(again) == [1.0, 1.0]


def test_lego_isar_embeds_no_path_text_by_default(service: Pathweaver, monkeypatch: pytest.MonkeyPatch) -> None:
    # ISAR scores each step's new triple (B.8 (1)) by default; the paper preset embeds each whole path's text
    assert method_defaults("lego:sbe+isar")["triple_scoring"] is True
    assert method_defaults("lego:sbe+isar", "paper")["triple_scoring"] is False
    embedded: list[str] = []
    texts = PathScorer.texts

    def spy(self: PathScorer, batch: list[str]) -> np.ndarray:
        embedded.extend(batch)
        return texts(self, batch)

    monkeypatch.setattr(PathScorer, "texts", spy)
    result = service.retrieve(QUESTION, method="lego:sbe+isar", top_k=2)
    assert result.paths and embedded == []
    assert names(service, result) == ["Sourdough.md", "oven-settings.md"]
    full = service.retrieve(QUESTION, method="lego:sbe+isar", top_k=3, params={"triple_scoring": False})
    assert full.paths and embedded and all(t in embedded for t in (p.text for p in full.paths))
