"""ask(): LLM answers, extractive fallbacks (no model, timeout, failure), and plan-then-retrieve with
dependency-aware reranking, on a hand-built snapshot with real embeddings and real citations."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from pathweaver import answer
from pathweaver.config import ConfigError
from pathweaver.models.embedder import get_embedder
from pathweaver.models.llm import NoneBackend
from pathweaver.models.llm_openai import OpenAIBackend
from pathweaver.models.llm_sampling import SamplingBackend
from pathweaver.planner import execute
from pathweaver.planner.execute import execute_plan, extractive_answer, merge_rankings
from pathweaver.planner.heuristic import heuristic_decompose
from pathweaver.results import dump
from pathweaver.retrieval.context import sentences
from pathweaver.retrieval.types import ChunkHit, RetrievalEnv, RetrievalResult
from pathweaver.store.snapshot import GraphSnapshot
from test_llm import FakeChatServer


def ask(*args: Any, **kwargs: Any) -> dict[str, Any]:
    """``answer.ask``'s result as the JSON the service serves (``results.AskOut``, dumped)."""
    return dump(answer.ask(*args, **kwargs))


PASSAGES = [
    "Jaws is a 1975 American thriller film directed by Steven Spielberg. It is set on Amity Island.",
    "Steven Spielberg married the actress Kate Capshaw in 1991. They live in Los Angeles.",
    "Sharks are fish that live in every ocean of the world.",
    "The Amity Island ferry carries tourists in summer.",
    "Kate Capshaw starred in Indiana Jones and the Temple of Doom.",
]
ENTITIES = [
    "Jaws",
    "Steven Spielberg",
    "Kate Capshaw",
    "Amity Island",
    "Los Angeles",
    "Sharks",
    "Indiana Jones",
]
MENTIONS = [
    (0, 0, 1),
    (0, 1, 1),
    (0, 3, 1),
    (1, 1, 1),
    (1, 2, 1),
    (1, 4, 1),
    (2, 5, 1),
    (3, 3, 1),
    (4, 2, 1),
    (4, 6, 1),
]


@pytest.fixture(scope="module")
def env() -> RetrievalEnv:
    enc = get_embedder().encode
    snap = GraphSnapshot.from_arrays(
        entities=ENTITIES,
        relations=[(0, 1, "directed by"), (1, 2, "married")],
        passages=PASSAGES,
        mentions=MENTIONS,
        relation_chunks=[(0, 0), (1, 1)],
        chunk_vecs=enc(PASSAGES),
    )
    snap.chunk_docs = [f"notes/{i}.md" for i in range(len(PASSAGES))]
    snap.chunk_spans = np.array([[10 * i, 10 * i + len(p)] for i, p in enumerate(PASSAGES)], dtype=np.int64)
    return RetrievalEnv(snapshot=snap, bm25_chunks=lambda text, k: [], encode=enc)


def dense(env: RetrievalEnv, top_k: int = 3) -> Any:
    """The caller's retrieval: dense cosine over the snapshot's chunk vectors."""

    def retrieve(text: str, keywords: list[str] | None = None, k: int | None = None) -> RetrievalResult:
        sims = env.snapshot.chunk_vecs @ env.encode([text])[0]
        order = np.argsort(-sims, kind="stable")[: k or top_k]
        return RetrievalResult("dense", [ChunkHit(int(i), float(sims[i])) for i in order])

    return retrieve


@pytest.fixture
def chat_server() -> Iterator[FakeChatServer]:
    server = FakeChatServer()
    yield server
    server.close()


def test_no_llm_gives_extractive_answer_with_citations(env: RetrievalEnv) -> None:
    out = ask(env, "Who directed Jaws?", retrieve=dense(env), method="dense", top_k=3, llm=NoneBackend())
    assert out["extractive"] is True and out["backend"] == "extractive"
    assert "Steven Spielberg" in out["answer"] and "[1]" in out["answer"]
    assert out["citations"][0] == {
        "n": 1,
        "doc": "notes/0.md",
        "title": "doc0",
        "chunk_id": 1,
        "span": [0, len(PASSAGES[0])],
    }
    assert out["llm"]["backend"] == "extractive" and out["llm"]["fallbacks"] == []  # chosen, not fallen back to
    assert out["plan"] is None and out["context"]["text"].startswith("Sources:\n[1] doc0: Jaws is")


