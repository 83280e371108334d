"""``show``: one self-contained HTML page explaining why these chunks were retrieved.

The page draws the retrieved subgraph (MCMI, LEGO) or paths (PathRAG, Path Pooling) with cytoscape.js, vendored
from the npm package ``cytoscape`` (MIT, see ``cytoscape.LICENSE``) and inlined into the page. Entity nodes are
sized by their score (PPR influence or resource), edges are drawn thicker for lower cost or higher reliability,
and each cited chunk is a node linked to the entities it mentions, listed beside the graph with its text.
A Content-Security-Policy forbids every remote load, and the page makes no network request.
"""

from __future__ import annotations

import html
import json
from dataclasses import dataclass
from importlib import resources
from typing import Any

from pathweaver.config import ConfigError
from pathweaver.store.snapshot import GraphSnapshot

VENDORED_JS = "cytoscape.min.js"
CSP = "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:"


@dataclass
class ShowParams:
    """Drawing choices."""

    max_entities_per_chunk: int = 8  # mentioned entities linked to a chunk when no path/subgraph covers them
    min_node_px: int = 18
    max_node_px: int = 64
    min_edge_px: float = 1.0
    max_edge_px: float = 8.0
    max_paths: int = 6  # paths drawn, best first, one row each
    label_chars: int = 48  # an edge label longer than this is cut with an ellipsis (the list beside has it whole)

    def validate(self) -> None:
        if self.max_entities_per_chunk < 0 or self.min_node_px < 1 or self.max_node_px < self.min_node_px:
            raise ConfigError("ShowParams: sizes must be positive and max >= min")
        if self.min_edge_px <= 0 or self.max_edge_px < self.min_edge_px:
            raise ConfigError("ShowParams: edge widths must be positive and max >= min")
        if self.max_paths < 1 or self.label_chars < 8:
            raise ConfigError("ShowParams: max_paths must be at least 1 and label_chars at least 8")


def _scale(value: float, low: float, high: float, out_low: float, out_high: float) -> float:
    if high <= low:
        return (out_low + out_high) / 2
    return out_low + (value - low) / (high - low) * (out_high - out_low)


class _Elements:
    """Collects cytoscape nodes and edges, merging repeats."""

    def __init__(self) -> None:
        self.nodes: dict[str, dict[str, Any]] = {}
        self.edges: dict[str, dict[str, Any]] = {}

    def node(self, node_id: str, label: str, kind: str, score: float | None = None) -> None:
        data = self.nodes.setdefault(node_id, {"id": node_id, "label": label, "kind": kind, "score": None})
        if score is not None:
            data["score"] = max(score, data["score"]) if data["score"] is not None else score
        if kind == "chunk":
            data["kind"] = "chunk"

    def edge(self, a: str, b: str, label: str, kind: str, strength: float) -> None:
        key = f"{kind}:{min(a, b)}|{max(a, b)}|{label}"
        data = self.edges.get(key)
        if data is None:
            self.edges[key] = {"id": f"x{len(self.edges)}", "source": a, "target": b, "label": label, "kind": kind,
                               "strength": strength}
        else:
            data["strength"] = max(data["strength"], strength)


def _entity_id(name: str) -> str:
    return f"ent:{name}"


