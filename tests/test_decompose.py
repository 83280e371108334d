"""Plan validation (DAG checks, Kahn levels), rephrasing, the heuristic planner's shapes, and decompose() with LLM
success and fallbacks. Agreement with MuSiQue's gold decompositions is a measurement: ``bench/plan_agreement.py``."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from pathweaver.models.llm import NoneBackend
from pathweaver.models.llm_sampling import SamplingBackend
from pathweaver.planner.decompose import PlanError, decompose, rephrase, validate_plan
from pathweaver.planner.heuristic import heuristic_decompose, is_conjunction


def test_valid_plan_levels_and_order() -> None:
    plan = validate_plan(
        {
            "nodes": [
                {"id": "a", "question": "When was X born?", "depends_on": []},
                {"id": "b", "question": "When was Y born?", "depends_on": [], "relation": "parallel"},
                {
                    "id": "c",
                    "question": "Who is older, #a or #b?",
                    "depends_on": ["a", "b"],
                    "relation": "progress",
                },
                {"id": "d", "question": "Where was #c born?", "depends_on": ["c"]},
            ]
        }
    )
    assert plan.levels == [["a", "b"], ["c"], ["d"]]
    assert plan.order == ["a", "b", "c", "d"] and plan.final == "d"
    assert plan.node("d").relation == "progress"  # inferred from depends_on
    assert plan.to_dict()["nodes"][2]["depends_on"] == ["a", "b"]


@pytest.mark.parametrize(
    ("nodes", "message"),
    [
        (
            [
                {"id": "1", "question": "q1", "depends_on": ["3"]},
                {"id": "2", "question": "q2", "depends_on": ["1"]},
                {"id": "3", "question": "q3", "depends_on": ["2"]},
            ],
            "cycle: 1 -> 3 -> 2 -> 1",
        ),
        ([{"id": "1", "question": "q1", "depends_on": ["9"]}], "depends on unknown node '9'"),
        ([{"id": "1", "question": "q1", "depends_on": ["1"]}], "depends on itself"),
        ([{"id": "1", "question": "  ", "depends_on": []}], "empty question"),
        ([{"id": "1", "question": "a"}, {"id": "1", "question": "b"}], "duplicate node id '1'"),
        ([{"id": "1", "question": "a", "relation": "sideways"}], "relation must be"),
        ([], "non-empty list"),
    ],
)
def test_invalid_plans(nodes: list[dict[str, Any]], message: str) -> None:
    with pytest.raises(PlanError, match=re.escape(message)):
        validate_plan({"nodes": nodes})


def test_too_many_nodes() -> None:
    nodes = [{"id": str(i), "question": f"q{i}"} for i in range(4)]
    with pytest.raises(PlanError, match="4 nodes; at most 3"):
        validate_plan(nodes, max_nodes=3)


def test_rephrase_placeholders_and_given() -> None:
    assert (
        rephrase("Who is the spouse of #1?", {"1": "Steven Spielberg"})
        == "Who is the spouse of Steven Spielberg?"
    )
    assert rephrase("Who is older?", {"a": "1901", "b": "1899"}, ["a", "b"]) == (
        "Who is older? (given: #a = 1901; #b = 1899)"
    )
    assert rephrase("Where is #2?", {}) == "Where is #2?"  # unresolved stays visible


def test_heuristic_shapes() -> None:
    comp = heuristic_decompose("Which film came out first, Jaws or Star Wars?")
    assert [n.depends_on for n in comp.nodes] == [[], [], ["1", "2"]]
    assert "Jaws" in comp.nodes[0].question and "Star Wars" in comp.nodes[1].question
    both = heuristic_decompose("Are Kate Capshaw and Amy Irving both American actresses?")
    assert both.nodes[0].question == "Is Kate Capshaw American actresses?" and both.levels == [
        ["1", "2"],
        ["3"],
    ]
    same = heuristic_decompose("Were Scott Derrickson and Ed Wood of the same nationality?")
    assert [n.question for n in same.nodes[:2]] == [
        "What is the nationality of Scott Derrickson?",
        "What is the nationality of Ed Wood?",
    ]
    assert same.levels == [["1", "2"], ["3"]]
    chain = heuristic_decompose("Who is the spouse of the director of film Jaws?")
    assert [n.question for n in chain.nodes] == [
        "Who is the director of film Jaws?",
        "Who is the spouse of #1?",
    ]
    assert chain.nodes[1].relation == "progress" and chain.source == "heuristic"
    where = heuristic_decompose("What is the capital of the country where Marie Curie was born?")
    assert len(where.nodes) == 2 and where.nodes[1].question == "What is the capital of #1?"
    assert where.nodes[0].question == "What is the country where Marie Curie was born?"
    single = heuristic_decompose("When was Marie Curie born?")
    assert len(single.nodes) == 1 and single.source == "single"


def _shape(question: str) -> list[tuple[str, list[str]]]:
    return [(n.question, n.depends_on) for n in heuristic_decompose(question).nodes]


def test_heuristic_conjunction() -> None:
    # the demo question: "he" is the first part's answer, so the second part waits for it
    assert _shape("Who warned Scrooge that three spirits would visit him, and what had he been to Scrooge?") == [
        ("Who warned Scrooge that three spirits would visit him?", []),
        ("What had #1 been to Scrooge?", ["1"]),
    ]
    # a pronoun naming the first part's subject is filled in; the parts are parallel
    assert _shape("When was Marie Curie born, and where did she die?") == [
        ("When was Marie Curie born?", []),
        ("Where did Marie Curie die?", []),
    ]
    assert is_conjunction("When was Marie Curie born, and where did she die?")
    assert not is_conjunction("Where was the director of film Jaws born?")
    # a part may be a yes/no question
    assert _shape("Does Sync keep version history, and how do I restore a file?") == [
        ("Does Sync keep version history?", []),
        ("How do I restore a file?", []),
    ]
    # what a user writes before asking stays with the first part; a list of three questions asks three things
    assert _shape("I can't find whiteboards in my sidebar. Where do I switch them on, and what's the key for "
                  "the settings?") == [("I can't find whiteboards in my sidebar. Where do I switch them on?", []),
                                       ("What's the key for the settings?", [])]
    assert _shape("Can I write my own plugin, where are the developer docs, and will plugins work on my phone?") == [
        ("Can I write my own plugin?", []), ("Where are the developer docs?", []), ("Will plugins work on my phone?", [])]
    # a phrase before the first question is no question of its own
    assert _shape("How does the research, plan, implement loop relate to a spec, and how old are specs?") == [
        ("How does the research, plan, implement loop relate to a spec?", []), ("How old are specs?", [])]
    assert _shape("When a maintainer has to pick, what do our guidelines favour, and how often should we rest?") == [
        ("When a maintainer has to pick, what do our guidelines favour?", []), ("How often should we rest?", [])]
    assert not is_conjunction("I turned on the HTTP API. Which port is it listening on by default?")


def test_heuristic_asks_for_the_thing_itself() -> None:
    # an apposition describes the asked thing further: no hop for it
    assert _shape("Who was Scrooge's business partner, dead seven years on Christmas Eve?") == [
        ("Who was Scrooge's business partner, dead seven years on Christmas Eve?", [])]
    # "whose" asks for the owner of the object: not "Who did Scrooge see?" then "Whose face is #1?"
    assert _shape("Whose face did Scrooge see in the knocker?") == [("Whose face did Scrooge see in the knocker?", [])]


def test_heuristic_comparisons() -> None:
    born = heuristic_decompose("Who was born first, Hywel Teifi Edwards or Felix Schuster?")
    assert born.levels == [["1", "2"], ["3"]]
    assert "Hywel Teifi Edwards" in born.nodes[0].question and "Felix Schuster" in born.nodes[1].question
    came = heuristic_decompose("Which came first, Jaws or Star Wars?")
    assert [n.depends_on for n in came.nodes] == [[], [], ["1", "2"]]
    both = heuristic_decompose("Are Local H and For Against both from the United States?")
    assert [n.question for n in both.nodes[:2]] == [
        "Is Local H from the United States?", "Is For Against from the United States?"]


def test_heuristic_bridges_and_nesting() -> None:
    assert _shape("Where was the director of film The Private Life Of Cinema born?") == [
        ("Who is the director of film The Private Life Of Cinema?", []),
        ("Where was #1 born?", ["1"]),
    ]
    assert _shape("What did the actress in My Fair Lady win a Tony for?") == [
        ("Who is the actress in My Fair Lady?", []),
        ("What did #1 win a Tony for?", ["1"]),
    ]
    assert _shape("Whose sister played Susie in miracle on 34th street?") == [
        ("Who played Susie in miracle on 34th street?", []),
        ("Whose sister is #1?", ["1"]),
    ]
    # three hops (MuSiQue): innermost first, the generic "name of" is not a hop
    three = _shape("What is the name of the castle found in the birthplace of the performer of Falling Out?")
    assert three == [
        ("Who is the performer of Falling Out?", []),
        ("What is the birthplace of #1?", ["1"]),
        ("What is the name of the castle found in #2?", ["2"]),
    ]
    four = heuristic_decompose("When did the political party that holds the majority in the political body that "
                               "passed a bill giving regulators discretion to prohibit proprietary trades, gain "
                               "control of the House?")
    assert [n.depends_on for n in four.nodes] == [[], ["1"], ["2"]]


def test_heuristic_simple_stays_one_node() -> None:
    for q in ("When was Marie Curie born?", "What is the capital of Poland?", "Who wrote A Christmas Carol?",
              "What was the name of Scrooge's clerk?",
              # a name modifying the noun after it names no bridge: the trip, the vault are what is asked about
              "What was the total cost of the Lisbon trip?", "How big is the attachment folder of the Obsidian vault?",
              # "What's" is "what is", and a quote closing a title is no possessive
              "What's my biggest gripe about the online degree?",
              "Will a file called 'Notes from Jan 4 2024' still get a date?",
              # "Who will be #1?" asks nothing beyond #1
              "Who will be the project leader in 2027?"):
        assert len(heuristic_decompose(q).nodes) == 1, q
    # a past participle after a possessive is the verb, a preposition after a name starts a phrase of its own
    assert _shape("Where was the Smiths' album recorded?")[0] == ("What is the album of Smiths?", [])
    assert _shape("Who is the leader of the Holy Roman Empire during the Thirty Years War?")[0] == (
        "Who is the leader of the Holy Roman Empire?", [])


def test_heuristic_conjunction_names_whole_words() -> None:
    # "it" stands for Homebrew, not for the "OS" inside "macOS"; "I" is no name for "it" to stand for
    assert _shape("What's the oldest macOS Homebrew installs on, and why won't it run under sudo?")[1] == (
        "Why won't Homebrew run under sudo?", [])
    assert _shape("Which tool did I turn into a skill, and what other skill did I make for it?")[1] == (
        "What other skill did I make for it?", [])


def test_decompose_llm_and_fallbacks() -> None:
    good = {
        "nodes": [
            {"id": "1", "question": "Who directed Jaws?", "depends_on": [], "relation": "parallel"},
            {"id": "2", "question": "Who is the spouse of #1?", "depends_on": ["1"], "relation": "progress"},
        ]
    }
    llm = SamplingBackend(lambda m, n, t: (json.dumps(good), "client"))
    plan, trace = decompose("Who is the spouse of the director of Jaws?", llm)
    assert plan.source == "llm" and trace["source"] == "llm" and plan.levels == [["1"], ["2"]]

    cyclic = {"nodes": [{**good["nodes"][0], "depends_on": ["2"]}, good["nodes"][1]]}
    llm = SamplingBackend(lambda m, n, t: (json.dumps(cyclic), "client"))
    plan, trace = decompose("Who is the spouse of the director of Jaws?", llm)
    assert plan.source == "heuristic" and "cycle" in trace["fallback"]

    plan, trace = decompose("Who is the spouse of the director of Jaws?", NoneBackend())
    assert plan.source == "heuristic" and "no LLM configured" in trace["fallback"]

    caller = decompose("anything", NoneBackend(), plan=good)[0]
    assert caller.source == "caller" and len(caller.nodes) == 2
    with pytest.raises(PlanError):
        decompose(
            "anything", NoneBackend(), plan={"nodes": [{"id": "1", "question": "x", "depends_on": ["1"]}]}
        )
