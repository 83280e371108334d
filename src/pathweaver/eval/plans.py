"""Agreement of plans with MuSiQue's gold ``question_decomposition``: node count, dependency structure (the two DAGs
are the same up to a renumbering of their nodes), and exact shape (the same edges with the nodes in the same order)."""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Sequence
from typing import Any

from pathweaver.eval.datasets import Question
from pathweaver.planner.decompose import Plan

Edges = frozenset[tuple[int, int]]
MAX_PERMUTED = 7  # isomorphism by brute force; plans are at most this many nodes


def gold_edges(decomposition: Sequence[dict[str, Any]]) -> tuple[int, Edges]:
    """(node count, edges dep -> node) of a gold decomposition; "#k" in step i+1 is an edge k -> i+1."""
    edges = set()
    for i, step in enumerate(decomposition):
        for ref in re.findall(r"#(\d+)", str(step.get("question", ""))):
            if 1 <= int(ref) <= i:
                edges.add((int(ref), i + 1))
    return len(decomposition), frozenset(edges)


def plan_edges(plan: Plan) -> tuple[int, Edges]:
    """(node count, edges dep -> node) of a plan, nodes numbered by their order in the plan."""
    index = {n.id: i + 1 for i, n in enumerate(plan.nodes)}
    return len(plan.nodes), frozenset((index[d], index[n.id]) for n in plan.nodes for d in n.depends_on)


def same_structure(a: tuple[int, Edges], b: tuple[int, Edges]) -> bool:
    """The two DAGs are isomorphic (equal node counts and some renumbering maps one edge set onto the other)."""
    (n, ea), (m, eb) = a, b
    if n != m or len(ea) != len(eb):
        return False
    if n > MAX_PERMUTED:
        return ea == eb
    for perm in itertools.permutations(range(1, n + 1)):
        mapping = dict(zip(range(1, n + 1), perm, strict=True))
        if frozenset((mapping[x], mapping[y]) for x, y in ea) == eb:
            return True
    return False


def agreement(questions: Sequence[Question], planner: Callable[[str], Plan]) -> dict[str, Any]:
    """Node-count and structure agreement of ``planner`` with each question's gold decomposition."""
    rows = []
    for q in questions:
        if not q.decomposition:
            continue
        gold = gold_edges(q.decomposition)
        mine = plan_edges(planner(q.text))
        rows.append({"index": q.index, "question": q.text, "gold_nodes": gold[0], "nodes": mine[0],
                     "count_agrees": gold[0] == mine[0], "structure_agrees": same_structure(gold, mine),
                     "shape_agrees": gold == mine})
    n = len(rows) or 1
    return {
        "n_questions": len(rows),
        "node_count_agreement": sum(r["count_agrees"] for r in rows) / n,
        "structure_agreement": sum(r["structure_agrees"] for r in rows) / n,
        "shape_agreement": sum(r["shape_agrees"] for r in rows) / n,
        "rows": rows,
    }