def build_elements(result: dict[str, Any], snapshot: GraphSnapshot | None, params: ShowParams) -> list[dict[str, Any]]:
    """Cytoscape elements for a shaped retrieval result (``Pathweaver.shape`` output)."""
    els = _Elements()
    sub = result.get("subgraph") or None
    if sub:
        scores = sub.get("node_scores") or {}
        for name in sub.get("nodes", []):
            els.node(_entity_id(name), name, "entity", scores.get(name))
        costs = [float(e[2]) for e in sub.get("edges", [])]
        top = max(costs, default=1.0) or 1.0
        for u, v, cost in sub.get("edges", []):
            els.node(_entity_id(u), u, "entity")
            els.node(_entity_id(v), v, "entity")
            els.edge(_entity_id(u), _entity_id(v), "", "subgraph", 1.0 - float(cost) / top)  # lower cost: thicker
    for row, path in enumerate(best_paths(result, params)):
        nodes, rels = path.get("nodes", []), path.get("relations", [])
        rel = float(path.get("reliability", 0.0))
        ids = [f"p{row}:{i}" for i in range(len(nodes))]  # each path its own row: a shared name is drawn per row
        for node_id, name in zip(ids, nodes, strict=True):
            els.node(node_id, name, "entity", rel)
        for i in range(len(nodes) - 1):
            label = _cut(rels[i] if i < len(rels) else "", params.label_chars)
            els.edge(ids[i], ids[i + 1], label, "path", rel)
        for x, node_id in zip(_row_xs(nodes, rels, params), ids, strict=True):
            els.nodes[node_id]["pos"] = {"x": x, "y": row * ROW_PX}
    for rank, chunk in enumerate([] if result.get("paths") else result.get("chunks") or [], start=1):
        cid = f"chunk:{chunk['chunk_id']}"
        label = f"[{rank}] {chunk.get('title') or chunk.get('doc', '')}"
        els.node(cid, label, "chunk", float(chunk.get("score", 0)))
        els.nodes[cid]["label"] = label  # the rank label wins over a path citation's plain title
        if snapshot is None:
            continue
        passage = snapshot.chunk_index.get(int(chunk["chunk_id"]))
        if passage is None:
            continue
        row = snapshot.mentions.getrow(passage)
        order = sorted(zip(row.indices.tolist(), row.data.tolist(), strict=True), key=lambda t: (-t[1], t[0]))
        linked = 0
        for ent, count in order:
            name = snapshot.entity_names[ent]
            if _entity_id(name) in els.nodes:
                els.edge(cid, _entity_id(name), "mentions", "mention", float(count))
            elif linked < params.max_entities_per_chunk and not sub and not result.get("paths"):
                els.node(_entity_id(name), name, "entity")
                els.edge(cid, _entity_id(name), "mentions", "mention", float(count))
                linked += 1
    return _sized(els, params)


ROW_PX = 120  # vertical distance between two path rows: a node, its label below, the next row's edge labels
CHAR_PX = 6.2  # width of one character of a 10 px label, for spacing the nodes of a row
NODE_LABEL_PX = 150  # a node label wraps at this width (the page's ``text-max-width``)


def best_paths(result: dict[str, Any], params: ShowParams) -> list[dict[str, Any]]:
    """The paths to draw: the most reliable first (the prompt orders them the other way), at most ``max_paths``."""
    paths = list(result.get("paths") or [])
    paths.sort(key=lambda p: -float(p.get("reliability", 0.0)))
    return paths[: params.max_paths]


def _cut(label: str, chars: int) -> str:
    label = " ".join(str(label).split())
    return label if len(label) <= chars else label[: chars - 1].rstrip() + "\u2026"


def _row_xs(nodes: list[str], rels: list[str], params: ShowParams) -> list[float]:
    """x of each node of a path row: far enough apart that the edge label between two fits, and the two nodes'
    wrapped labels do not meet."""
    xs = [0.0]
    for i in range(1, len(nodes)):
        label = _cut(rels[i - 1] if i - 1 < len(rels) else "", params.label_chars)
        xs.append(xs[-1] + max(NODE_LABEL_PX + 30, len(label) * CHAR_PX + 60))
    return xs


def _sized(els: _Elements, params: ShowParams) -> list[dict[str, Any]]:
    scores = [n["score"] for n in els.nodes.values() if n["score"] is not None and n["kind"] == "entity"]
    lo, hi = min(scores, default=0.0), max(scores, default=0.0)
    out: list[dict[str, Any]] = []
    for node in els.nodes.values():
        if node["kind"] == "chunk":
            size = params.min_node_px * 1.4
        elif node["score"] is None:
            size = params.min_node_px
        else:
            size = _scale(node["score"], lo, hi, params.min_node_px * 1.3, params.max_node_px)
        pos = node.pop("pos", None)
        element = {"group": "nodes", "data": {**node, "score": node["score"] or 0.0, "size": round(size, 1)}}
        if pos is not None:
            element["position"] = pos
        out.append(element)
    by_kind: dict[str, list[float]] = {}
    for edge in els.edges.values():
        by_kind.setdefault(edge["kind"], []).append(edge["strength"])
    for edge in els.edges.values():
        vals = by_kind[edge["kind"]]
        width = _scale(edge["strength"], min(vals), max(vals), params.min_edge_px, params.max_edge_px)
        out.append({"group": "edges", "data": {**edge, "width": round(width, 2)}})
    return out


