"""Retrieval metrics over ranked chunk titles (passage data sets) and chunk texts (GraphRAG-Bench).

``titles`` is the passage id (document title) of each retrieved chunk, best first. A passage split into several
chunks may appear more than once; the metrics count distinct titles.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from pathweaver.config import ConfigError
from pathweaver.text import STOPWORDS

_TOKEN = re.compile(r"[^\W_]+", re.UNICODE)
_SPACE = re.compile(r"\s+")


def _check_k(k: int) -> None:
    if k < 1:
        raise ConfigError(f"k must be at least 1, got {k}")


def distinct(titles: Sequence[str]) -> list[str]:
    """Titles in first-seen order, without repeats."""
    return list(dict.fromkeys(titles))


def recall_at_k(titles: Sequence[str], gold: Sequence[str], k: int) -> float:
    """Distinct gold titles among the distinct titles of the top-k chunks, over the number of gold titles."""
    _check_k(k)
    gold_set = set(gold)
    if not gold_set:
        raise ConfigError("recall needs at least one gold title")
    return len(gold_set & set(titles[:k])) / len(gold_set)


def all_evidence_at_k(titles: Sequence[str], gold: Sequence[str], k: int) -> float:
    """1.0 when every gold title is among the top-k chunks' titles, else 0.0."""
    _check_k(k)
    return 1.0 if set(gold) <= set(titles[:k]) else 0.0


def mrr(titles: Sequence[str], gold: Sequence[str]) -> float:
    """Reciprocal rank of the first gold title in the distinct-title ranking (0.0 if none is retrieved)."""
    gold_set = set(gold)
    for rank, title in enumerate(distinct(titles), start=1):
        if title in gold_set:
            return 1.0 / rank
    return 0.0


# -- GraphRAG-Bench evidence recall --------------------------------------------------------------------------
@dataclass
class EvidenceMatch:
    """How an evidence sentence is found inside a retrieved chunk.

    Both texts are normalised (case-folded, whitespace collapsed). A sentence is found in a chunk when its
    normalised text is a substring of the chunk's, or when at least ``min_overlap`` of the sentence's distinct
    content tokens (word tokens that are not stopwords) occur in the chunk. The token rule exists because
    GraphRAG-Bench evidence is mostly paraphrased: on a sample, under 1 % of evidence sentences occur verbatim.
    """

    min_overlap: float = 0.6

    def validate(self) -> None:
        if not 0.0 < self.min_overlap <= 1.0:
            raise ConfigError(f"min_overlap must be in (0, 1], got {self.min_overlap}")


def normalize_text(text: str) -> str:
    return _SPACE.sub(" ", text).strip().casefold()


def content_tokens(text: str) -> set[str]:
    return {t for t in _TOKEN.findall(text.casefold()) if t not in STOPWORDS}


def evidence_found(sentence: str, chunk_texts: Sequence[str], rule: EvidenceMatch | None = None) -> bool:
    """Whether one evidence sentence is found inside any of ``chunk_texts`` (see ``EvidenceMatch``)."""
    rule = rule or EvidenceMatch()
    rule.validate()
    needle = normalize_text(sentence)
    if not needle:
        return False
    wanted = content_tokens(sentence)
    for text in chunk_texts:
        if needle in normalize_text(text):
            return True
        if wanted and len(wanted & content_tokens(text)) / len(wanted) >= rule.min_overlap:
            return True
    return False


def evidence_recall(evidence: Sequence[str], chunk_texts: Sequence[str], rule: EvidenceMatch | None = None) -> float:
    """Share of evidence sentences found inside the retrieved chunk texts."""
    sentences = [s for s in evidence if s.strip()]
    if not sentences:
        raise ConfigError("evidence recall needs at least one evidence sentence")
    return sum(evidence_found(s, chunk_texts, rule) for s in sentences) / len(sentences)


# -- answers (SQuAD v1.1 evaluation script: normalize_answer, exact_match_score, f1_score) -------------------
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = frozenset("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")
YES_NO = ("yes", "no")


def normalize_answer(text: str) -> str:
    """SQuAD normalisation: lower case, punctuation removed, articles removed, whitespace collapsed."""
    text = "".join(ch for ch in text.lower() if ch not in _PUNCT)
    return " ".join(_ARTICLES.sub(" ", text).split())


def exact_match(prediction: str, golds: Sequence[str]) -> float:
    """1.0 when the normalised prediction equals a normalised gold answer (any alias)."""
    pred = normalize_answer(prediction)
    return 1.0 if any(pred == normalize_answer(g) for g in golds) else 0.0


def _f1(pred_tokens: list[str], gold_tokens: list[str]) -> float:
    common: dict[str, int] = {}
    for t in pred_tokens:
        common[t] = common.get(t, 0) + 1
    same = 0
    for t in gold_tokens:
        if common.get(t, 0) > 0:
            common[t] -= 1
            same += 1
    if same == 0:
        return 0.0
    precision, recall = same / len(pred_tokens), same / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def token_f1(prediction: str, golds: Sequence[str]) -> float:
    """The best SQuAD token F1 of the prediction against any gold answer."""
    pred = normalize_answer(prediction).split()
    if not golds:
        raise ConfigError("token F1 needs at least one gold answer")
    return max(_f1(pred, normalize_answer(g).split()) for g in golds)


def answer_supported(golds: Sequence[str], chunk_texts: Sequence[str]) -> bool:
    """Whether a gold answer (any alias) appears, as whole normalised words, in one of ``chunk_texts``."""
    wanted = [normalize_answer(g) for g in golds]
    texts = [f" {normalize_answer(t)} " for t in chunk_texts]
    return any(w and f" {w} " in t for w in wanted for t in texts)


def is_yes_no(golds: Sequence[str]) -> bool:
    """A yes/no question: its answer is a judgement, not a string a chunk could contain."""
    return bool(golds) and normalize_answer(golds[0]) in YES_NO
