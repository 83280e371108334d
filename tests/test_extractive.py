"""The extractive answer: each question shape on short real passages (2WikiMultihopQA / HotpotQA style), and on
the indexed test corpus with the real embedder and retrieval."""

from __future__ import annotations

from pathweaver.extractive import extractive_answer
from pathweaver.extractive.questions import answer_type, options
from pathweaver.retrieval.context import build_context

LOTHAIR = [
    "Lothair II\nLothair II (835 – 8 August 869) was the king of Lotharingia. He was the son of Emperor Lothair I "
    "and Ermengarde of Tours.",
    "Ermengarde of Tours\nErmengarde of Tours (d. 20 March 851) was the wife of the Carolingian Emperor Lothair I.",
]
SUMMERS = [
    "Aivar Kuusmaa\nAivar Kuusmaa (born 15 July 1960) is an Estonian musician.",
    "Andy Summers\nAndrew James Somers (born 31 December 1942), known as Andy Summers, is an English guitarist.",
]


def test_answer_types() -> None:
    assert answer_type("When did Lothair II's mother die?") == "date"
    assert answer_type("Where was the director of film Blood Street born?") == "place"
    assert answer_type("Who is the spouse of the director of Jaws?") == "person"
    assert answer_type("How many people can the arena seat?") == "number"
    assert answer_type("What nationality is the director of film Blood Street?") == "nationality"
    assert answer_type("Are Marufabad and Nasamkhrali both located in the same country?") == "yesno"
    assert answer_type("Which film came out first, 3 Dots or Dying God?") == "choice"
    # a rephrased sub-question puts the copula and article before its head noun
    assert answer_type("What is the city located within Pima County?") == "place"
    assert answer_type("What was the composer of the Age of Reason?") == "person"
    assert answer_type("What is the name of the band?") == "other"
    assert options("Who was born first out of Aivar Kuusmaa and Andy Summers?") == ["Aivar Kuusmaa", "Andy Summers"]
    assert options("Which dog's ancestors include Gordon Setters: the Manchester Terrier or the Scotch Collie?") == [
        "Manchester Terrier", "Scotch Collie"]


MARLEY = [
    "Ebenezer Scrooge\nOn Christmas Eve the ghost of Jacob Marley warns him that three spirits will visit him.",
    "Jacob Marley\nJacob Marley was the business partner of Ebenezer Scrooge for many years.",
]


def test_who_is_never_a_day_and_a_role_answers_what_someone_was_to_another() -> None:
    assert extractive_answer("Who warned Scrooge that three spirits would visit him?", MARLEY) == (
        "Jacob Marley", [1])
    assert answer_type("What had Jacob Marley been to Scrooge?") == "relation"
    assert extractive_answer("What had Jacob Marley been to Scrooge?", MARLEY) == ("the business partner", [2])


def test_when_span_and_citation() -> None:
    text, cites = extractive_answer("When was Aivar Kuusmaa born?", SUMMERS)
    assert (text, cites) == ("15 July 1960", [1])


def test_bridge_answered_hop_by_hop() -> None:
    # hop 1 finds the mother in chunk 1, hop 2 her death date in chunk 2; both chunks are cited
    text, cites = extractive_answer("When did Lothair II's mother die?", LOTHAIR)
    assert text == "20 March 851" and cites == [1, 2]


def test_where_prefers_the_cued_place() -> None:
    chunk = ["Scott Derrickson\nScott Derrickson (born July 16, 1966) is an American director. He was born in "
             "Denver, Colorado and lives in Los Angeles."]
    assert extractive_answer("Where was Scott Derrickson born?", chunk)[0].startswith("Denver")


def test_what_year_asks_for_the_year_alone() -> None:
    chunk = ["Acornsoft\nAcornsoft was the software arm of Acorn Computers. It ceased trading in January 1986."]
    assert extractive_answer("What year did Acornsoft end?", chunk) == ("1986", [1])
    assert extractive_answer("When did Acornsoft end?", chunk)[0] == "January 1986"


def test_a_nationality_names_no_one() -> None:
    ryder = ["Falling Out (Serena Ryder song)\nFalling Out is a song by Canadian singer Serena Ryder."]
    assert extractive_answer("Who is the performer of Falling Out?", ryder)[0] == "Serena Ryder"


def test_choice_compares_dates() -> None:
    assert extractive_answer("Who was born first, Aivar Kuusmaa or Andy Summers?", SUMMERS) == ("Andy Summers", [2])
    assert extractive_answer("Who was born later, Aivar Kuusmaa or Andy Summers?", SUMMERS)[0] == "Aivar Kuusmaa"
    films = ["Jaws (film)\nJaws is a 1975 American thriller film directed by Steven Spielberg.",
             "Star Wars (film)\nStar Wars is a 1977 American epic space opera film written and directed by George "
             "Lucas."]
    assert extractive_answer("Which film came out first, Jaws or Star Wars?", films)[0] == "Jaws"
    # the comparison of a plan: the sub-answers (release years) decide
    assert extractive_answer("Which film came out first, Jaws or Star Wars?", films,
                             resolved={"1": "1975", "2": "1977"})[0] == "Jaws"


def test_yes_no_same_country() -> None:
    chunks = ["Scott Derrickson\nScott Derrickson (born July 16, 1966) is an American director.",
              "Ed Wood\nEdward Davis Wood Jr. (October 10, 1924 – December 10, 1978) was an American filmmaker."]
    assert extractive_answer("Were Scott Derrickson and Ed Wood of the same nationality?", chunks)[0] == "yes"
    chunks[1] = "Ed Wood\nEd Wood (born 1950) is a British painter."
    assert extractive_answer("Were Scott Derrickson and Ed Wood of the same nationality?", chunks)[0] == "no"


def test_no_chunks_no_answer() -> None:
    assert extractive_answer("Who wrote it?", []) == ("", [])


def test_on_the_indexed_corpus_with_the_embedder(indexed) -> None:  # type: ignore[no-untyped-def]
    env = indexed.env()
    result = indexed.retrieve("Where was Marie Curie born?", method="hybrid", top_k=3)
    context = build_context(env.snapshot, result, "chunks", max_items=3)
    text, cites = extractive_answer("Where was Marie Curie born?", context, env.encode)
    assert text == "Warsaw"
    cited = [c for c in context.citations if c["n"] in cites]
    assert cited and all("marie-curie" in c["doc"] for c in cited)