def _vendored_js() -> str:
    return resources.files("pathweaver.viz").joinpath(VENDORED_JS).read_text(encoding="utf-8")


def _script_json(value: Any) -> str:
    """JSON safe inside a <script> element."""
    return json.dumps(value).replace("</", "<\\/").replace("<!--", "<\\!--")


def _path_list(result: dict[str, Any], params: ShowParams) -> str:
    items = [f'<li class="path"><div class="meta">reliability {float(p.get("reliability", 0.0)):.3f}</div>'
             f'<div class="text">{html.escape(str(p.get("text", "")))}</div></li>'
             for p in best_paths(result, params)]
    return f'<h2>Paths, best first</h2><ol id="pw-paths">{"".join(items)}</ol>' if items else ""


def _chunk_list(result: dict[str, Any]) -> str:
    items = []
    for rank, chunk in enumerate(result.get("chunks") or [], start=1):
        start, end = (chunk.get("span") or [0, 0])[:2]
        items.append(
            f'<li class="chunk"><div class="meta">[{rank}] <b>{html.escape(str(chunk.get("title", "")))}</b> '
            f'&middot; score {float(chunk.get("score", 0.0)):.3f}</div>'
            f'<div class="doc">{html.escape(str(chunk.get("doc", "")))} [{start}:{end}]'
            f'{_merged_note(chunk)}</div>'
            f'<div class="text">{html.escape(str(chunk.get("text", "")))}</div></li>'
        )
    return "\n".join(items) or "<li>no chunks retrieved</li>"


def _merged_note(chunk: dict[str, Any]) -> str:
    merged = chunk.get("merged_chunks") or []
    return f" &middot; with {len(merged)} more chunk{'s' if len(merged) > 1 else ''} of this note" if merged else ""


_STYLE = """
body{margin:0;font:14px system-ui,sans-serif;color:#222;display:flex;flex-direction:column;height:100vh}
header{padding:8px 14px;border-bottom:1px solid #ddd}header h1{font-size:16px;margin:0 0 4px}
main{flex:1;display:flex;min-height:0}#cy{flex:3;min-width:0;border-right:1px solid #ddd}
aside{flex:2;overflow:auto;padding:8px 12px}ol{padding-left:0;list-style:none}
.chunk{margin-bottom:10px;padding:6px;border:1px solid #eee;border-radius:4px}
.meta{color:#333}.doc{color:#777;font-size:12px}.text{white-space:pre-wrap;font-size:13px;margin-top:4px}
.legend span{margin-right:12px}.path{margin-bottom:8px}.path .meta{color:#777;font-size:12px}
"""

