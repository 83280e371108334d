"""MCP resources: the document list, a document's chunks, entity cards, store stats, and a question's visual view.

All read from the store through the service (never from the file system), so they expose only what is indexed.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import anyio.to_thread
from mcp.server.mcpserver import MCPServer, ResourceSecurity
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError

from pathweaver.errors import USER_ERRORS
from pathweaver.server import ServerState

VIEW_METHODS = ("mcmi", "pathrag", "pooling")
# Document paths are absolute store keys, not file-system access: allow them, still refuse '..' and NUL.
DOC_SECURITY = ResourceSecurity(reject_absolute_paths=False)


async def _read(fn: Callable[..., Any], *args: Any) -> Any:
    try:
        return await anyio.to_thread.run_sync(lambda: fn(*args))
    except USER_ERRORS as exc:
        raise ResourceError(str(exc)) from exc


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, indent=1, default=str)


def register_resources(server: MCPServer, state: ServerState) -> None:
    """Add pathweaver's resources and resource templates to ``server``."""
    svc = state.service

    @server.resource("pathweaver://documents", mime_type="application/json", title="Indexed documents")
    async def documents() -> str:
        """Every indexed document with its title and size."""
        return _json(await _read(svc.documents))

    @server.resource(
        "pathweaver://document/{+path}", mime_type="application/json", title="A document's chunks",
        security=DOC_SECURITY,
    )
    async def document(path: str) -> str:
        """The chunks of one indexed document (text, heading, character span), in order."""
        if not path.startswith("/") and not any(d.get("path") == path for d in await _read(svc.documents)):
            path = "/" + path  # clients may drop the leading slash of an absolute path
        chunks = await _read(svc.document_chunks, path)
        if not chunks:
            raise ResourceNotFoundError(f"no indexed document {path!r}; see pathweaver://documents")
        return _json(chunks)

    @server.resource("pathweaver://entity/{name}", mime_type="application/json", title="Entity card")
    async def entity(name: str) -> str:
        """An entity with its mentions (and supporting chunks), relations and synonyms."""
        card = await _read(svc.entity, name)
        if card is None:
            raise ResourceNotFoundError(f"no entity named {name!r}")
        return _json(card)

    @server.resource("pathweaver://stats", mime_type="application/json", title="Store statistics")
    async def stats() -> str:
        """Counts of documents, chunks, entities, relations; the embedding model; skipped files; indexer state."""
        data = dict(await _read(svc.stats))
        data["indexer"] = state.manager.snapshot()
        return _json(data)

    @server.resource("pathweaver://view/{method}/{question}", mime_type="text/html", title="Why these chunks")
    async def view(method: str, question: str) -> str:
        """An offline HTML page drawing the retrieved subgraph or paths for a question (method: mcmi, pathrag,
        pooling)."""
        if method not in VIEW_METHODS:
            raise ResourceError(f"unknown view method {method!r}; use one of {', '.join(VIEW_METHODS)}")
        from pathweaver.viz.show import render_for_question

        return str(await _read(render_for_question, svc, question, method))