def test_a_two_part_question_is_answered_part_by_part_without_a_plan(env: RetrievalEnv) -> None:
    question = "Who directed Jaws, and whom did he marry?"
    out = ask(env, question, retrieve=dense(env), method="dense", top_k=3, llm=NoneBackend())
    first, second = out["answer"].split("; ")
    assert first.startswith("Steven Spielberg [") and second.startswith("Kate Capshaw [")
    assert out["plan"] is None  # one retrieval; only the extractive answer splits the question


def test_a_chain_question_retrieves_for_its_later_hop(env: RetrievalEnv) -> None:
    """One chunk retrieved for the whole question holds only the first hop; the second hop ("Whom did Steven
    Spielberg marry?") retrieves its own chunk, which joins the citations after the first."""
    calls: list[str] = []
    inner = dense(env, top_k=1)

    def retrieve(text: str, keywords: list[str] | None = None) -> RetrievalResult:
        calls.append(text)
        return inner(text, keywords)

    out = ask(env, "Whom did the director of Jaws marry?", retrieve=retrieve, method="dense", top_k=1,
              llm=NoneBackend())
    assert calls == ["Whom did the director of Jaws marry?", "Whom did Steven Spielberg marry?"]
    assert out["answer"] == "Kate Capshaw [1][2]"  # both hops' sentences
    assert [c["doc"] for c in out["citations"]] == ["notes/0.md", "notes/1.md"]
    assert [i["n"] for i in out["context"]["items"]] == [1, 2]


def test_a_chain_hop_answers_with_a_title_the_store_knows(env: RetrievalEnv) -> None:
    """An inner hop answers with the title of a retrieved passage that its best sentence writes."""
    from pathweaver.extractive import bridge_title
    from pathweaver.extractive.types import ExtractiveParams, Passage

    passages = [Passage("Attics to Eden is the second album by the American band Madina Lake.", 1,
                        "Attics to Eden", 0),
                Passage("Madina Lake was an American rock band formed in 2005 in Chicago.", 2, "Madina Lake", 1)]
    found = bridge_title("Who performed Attics to Eden?", passages, env.encode, ExtractiveParams(), None, 0)
    assert found == ("Madina Lake", [1])
    assert bridge_title("Who performed Attics to Eden?", passages[:1], env.encode, ExtractiveParams(), None, 0) \
        is None  # the album's own title is the question's, not an answer


def test_llm_answer_with_layout_prompt(env: RetrievalEnv, chat_server: FakeChatServer) -> None:
    chat_server.script = [("text", "Steven Spielberg directed Jaws [1].")]
    llm = OpenAIBackend(chat_server.url, "m")
    out = ask(env, "Who directed Jaws?", retrieve=dense(env), method="dense", top_k=2, llm=llm)
    assert out["answer"] == "Steven Spielberg directed Jaws [1]." and out["extractive"] is False
    assert out["backend"] == "openai"
    assert out["llm"] == {
        "backend": "openai",
        "model": "fake-model",
        "prompt_tokens": 11,
        "completion_tokens": 7,
        "fallbacks": [],
    }
    user = chat_server.requests[0]["messages"][1]["content"]
    assert user.startswith("Sources:\n[1] doc0: Jaws") and user.endswith("Question: Who directed Jaws?")


def test_timeout_and_failure_fall_back(env: RetrievalEnv, chat_server: FakeChatServer) -> None:
    chat_server.script = [("sleep", 2.0)]
    llm = OpenAIBackend(chat_server.url, "m")
    out = ask(env, "Who directed Jaws?", retrieve=dense(env), method="dense", top_k=2, llm=llm, timeout=0.3)
    assert out["extractive"] and out["backend"] == "extractive" and "Spielberg" in out["answer"]
    assert "did not answer within" in out["llm"]["fallbacks"][0]

    def broken(messages: list[dict[str, Any]], max_tokens: int, timeout: float) -> tuple[str, str]:
        raise ConnectionError("client went away")

    out = ask(
        env,
        "Who is the spouse of the director of Jaws?",
        retrieve=dense(env),
        method="dense",
        top_k=2,
        llm=SamplingBackend(broken),
        decompose=True,
    )
    fallbacks = out["llm"]["fallbacks"]
    assert fallbacks[0].startswith("plan: LLMError: sampling failed")
    assert any(f.startswith("sub-answer: sampling failed") for f in fallbacks)
    assert fallbacks[-1].startswith("answer: sampling failed") and out["extractive"]


