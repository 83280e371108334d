"""A BERT sentence encoder in numpy for questions, without importing torch, transformers or sentence-transformers.

A cold CLI ``retrieve`` embeds one question; importing sentence-transformers (and transformers with it) costs
several seconds and ~200 MB before the model runs, torch alone ~1 s and ~100 MB. A sentence-transformers folder of
the plain layout (a ``BertModel`` with absolute positions, mean pooling, then normalisation: all-MiniLM-L6-v2 among
others) is run here from its ``model.safetensors`` (mapped, not read: a question touches a few rows of the word
embeddings) and ``tokenizer.json`` alone, with the same operations in the same order as transformers' BERT
(softmax attention, erf GELU) in float32, so a question's vector equals the full model's to float rounding
(tests/test_query_encoder.py). ``QueryEncoder.load`` returns None for any other layout, and the caller then uses
the full model.
"""

from __future__ import annotations

import json
import mmap
import struct
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

BATCH = 32  # texts per padded pass
PASS_TOKENS = 2048  # padded tokens per pass at most (a pass of 256-token rows holds 8: ~25 MB of attention scores)
_LAYOUT = ["sentence_transformers.models.Transformer", "sentence_transformers.models.Pooling",
           "sentence_transformers.models.Normalize"]


def _read(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def plain_bert_layout(folder: Path) -> dict[str, Any] | None:
    """The BERT config of a sentence-transformers folder this module can run exactly, else None."""
    try:
        modules = _read(folder / "modules.json")
        config = _read(folder / "config.json")
        pooling = _read(folder / "1_Pooling" / "config.json")
        st_config = _read(folder / "sentence_bert_config.json")
    except (OSError, ValueError):
        return None
    if [m.get("type") for m in modules] != _LAYOUT or modules[1].get("path") != "1_Pooling":
        return None
    mean_only = pooling.get("pooling_mode_mean_tokens") and not any(
        v for k, v in pooling.items() if k.startswith("pooling_mode_") and k != "pooling_mode_mean_tokens")
    plain = (config.get("model_type") == "bert" and config.get("hidden_act") == "gelu"
             and config.get("position_embedding_type", "absolute") == "absolute")
    files = (folder / "model.safetensors").is_file() and (folder / "tokenizer.json").is_file()
    if not (mean_only and plain and files):
        return None
    return {**config, "max_seq_length": int(st_config.get("max_seq_length", config["max_position_embeddings"]))}


def _mapped_tensors(path: Path) -> dict[str, np.ndarray]:
    """The float32 tensors of a safetensors file as read-only views of one memory map (format: an 8-byte
    little-endian header length, a JSON header of dtype/shape/offsets, then the raw little-endian data)."""
    with path.open("rb") as f:
        size = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(size))
        data = np.frombuffer(mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ), dtype=np.uint8)
    base = 8 + size
    out = {}
    for name, entry in header.items():
        if name == "__metadata__" or entry["dtype"] != "F32":
            continue
        lo, hi = entry["data_offsets"]
        out[name] = data[base + lo : base + hi].view("<f4").reshape(entry["shape"])
    return out


def _layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    mean = x.mean(axis=-1, keepdims=True)
    centred = x - mean
    var = (centred * centred).mean(axis=-1, keepdims=True)
    return centred / np.sqrt(var + np.float32(eps)) * weight + bias


def _gelu(x: np.ndarray) -> np.ndarray:
    from scipy.special import erf

    return x * np.float32(0.5) * (np.float32(1.0) + erf(x * np.float32(2.0**-0.5)))


def _softmax(x: np.ndarray) -> np.ndarray:
    """Softmax over the last axis, in place (attention scores are the largest arrays of a pass)."""
    x -= x.max(axis=-1, keepdims=True)
    np.exp(x, out=x)
    x /= x.sum(axis=-1, keepdims=True)
    return x


