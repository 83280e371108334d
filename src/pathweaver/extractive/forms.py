"""The form of answer a question's wording asks for, in English: "How do I ...?" asks for an instruction, "How
often ...?" for a frequency, "How soon ...?" for a time. The best sentence may be on the topic without having that
form ("A raw paste inserts all copied text" for "How do I paste without reformatting?"); a close sentence that has
it joins the answer."""

from __future__ import annotations

import re

from pathweaver.extractive.questions import HOW_TO, TIME_UNIT
from pathweaver.extractive.types import Sentence

# verbs that open an instruction in docs and notes ("Open the palette", "Right click the title and select ...")
_VERBS = (
    "go|click|right-click|right click|double-click|tap|press|hold|type|enter|open|close|select|choose|pick|use|"
    "run|add|set|enable|disable|turn|toggle|switch|drag|drop|install|create|write|put|move|copy|paste|navigate|"
    "edit|change|replace|remove|delete|insert|make|check|configure|save|export|import|search|follow|hover|"
    "scroll|define|specify|append|prefix|wrap|mark|assign|upgrade|update|download|visit|try|keep|include|"
    "exclude|link|embed|start|restart|call|invoke|rename|convert|sync|publish|log|sign|pin|tag"
)
# an instruction opens with a verb (after "First," or "Then"), follows a purpose ("To invoke a raw paste, add the
# shift key"), or tells the reader what they can do ("you can cd into the folder")
_INSTRUCTION = re.compile(
    rf"^(?:(?:first|then|next|now|just|simply|finally),?\s+)?(?:{_VERBS})\b"
    rf"|^to\s+[^,.;]{{1,80}},\s*(?:(?:first|then|just|simply)\s+)?(?:{_VERBS}|you)\b"
    r"|\byou\s+(?:can|could|need\s+to|have\s+to|should|must)\s+(?:also\s+|then\s+|just\s+|simply\s+)?\w+",
    re.I,
)
_OFTEN = re.compile(r"\bhow\s+(?:often|frequently)\b", re.I)
_SOON = re.compile(r"\bhow\s+(?:soon|quickly|fast)\b", re.I)
_NUMBER = r"(?:\d[\d,.]*|a|an|one|two|three|four|five|six|seven|eight|nine|ten|a\s+few|a\s+couple\s+of)"
# a time: "within 1 to 2 days", "in a few weeks", "the same day", "immediately"
_TIME = re.compile(rf"\b{_NUMBER}(?:\s*(?:to|-|–|or)\s*{_NUMBER})?\s+{TIME_UNIT}\b|\bsame\s+day\b|"
                   r"\b(?:immediately|instantly|right away|at once)\b", re.I)
# a frequency: "every 12 hours", "daily", "twice a year", "a few times a year", "intervals are 1 - 600 seconds"
_FREQUENCY = re.compile(
    rf"\bevery\s+(?:\d[\d,.]*\s+|few\s+|other\s+|couple\s+of\s+)?{TIME_UNIT}\b"
    r"|\b(?:hourly|daily|nightly|weekly|fortnightly|monthly|quarterly|yearly|annually)\b"
    rf"|\b(?:once|twice|\d+\s+times|(?:a\s+)?(?:few|couple\s+of)\s+times)\s+(?:a|an|per|each|every)\s+{TIME_UNIT}\b"
    rf"|\bper\s+{TIME_UNIT}\b|\binterval\b[^.;]*\d",
    re.I,
)
# a clause before the question's wh-word: "After exporting my pages, how can I try the site?"
_LEAD_CLAUSE = re.compile(r"^[^?]*?,\s+(?=(?:how|where)\b)")
_NEAR = 10  # the form is looked for among this many best answer units


def asked_form(question: str) -> re.Pattern[str] | None:
    """The pattern of the sentences ``question`` asks for: a frequency for "how often", a time for "how soon /
    quickly", an instruction for "how do I / can I / to ..." and "where do I ..."; None for any other question."""
    q = " ".join(question.split())
    if _OFTEN.search(q):
        return _FREQUENCY
    if _SOON.search(q):
        return _TIME
    if HOW_TO.match(_LEAD_CLAUSE.sub("", q.lower())):
        return _INSTRUCTION
    return None


def form_sentence(question: str, answers: list[Sentence], min_sim: float) -> Sentence | None:
    """The best of the ``_NEAR`` best answer units that has the form ``question`` asks for and is at least
    ``min_sim`` similar to it (on its topic), when the best one does not have that form; None when the question
    asks no form, the best unit has it, or none of them does."""
    form = asked_form(question)
    if form is None or not answers or form.search(answers[0].text):
        return None
    return next((s for s in answers[1:_NEAR] if form.search(s.text) and s.sim >= min_sim), None)