def test_plan_then_retrieve_resolves_and_reranks(env: RetrievalEnv) -> None:
    out = ask(
        env,
        "Who is the spouse of the director of Jaws?",
        retrieve=dense(env),
        method="dense",
        top_k=3,
        llm=NoneBackend(),
        decompose=True,
    )
    plan = out["plan"]
    assert plan["plan"]["source"] == "heuristic" and plan["plan"]["levels"] == [["1"], ["2"]]
    first, second = plan["nodes"]
    assert first["question"] == "Who is the director of Jaws?" and first["answer"] == "Steven Spielberg"
    assert first["reranked"] is False and first["citation"]["chunk_id"] == 1
    assert second["rephrased"] == "Who is the spouse of Steven Spielberg?"
    assert second["reranked"] is True and second["alpha"] == 0.6
    assert second["answer"] == "Kate Capshaw" and second["citation"]["doc"] == "notes/1.md"
    cited = {c["chunk_id"] for c in out["citations"]}
    assert {1, 2} <= cited  # evidence for both hops reaches the final context
    assert "Kate Capshaw" in out["answer"]


def test_rerank_changes_order_against_resolved_answer(env: RetrievalEnv) -> None:
    snap = env.snapshot
    plan = heuristic_decompose("Who is the spouse of the director of Jaws?")

    def fixed(text: str) -> RetrievalResult:  # retrieval that ranks the Kate Capshaw film chunk first
        return RetrievalResult("fixed", [ChunkHit(4, 0.9), ChunkHit(1, 0.85), ChunkHit(0, 0.2)])

    trace = execute_plan(plan, fixed, env.encode, NoneBackend(), snap, top_k=3)
    node = trace.nodes["2"]
    assert [c["chunk_id"] for c in node.chunks_before] == [5, 2, 1]
    assert (
        node.chunks_after[0]["chunk_id"] == 2
    )  # the chunk naming the resolved answer (Steven Spielberg) wins
    assert (
        merge_rankings(plan, {"1": [ChunkHit(0, 1)], "2": [ChunkHit(1, 1), ChunkHit(0, 1)]}, 3)[0].passage
        == 0
    )



def test_a_ranking_that_repeats_an_earlier_ones_passages_is_fused_once() -> None:
    plan = heuristic_decompose("Who is the spouse of the director of Jaws?")
    root = [ChunkHit(0, 1), ChunkHit(1, 1), ChunkHit(2, 1)]
    first_node = [ChunkHit(2, 1), ChunkHit(1, 1), ChunkHit(0, 1)]  # the same evidence, reordered
    last_node = [ChunkHit(7, 1), ChunkHit(8, 1), ChunkHit(0, 1)]
    ids = [plan.order[0], plan.order[-1]]
    merged = merge_rankings(plan, {ids[0]: first_node, ids[1]: last_node}, 3, root_hits=root)
    # counted twice, the repeated list's third passage would outvote the last node's first one
    assert [h.passage for h in merged] == [0, 7, 1]
    assert merged == merge_rankings(plan, {ids[1]: last_node}, 3, root_hits=root)
    other = [ChunkHit(2, 1), ChunkHit(1, 1), ChunkHit(9, 1)]  # a different set still counts, and outvotes 7
    assert [h.passage for h in merge_rankings(plan, {ids[0]: other, ids[1]: last_node}, 3, root_hits=root)] == [
        0, 2, 1]


def test_retrieval_only_plans_skip_answers_nothing_reads(env: RetrievalEnv) -> None:
    plan = heuristic_decompose("Who is the spouse of the director of Jaws?")

    def fixed(text: str) -> RetrievalResult:
        return RetrievalResult("fixed", [ChunkHit(1, 0.9), ChunkHit(4, 0.8)])

    full = execute_plan(plan, fixed, env.encode, NoneBackend(), env.snapshot, top_k=3)
    lean = execute_plan(plan, fixed, env.encode, NoneBackend(), env.snapshot, top_k=3, answer_leaves=False)
    # node 1 feeds node 2, so it is still answered (and rephrases node 2); the leaf is not
    assert lean.nodes["1"].answer == full.nodes["1"].answer != ""
    assert lean.nodes["2"].rephrased == full.nodes["2"].rephrased
    assert full.nodes["2"].answer_source == "extractive" and lean.nodes["2"].answer_source == "skipped"
    assert [h.passage for h in lean.merged] == [h.passage for h in full.merged]


def test_extractive_answer_prefers_new_entity(env: RetrievalEnv) -> None:
    answer, passage = extractive_answer(
        env.snapshot, [ChunkHit(1, 1.0)], "Who did Steven Spielberg marry?", env.encode
    )
    assert (answer, passage) == ("Kate Capshaw", 1)


