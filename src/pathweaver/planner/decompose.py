"""Query plans (PankRAG §2.2): a question becomes a DAG of sub-questions with parallel and progress relations,
executed in topological levels. Placeholders ``#1``/``#id`` in a sub-question stand for a dependency's answer
(MuSiQue's ``question_decomposition`` format); ``rephrase`` fills them in top-down.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from pathweaver.errors import UserError
from pathweaver.models.llm import LLMBackend, LLMError
from pathweaver.models.schemas import MAX_PLAN_NODES, PLAN_SCHEMA
from pathweaver.results import PlanNodeOut, PlanOut, dump

Relation = Literal["parallel", "progress"]
Source = Literal["caller", "llm", "heuristic", "single"]
RELATIONS = ("parallel", "progress")
DEFAULT_MAX_NODES = 8  # caller plans may be larger than what we ask a model for (MAX_PLAN_NODES)
PLAN_MAX_TOKENS = 400

PLAN_PROMPT = """Split the question into the smallest set of sub-questions needed to answer it (at most {n}).
Use "progress" when a sub-question needs an earlier answer: list that id in depends_on and write "#<id>" where
the answer goes. Use "parallel" for independent sub-questions. The last sub-question answers the whole question.
A simple question is one node. Ids are "1", "2", ...

Example: "Who is the spouse of the director of Jaws?" ->
{{"nodes": [{{"id": "1", "question": "Who is the director of Jaws?", "depends_on": [], "relation": "parallel"}},
{{"id": "2", "question": "Who is the spouse of #1?", "depends_on": ["1"], "relation": "progress"}}]}}

