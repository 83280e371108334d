"""Offline HTML views of retrieval results (the vendored cytoscape.js is inlined; nothing is fetched)."""