_APP = """
(function(){
  var data = JSON.parse(document.getElementById('pw-data').textContent);
  var rows = data.elements.some(function(e){ return e.position; });
  var cy = cytoscape({
    container: document.getElementById('cy'), elements: data.elements,
    style: [
      {selector: 'node', style: {'label': 'data(label)', 'width': 'data(size)', 'height': 'data(size)',
        'font-size': 10, 'text-wrap': 'ellipsis', 'text-max-width': 140, 'background-color': '#4a7bd0'}},
      {selector: 'node[kind = "chunk"]', style: {'shape': 'round-rectangle', 'background-color': '#e8a33d'}},
      {selector: 'edge', style: {'width': 'data(width)', 'curve-style': 'bezier', 'line-color': '#999',
        'label': 'data(label)', 'font-size': 10, 'color': '#333', 'text-background-color': '#fff',
        'text-background-opacity': 1, 'text-margin-y': -10}},
      {selector: 'edge[kind = "path"]', style: {'line-color': '#c0392b', 'target-arrow-shape': 'triangle',
        'target-arrow-color': '#c0392b'}},
      {selector: 'edge[kind = "subgraph"]', style: {'line-color': '#8e44ad'}},
      {selector: 'edge[kind = "mention"], edge[kind = "cites"]', style: {'line-style': 'dashed', 'label': ''}}
    ].concat(rows ? [{selector: 'node', style: {'text-valign': 'bottom', 'text-margin-y': 4, 'text-wrap': 'wrap',
        'text-max-width': 150}}] : []),
    layout: rows ? {name: 'preset', fit: true, padding: 30}
                 : {name: 'grid', avoidOverlap: true, avoidOverlapPadding: 24, nodeDimensionsIncludeLabels: true}
  });
  // every drawn label's box, and how many pairs of them overlap: what a reader (and the test) checks
  var boxes = [];
  var opts = {includeNodes: false, includeEdges: false, includeLabels: true, includeMainLabels: true,
              includeSourceLabels: false, includeTargetLabels: false, includeOverlays: false};
  cy.elements().forEach(function(el){
    if (!el.data('label') || el.data('kind') === 'mention' || el.data('kind') === 'cites') return;
    var b = el.boundingBox(opts);
    if (b.w > 0 && b.h > 0) boxes.push({id: el.id(), x1: b.x1, y1: b.y1, x2: b.x2, y2: b.y2});
  });
  var overlaps = 0;
  for (var i = 0; i < boxes.length; i++) for (var j = i + 1; j < boxes.length; j++) {
    var a = boxes[i], c = boxes[j];
    if (a.x1 < c.x2 && c.x1 < a.x2 && a.y1 < c.y2 && c.y1 < a.y2) overlaps++;
  }
  var n = cy.nodes().length;
  document.getElementById('pw-rendered-nodes').textContent = String(n);
  document.getElementById('pw-label-boxes').textContent = JSON.stringify(boxes);
  document.body.setAttribute('data-rendered-nodes', String(n));
  document.body.setAttribute('data-rendered-edges', String(cy.edges().length));
  document.body.setAttribute('data-labels', String(boxes.length));
  document.body.setAttribute('data-label-overlaps', String(overlaps));
})();
"""


def render_html(
    result_dict: dict[str, Any],
    snapshot: GraphSnapshot | None,
    question: str,
    method: str,
    params: ShowParams | None = None,
) -> str:
    """The whole page as one string: data, vendored cytoscape.js and the drawing code inlined."""
    params = params or ShowParams()
    params.validate()
    elements = build_elements(result_dict, snapshot, params)
    n_nodes = sum(1 for e in elements if e["group"] == "nodes")
    n_edges = len(elements) - n_nodes
    payload = {"elements": elements, "question": question, "method": method}
    title = html.escape(f"pathweaver: {question}")
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{CSP}">
<title>{title}</title><style>{_STYLE}</style></head>
<body data-node-count="{n_nodes}" data-edge-count="{n_edges}">
<header><h1>{html.escape(question)}</h1>
<div class="legend">method <b>{html.escape(method)}</b> &middot; {n_nodes} nodes, {n_edges} edges
(rendered: <span id="pw-rendered-nodes">0</span>) &middot; <span>blue: entities (size = score)</span>
<span>orange: cited chunks</span><span>edge width: reliability or 1 &minus; cost</span></div></header>
<main><div id="cy"></div><aside>{_path_list(result_dict, params)}<h2>Cited chunks</h2>
<ol>{_chunk_list(result_dict)}</ol></aside></main>
<pre id="pw-label-boxes" hidden></pre>
<script id="pw-data" type="application/json">{_script_json(payload)}</script>
<script>window.PW_NODE_COUNT = {n_nodes};</script>
<script>{_vendored_js()}</script>
<script>{_APP}</script>
</body></html>
"""


def render_for_question(service: Any, question: str, method: str, top_k: int = 5,
                        params: dict[str, Any] | None = None) -> str:
    """Retrieve with ``service`` (a ``Pathweaver``) and render the page."""
    result = service.retrieve(question, method=method, top_k=top_k, params=params)
    snapshot = service.snapshot()
    return render_html(service.shape(result, snapshot), snapshot, question, method)