def test_prefetch_gets_each_levels_rephrased_queries(env: RetrievalEnv) -> None:
    plan = heuristic_decompose("Who is the spouse of the director of Jaws?")
    asked: list[str] = []

    def fixed(text: str) -> RetrievalResult:
        asked.append(text)
        return RetrievalResult("fixed", [ChunkHit(1, 0.9), ChunkHit(4, 0.8)])

    batches: list[list[str]] = []
    # no sentence of chunks 1 and 4 shares a word with "director" or "jaws": node 1's sentence is the embedding's
    trace = execute_plan(plan, fixed, env.encode, NoneBackend(), env.snapshot, top_k=3, prefetch=batches.append)
    first = trace.nodes["1"].answer
    level0, extractive, level1 = batches[:3]
    assert first and level0 == ["Who is the director of Jaws?"]
    assert level1 == [f"Who is the spouse of {first}?", first]  # the rephrased query, then what reranking reads
    assert asked == [level0[0], level1[0]]
    # node 1's extractive answer: the question and its candidate sentences, then level 1's texts for each
    # candidate answer, the winning one's among them
    assert extractive[0] == level0[0] and "Steven Spielberg married the actress Kate Capshaw in 1991." in extractive
    at = extractive.index(level1[0])
    assert extractive[at : at + 2] == level1 and extractive.count(level1[0]) == 1
    assert all(b[0] != level0[0] for b in batches[3:]), "the leaf answers with no follow-up texts"