@dataclass(eq=False)  # hashed by identity: models/tokens.py keys its tokenizer copies by it
class QueryEncoder:
    """Tokenizer and BERT weights of a plain sentence-transformers folder (``load``); ``encode`` gives unit
    vectors."""

    tokenizer: Any  # tokenizers.Tokenizer, truncating at the model's limit
    weights: dict[str, np.ndarray]  # name -> float32 array, as in the checkpoint (read-only, mapped)
    heads: int
    layers: int
    eps: float
    max_tokens: int
    lock: threading.Lock

    @classmethod
    def load(cls, folder: str | Path) -> QueryEncoder | None:
        folder = Path(folder)
        config = plain_bert_layout(folder)
        if config is None:
            return None
        from tokenizers import Tokenizer

        tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        tokenizer.no_padding()
        tokenizer.enable_truncation(max_length=config["max_seq_length"])
        weights = {k.removeprefix("bert."): v for k, v in _mapped_tensors(folder / "model.safetensors").items()}
        return cls(tokenizer, weights, int(config["num_attention_heads"]), int(config["num_hidden_layers"]),
                   float(config["layer_norm_eps"]), config["max_seq_length"], threading.Lock())

    @property
    def backend_tokenizer(self) -> Any:
        """The Rust tokenizer, under the name ``models/tokens.py`` reads it by."""
        return self.tokenizer

    @property
    def dim(self) -> int:
        return int(self.weights["embeddings.word_embeddings.weight"].shape[1])

    def encode(self, texts: list[str]) -> np.ndarray:
        """(n, dim) float32 unit vectors; a lone text runs unpadded, more go in padded batches of similar length
        (``BATCH`` texts and ``PASS_TOKENS`` padded tokens at most), with the padding masked out of attention and
        of the mean."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        ids = [enc.ids for enc in self.tokenizer.encode_batch(texts)]
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        with self.lock:
            start = 0
            while start < len(order):
                rows = order[start:start + BATCH]  # shortest first: the last row is the widest
                while len(rows) > 1 and len(rows) * len(ids[rows[-1]]) > PASS_TOKENS:
                    rows = rows[:-1]
                start += len(rows)
                width = max(len(ids[i]) for i in rows)
                batch = np.zeros((len(rows), width), dtype=np.int64)
                mask = np.zeros((len(rows), width), dtype=bool)
                for r, i in enumerate(rows):
                    batch[r, :len(ids[i])] = ids[i]
                    mask[r, :len(ids[i])] = True
                hidden = self._forward(batch, None if mask.all() else mask)
                weights = mask.astype(np.float32)[:, :, None]
                means = (hidden * weights).sum(axis=1) / weights.sum(axis=1)
                norms = np.maximum(np.sqrt((means * means).sum(axis=1, keepdims=True)), np.float32(1e-12))
                out[rows] = means / norms
        return out

    def _layer_norm(self, x: np.ndarray, name: str) -> np.ndarray:
        w = self.weights
        return _layer_norm(x, w[f"{name}.weight"], w[f"{name}.bias"], self.eps)

    def _linear(self, x: np.ndarray, name: str) -> np.ndarray:
        return x @ self.weights[f"{name}.weight"].T + self.weights[f"{name}.bias"]

    def _forward(self, ids: np.ndarray, mask: np.ndarray | None) -> np.ndarray:
        """BERT's last hidden state (as transformers' ``BertModel`` computes it); ``mask`` marks real tokens, None
        when no row is padded."""
        w = self.weights
        b, n = ids.shape
        # padding is never attended to
        keys = None if mask is None else np.where(mask, np.float32(0.0), np.float32(-np.inf))[:, None, None, :]
        x = (w["embeddings.word_embeddings.weight"][ids] + w["embeddings.token_type_embeddings.weight"][0]
             + w["embeddings.position_embeddings.weight"][:n])
        x = self._layer_norm(x, "embeddings.LayerNorm")
        dim = x.shape[-1]
        head = dim // self.heads
        scale = np.float32(1.0 / np.sqrt(head))
        for i in range(self.layers):
            p = f"encoder.layer.{i}"

            def split(t: np.ndarray) -> np.ndarray:
                return t.reshape(b, n, self.heads, head).transpose(0, 2, 1, 3)

            q, k, v = (split(self._linear(x, f"{p}.attention.self.{m}")) for m in ("query", "key", "value"))
            scores = q @ k.transpose(0, 1, 3, 2)
            scores *= scale
            if keys is not None:
                scores += keys
            ctx = (_softmax(scores) @ v).transpose(0, 2, 1, 3).reshape(b, n, dim)
            x = self._layer_norm(self._linear(ctx, f"{p}.attention.output.dense") + x,
                                 f"{p}.attention.output.LayerNorm")
            inner = _gelu(self._linear(x, f"{p}.intermediate.dense"))
            x = self._layer_norm(self._linear(inner, f"{p}.output.dense") + x, f"{p}.output.LayerNorm")
        return x
