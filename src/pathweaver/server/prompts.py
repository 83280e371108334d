"""MCP prompts that teach an agent how to use the tools: a cited answer, and step-by-step graph research."""

from __future__ import annotations

from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.prompts.base import Message, UserMessage
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS

ANSWER_WITH_CITATIONS = """Answer this question from my indexed documents: {question}

Use the pathweaver tools:
1. Call `retrieve_paths` (relational paths between the entities, most reliable last) or `build_mcmi`
   (a small reasoning subgraph plus chunks) for the question.
2. Answer only from what they return. Cite every claim with the chunk it comes from, as [file, chunk id,
   characters start-end] taken from the `citations`/`chunks` fields.
3. If the context does not contain the answer, say so instead of guessing.
(`answer` does all of this in one call when you do not need to see the steps.)"""

GRAPH_RESEARCH = """Research this question step by step over the knowledge graph: {question}

1. `decompose_query` -> a DAG of sub-questions with topological `levels`.
2. For each level in order, for each sub-question in it (they are independent of each other):
   a. rewrite it with the answers of the sub-questions it `depends_on`;
   b. call `retrieve_paths` (chains of facts) or `build_mcmi` (several connected facts) for it;
   c. if you have several candidate passages, call `rerank` with `resolved` = the answers it depends on;
   d. write a one-sentence answer with its citation (file, chunk id, span).
3. Combine the sub-answers into the final answer; keep every citation.
Use `get_entity` and `neighbors` to check a name or explore around an entity, and `search` for exact phrases."""


def register_prompts(server: MCPServer) -> None:
    """Add pathweaver's prompts to ``server``."""

    @server.prompt(name="answer_with_citations", title="Answer from the graph with citations")
    def answer_with_citations(question: str) -> list[Message]:
        """Answer a question from the indexed documents, citing file, chunk and span for every claim."""
        return [UserMessage(ANSWER_WITH_CITATIONS.format(question=question))]

    @server.prompt(name="graph_research", title="Step-by-step graph research")
    def graph_research(question: str) -> list[Message]:
        """Decompose -> retrieve -> rerank -> answer, one sub-question at a time, with citations."""
        return [UserMessage(GRAPH_RESEARCH.format(question=question))]


class PromptCheckingServer(MCPServer):
    """``MCPServer`` whose ``prompts/get`` answers an unknown prompt or a missing argument with JSON-RPC -32602
    (invalid params) and a message that names what to send; the SDK raises a bare ``ValueError`` there, which goes
    out as error code 0."""

    async def get_prompt(self, name: str, arguments: dict[str, Any] | None = None, *args: Any, **kwargs: Any) -> Any:
        prompts = {p.name: p for p in await self.list_prompts()}
        prompt = prompts.get(name)
        if prompt is None:
            raise MCPError(code=INVALID_PARAMS, message=f"unknown prompt {name!r}; the prompts are: "
                           f"{', '.join(sorted(prompts))}")
        missing = [a.name for a in prompt.arguments or [] if a.required and a.name not in (arguments or {})]
        if missing:
            raise MCPError(code=INVALID_PARAMS, message=f"prompt {name!r} needs the argument(s): "
                           f"{', '.join(missing)}")
        return await super().get_prompt(name, arguments, *args, **kwargs)