def test_a_chain_pays_one_model_pass_per_level(env: RetrievalEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    """With a caching prefetch (the service's), node 1's sentences and level 1's texts share one model pass."""
    plan = heuristic_decompose("Who is the spouse of the director of Jaws?")
    embedder = get_embedder()
    embedder.clear_cache()
    passes: list[int] = []
    plain = embedder._encode

    def counted(texts: list[str], batch_size: int | None = None) -> np.ndarray:
        passes.append(len(texts))
        return plain(texts, batch_size)

    monkeypatch.setattr(embedder, "_encode", counted)
    fixed = lambda text: RetrievalResult("fixed", [ChunkHit(1, 0.9), ChunkHit(4, 0.8)])  # noqa: E731
    trace = execute_plan(plan, fixed, embedder.encode, NoneBackend(), env.snapshot, top_k=3,
                         prefetch=embedder.remember, answer_leaves=False)
    assert trace.nodes["1"].answer and trace.nodes["2"].reranked
    assert len(passes) == 2, passes  # level 0's query; node 1's sentences with level 1's texts (cached after)
    embedder.clear_cache()
    again = execute_plan(plan, fixed, embedder.encode, NoneBackend(), env.snapshot, top_k=3, answer_leaves=False)
    assert again.nodes["1"].answer == trace.nodes["1"].answer
    assert [h["chunk_id"] for h in again.nodes["2"].chunks_after] == [
        h["chunk_id"] for h in trace.nodes["2"].chunks_after]


def test_the_embedding_fallback_embeds_only_the_first_sentences(env: RetrievalEnv, monkeypatch) -> None:
    """A question sharing no word with any sentence: only the first ``SUB_ANSWER_SENTENCES`` are embedded."""
    embedded: list[list[str]] = []

    def counting(texts: list[str]):
        embedded.append(list(texts))
        return env.encode(texts)

    hits = [ChunkHit(1, 1.0), ChunkHit(2, 0.9), ChunkHit(4, 0.8)]
    every = sum(len(sentences(env.snapshot.chunk_texts[h.passage])) for h in hits)
    monkeypatch.setattr(execute, "SUB_ANSWER_SENTENCES", 1)
    answer, passage = extractive_answer(env.snapshot, hits, "Whom did the filmmaker wed?", counting)
    assert every > 1 and embedded == [["Steven Spielberg married the actress Kate Capshaw in 1991."],
                                      ["Whom did the filmmaker wed?"]]  # one sentence, then the question
    assert passage == 1 and answer



def _no_model(texts: list[str]) -> np.ndarray:
    raise AssertionError(f"the lexical choice embedded {texts}")


def test_lexical_sub_answer_runs_no_model_pass(env: RetrievalEnv) -> None:
    """A sentence sharing words with the question is chosen from the words alone, with no model call."""
    hits = [ChunkHit(1, 1.0), ChunkHit(4, 0.9), ChunkHit(0, 0.8)]
    assert extractive_answer(env.snapshot, hits, "Who did Steven Spielberg marry?", _no_model) == ("Kate Capshaw", 1)


def test_lexical_sub_answer_weighs_words_by_idf(env: RetrievalEnv) -> None:
    """Both sentences share three words with the question. Unweighted, the earlier wins; with the store's
    document frequencies, the rare "ferry" outweighs the common "set"."""
    hits = [ChunkHit(0, 1.0), ChunkHit(3, 0.9)]
    question = "Which film is set on Amity Island near the ferry?"
    assert extractive_answer(env.snapshot, hits, question, _no_model)[1] == 0  # "It is set on Amity Island."
    df = {"set": 5, "amity": 2, "island": 2, "ferry": 1, "film": 1}
    asked: list[list[str]] = []

    def word_df(words: list[str]) -> dict[str, int]:
        asked.append(words)
        return {w: df[w] for w in words if w in df}

    answer, passage = extractive_answer(env.snapshot, hits, question, _no_model, word_df=word_df)
    assert passage == 3 and answer == "The Amity Island ferry carries tourists in summer."
    assert asked == [["amity", "ferry", "film", "island", "near", "set"]]  # normalised non-stopwords, one lookup
    weights = execute.idf_weights({"set", "ferry", "near"}, word_df, env.snapshot.n_passages)
    assert weights["near"] > weights["ferry"] > weights["set"] > 0  # "near" is in no chunk: the rarest


def test_lexical_sub_answer_falls_back_to_the_embedding(env: RetrievalEnv) -> None:
    """No sentence shares a word with the question: the sentence most similar to it picks the answer."""
    embedded: list[list[str]] = []

    def counting(texts: list[str]) -> np.ndarray:
        embedded.append(list(texts))
        return env.encode(texts)

    hits = [ChunkHit(2, 1.0), ChunkHit(1, 0.9)]
    question = "Whom did the filmmaker wed?"
    _, passage = extractive_answer(env.snapshot, hits, question, counting)
    cands = [(" ".join(env.snapshot.chunk_texts[h.passage][a:b].split()), h.passage)
             for h in hits for a, b in sentences(env.snapshot.chunk_texts[h.passage])]
    assert embedded == [[c[0] for c in cands], [question]]
    sims = env.encode([c[0] for c in cands]) @ env.encode([question])[0]
    assert passage == cands[int(np.argmax(sims))][1]


def test_plans_reuse_their_node_threads_and_connections(indexed: Any) -> None:
    """Parallel nodes run on one shared pool, so repeated plans open no new store connection (a pool per plan
    opened one per node thread, and kept it until the service closed)."""
    question = "Were Marie Curie and Pierre Curie of the same nationality?"
    first = indexed.retrieve(question, method="pank", top_k=4)
    assert first.info["plan_nodes"] == 3  # two parallel nodes, then the comparison
    for i in range(6):
        assert indexed.retrieve(f"{question} ({i})", method="pank", top_k=4).chunks
    # main, writer, the BM25 build thread, one per pool thread (the pool starts its threads as work needs them)
    assert len(indexed._dbs) <= 3 + execute.MAX_WORKERS


def test_a_pank_table_is_a_clear_error(indexed: Any) -> None:
    """``[retrieval.pank]`` takes no settings (its ``sub_answer`` is gone): a config naming one is not ignored."""
    from pathweaver.service import Pathweaver

    with Pathweaver.open(indexed.settings.store_dir, overrides={"retrieval": {"pank": {"sub_answer": "lexical"}}}
                         ) as pw, pytest.raises(ConfigError, match=r"\[retrieval.pank\] takes no settings.*sub_answer"):
        pw.retrieve("Were Marie Curie and Pierre Curie of the same nationality?", method="pank", top_k=4)


def test_plain_pank_plans_over_the_default_answer_method(indexed: Any) -> None:
    """``pank`` is ``pank:ppr``: its plan retrieves with the method ``ask`` uses, so a question the planner leaves
    whole gets exactly ``ppr``'s chunks, and a planned one the same fused ranking as ``pank:ppr``."""
    from pathweaver.retrieval.registry import ANSWER_METHOD, pank_base

    assert pank_base("pank") == ANSWER_METHOD == "ppr"
    whole = "Who discovered polonium?"
    plain = indexed.retrieve(whole, method="pank", top_k=4)
    assert plain.info["plan_nodes"] == 1
    assert [h.passage for h in plain.chunks] == [h.passage for h in indexed.retrieve(whole, "ppr", 4).chunks]
    planned = "Were Marie Curie and Pierre Curie of the same nationality?"
    fused = indexed.retrieve(planned, method="pank", top_k=4)
    assert fused.info["plan_nodes"] == 3
    assert [h.passage for h in fused.chunks] == [h.passage for h in indexed.retrieve(planned, "pank:ppr", 4).chunks]
