"""Proper-name mentions: the n-gram entities a passage writes as a name, for PPR's phrase nodes (issue 23).

HippoRAG 2 (§3, "offline indexing") links every passage to the phrase nodes it contains, so two passages that both
write "Jane Siberry" meet at her node even when no document is titled so. The statistical n-gram vocabulary
already holds most such names ("jane siberry", "toronto"), but among verb phrases ("directed by the"), and its
Contains edges only where the extractor kept the gram. Here a passage mentions an ``ngram`` entity when it writes
that entity as a *capitalised run* (every word capitalised, lower-case stopwords only inside: "Jane Siberry", "Lord
of the Rings"), longest leftmost match first among all entity names (a title matched whole mentions nothing here). An entity counts as a proper name once it is seen capitalised
inside a clause somewhere, or has several words, so a capital that only starts a sentence ("Born in ...") makes
no name. Titles and aliases stay in the name layer. Read from the snapshot's chunk texts; nothing is indexed.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from pathweaver.extract.entities import WORD_RE, WordSpan, joins, norm_word
from pathweaver.store.snapshot import GraphSnapshot
from pathweaver.text import STOPWORDS

MAX_WORDS = 4  # longest name looked up (the n-gram vocabulary holds up to 3 words; AGRAG §III-B)
# lower-case words that may stand inside one name ("Lord of the Rings", "Leonardo da Vinci"); "and", "in" join two
# capitalised words of the calendar name dates, not things: "born 5 June 1975" in two passages links nothing
CALENDAR = frozenset({"january", "february", "march", "april", "may", "june", "july", "august", "september",
                      "october", "november", "december", "monday", "tuesday", "wednesday", "thursday", "friday",
                      "saturday", "sunday"})
CONNECTORS = frozenset({"of", "the", "de", "da", "di", "du", "des", "del", "la", "le", "von", "van", "der", "den"})


def capital_runs(text: str) -> list[list[WordSpan]]:
    """Maximal runs of words joined by spaces whose words start with a capital, lower-case ``CONNECTORS``
    allowed only between two capitalised words (the words of ``word_spans``)."""
    runs: list[list[WordSpan]] = []
    current: list[WordSpan] = []
    pending: list[WordSpan] = []  # lower-case connectors after the run, kept if a capitalised word follows
    prev_end = -1
    # the tokens of ``word_spans``, but a lower-case word outside a run is skipped unread (most words; a cold query
    # builds this matrix)
    for m in WORD_RE.finditer(text):
        start, end = m.span()
        upper = text[start].isupper()
        if upper or current:
            joined = prev_end >= 0 and joins(text[prev_end:start])
            if not joined and current:
                runs.append(current)
                current, pending = [], []
            span = WordSpan(start, end, norm_word(m.group()), joined)
            if upper:
                current.extend(pending)
                pending = []
                current.append(span)
            elif current and span.word in CONNECTORS:
                pending.append(span)
            elif current:
                runs.append(current)
                current, pending = [], []
        prev_end = end
    if current:
        runs.append(current)
    return runs


def _matches(run: list[WordSpan], vocabulary: dict[str, int]) -> list[tuple[int, int]]:
    """(entity, first word of the match in ``run``): longest leftmost vocabulary matches inside ``run``."""
    out: list[tuple[int, int]] = []
    i = 0
    while i < len(run):
        for n in range(min(MAX_WORDS, len(run) - i), 0, -1):
            part = run[i:i + n]
            if part[0].word in STOPWORDS or part[-1].word in STOPWORDS:
                continue
            ent = vocabulary.get(" ".join(s.word for s in part))
            if ent is not None:
                out.append((ent, i))
                i += n
                break
        else:
            i += 1
    return out


def proper_mentions(snapshot: GraphSnapshot) -> sp.csr_matrix:
    """(P, E) mention counts of the ``ngram`` entities each passage writes as a proper name (module docstring)."""
    n_p, n_e = snapshot.n_passages, snapshot.n_entities
    kinds = snapshot.entity_kinds
    # every entity is looked up, so a title ("United States") is matched whole and its words make no n-gram name
    vocabulary = {name: e for name, e in snapshot.entity_index.items()
                  if name not in STOPWORDS and name not in CALENDAR}
    found: list[tuple[int, int, bool]] = []  # (passage, entity, written inside a clause or with several words)
    for p, text in enumerate(snapshot.chunk_texts):
        for run in capital_runs(text):
            for ent, i in _matches(run, vocabulary):
                if kinds and kinds[ent] != "ngram":
                    continue
                inside = i > 0 or run[0].joined or " " in snapshot.entity_names[ent]
                found.append((p, ent, inside))
    if not found:
        return sp.csr_matrix((n_p, n_e), dtype=np.float64)
    rows = np.fromiter((f[0] for f in found), dtype=np.int64, count=len(found))
    cols = np.fromiter((f[1] for f in found), dtype=np.int64, count=len(found))
    named = np.zeros(n_e, dtype=bool)
    named[cols[np.fromiter((f[2] for f in found), dtype=bool, count=len(found))]] = True
    keep = named[cols]
    counts = sp.coo_matrix((np.ones(int(keep.sum())), (rows[keep], cols[keep])), shape=(n_p, n_e)).tocsr()
    counts.sum_duplicates()
    # a name only one passage writes joins nothing; its edge would only hand that passage's mass back to it
    shared = np.diff(counts.tocsc().indptr) >= 2
    counts = (counts @ sp.diags(shared.astype(np.float64))).tocsr()
    counts.eliminate_zeros()
    return counts