Question: {question}"""


class PlanError(UserError, ValueError):
    """A plan is not a valid DAG of sub-questions; the message says what to fix."""


@dataclass
class PlanNode:
    id: str
    question: str
    depends_on: list[str] = field(default_factory=list)
    relation: Relation = "parallel"


@dataclass
class Plan:
    nodes: list[PlanNode]
    levels: list[list[str]]
    order: list[str]
    source: Source = "caller"

    def node(self, node_id: str) -> PlanNode:
        for n in self.nodes:
            if n.id == node_id:
                return n
        raise KeyError(node_id)

    @property
    def final(self) -> str:
        """The node that answers the whole question: the last one in topological order."""
        return self.order[-1]

    def to_out(self, **more: Any) -> PlanOut:
        """The plan as ``results.PlanOut`` (``more``: its ``trace``)."""
        return PlanOut.model_construct(nodes=[PlanNodeOut.model_construct(**asdict(n)) for n in self.nodes],
                                       levels=[list(lv) for lv in self.levels], order=list(self.order),
                                       source=self.source, **more)

    def to_dict(self) -> dict[str, Any]:
        return dump(self.to_out())


def _node(raw: Any, i: int) -> PlanNode:
    if not isinstance(raw, dict):
        raise PlanError(f"node {i} must be an object with id, question, depends_on, relation")
    node_id = str(raw.get("id", "")).strip()
    if not node_id:
        raise PlanError(f"node {i} has no id")
    question = str(raw.get("question") or "").strip()
    if not question:
        raise PlanError(f"node {node_id!r} has an empty question")
    deps = raw.get("depends_on") or []
    if isinstance(deps, str):
        deps = [deps]
    if not isinstance(deps, list):
        raise PlanError(f"node {node_id!r}: depends_on must be a list of node ids")
    relation = raw.get("relation") or ("progress" if deps else "parallel")
    if relation not in RELATIONS:
        raise PlanError(f"node {node_id!r}: relation must be 'parallel' or 'progress', not {relation!r}")
    return PlanNode(node_id, question, [str(d).strip() for d in deps], relation)


def _find_cycle(nodes: dict[str, PlanNode], remaining: set[str]) -> list[str]:
    """One cycle among ``remaining`` (nodes Kahn could not place), as a list of ids that closes on itself."""
    start = sorted(remaining)[0]
    seen: list[str] = []
    cur = start
    while cur not in seen:
        seen.append(cur)
        cur = next(d for d in nodes[cur].depends_on if d in remaining)
    return [*seen[seen.index(cur) :], cur]


def validate_plan(
    obj: dict[str, Any] | list[Any], max_nodes: int = DEFAULT_MAX_NODES, source: Source = "caller"
) -> Plan:
    """Check ``{nodes: [...]}`` (or a bare list of nodes) and compute topological levels (Kahn's algorithm).

    Rejects duplicate ids, empty questions, unknown and self dependencies, cycles (naming one) and plans with more
    than ``max_nodes`` nodes."""
    raw_nodes = obj.get("nodes") if isinstance(obj, dict) else obj
    if not isinstance(raw_nodes, list) or not raw_nodes:
        raise PlanError(
            "a plan needs a non-empty list of nodes: {nodes: [{id, question, depends_on, relation}]}"
        )
    if len(raw_nodes) > max_nodes:
        raise PlanError(f"the plan has {len(raw_nodes)} nodes; at most {max_nodes} are allowed")
    nodes = [_node(r, i) for i, r in enumerate(raw_nodes)]
    by_id: dict[str, PlanNode] = {}
    for n in nodes:
        if n.id in by_id:
            raise PlanError(f"duplicate node id {n.id!r}")
        by_id[n.id] = n
    for n in nodes:
        for d in n.depends_on:
            if d == n.id:
                raise PlanError(f"node {n.id!r} depends on itself")
            if d not in by_id:
                raise PlanError(f"node {n.id!r} depends on unknown node {d!r}")
        n.depends_on = list(dict.fromkeys(n.depends_on))
    indegree = {n.id: len(n.depends_on) for n in nodes}
    levels: list[list[str]] = []
    ready = [n.id for n in nodes if indegree[n.id] == 0]
    while ready:
        levels.append(ready)
        nxt = []
        for n in nodes:
            if n.id in indegree and indegree[n.id] > 0:
                indegree[n.id] -= sum(1 for d in n.depends_on if d in ready)
                if indegree[n.id] == 0:
                    nxt.append(n.id)
        ready = nxt
    placed = {i for lv in levels for i in lv}
    if len(placed) < len(nodes):
        cycle = _find_cycle(by_id, set(by_id) - placed)
        raise PlanError(f"the plan has a cycle: {' -> '.join(cycle)}")
    return Plan(nodes=nodes, levels=levels, order=[i for lv in levels for i in lv], source=source)


def single_plan(question: str) -> Plan:
    return validate_plan([{"id": "1", "question": question, "depends_on": []}], source="single")


_PLACEHOLDER = re.compile(r"#(\w+)")


def rephrase(question: str, resolved: dict[str, str], depends_on: list[str] | None = None) -> str:
    """Top-down rephrase (PankRAG §2.2): replace ``#id`` placeholders with resolved answers; dependencies that
    have no placeholder are appended as ``(given: #id = answer)``."""
    used: set[str] = set()

    def sub(m: re.Match[str]) -> str:
        key = m.group(1)
        if key in resolved and resolved[key]:
            used.add(key)
            return resolved[key]
        return m.group(0)

    text = _PLACEHOLDER.sub(sub, question)
    extra = [
        d
        for d in (depends_on if depends_on is not None else list(resolved))
        if d not in used and resolved.get(d)
    ]
    if extra:
        text = f"{text} (given: {'; '.join(f'#{d} = {resolved[d]}' for d in extra)})"
    return text


def decompose(
    question: str, llm: LLMBackend, plan: dict[str, Any] | list[Any] | None = None, timeout: float = 60.0
) -> tuple[Plan, dict[str, Any]]:
    """A plan for ``question``: the caller's (validated; errors raise), else the LLM's (JSON schema, bounded to
    ``MAX_PLAN_NODES``), else ``heuristic_decompose`` when the model is absent, fails or returns an invalid DAG."""
    from pathweaver.planner.heuristic import heuristic_decompose

    question = (question or "").strip()
    if not question:
        raise PlanError("the question is empty")
    if plan is not None:
        return validate_plan(plan), {"source": "caller"}
    trace: dict[str, Any] = {"backend": getattr(llm, "name", "?")}
    messages = [{"role": "user", "content": PLAN_PROMPT.format(n=MAX_PLAN_NODES, question=question)}]
    try:
        result = llm.complete(messages, json_schema=PLAN_SCHEMA, max_tokens=PLAN_MAX_TOKENS, timeout=timeout)
        built = validate_plan(result.data, max_nodes=MAX_PLAN_NODES, source="llm")
        trace.update(
            source="llm",
            model=result.model,
            prompt_tokens=result.prompt_tokens,
            completion_tokens=result.completion_tokens,
        )
        return built, trace
    except (LLMError, PlanError) as exc:
        trace.update(source="heuristic", fallback=f"{type(exc).__name__}: {exc}")
    return heuristic_decompose(question), trace
