"""Numeric kernels below extract/ and retrieval/: the thread pool, row-split products and projections."""
