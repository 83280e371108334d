"""A BERT sentence encoder in plain torch for questions, without importing transformers or sentence-transformers.

A cold CLI ``retrieve`` embeds one question; importing sentence-transformers (and transformers with it) costs
several seconds and ~200 MB before the model runs. A sentence-transformers folder of the plain layout (a
``BertModel`` with absolute positions, mean pooling, then normalisation: all-MiniLM-L6-v2 among others) is run
here from its ``model.safetensors`` and ``tokenizer.json`` alone, with the same operations in the same order as
transformers' BERT (scaled-dot-product attention, erf GELU), so a question's vector equals the full model's to
float rounding (tests/test_query_encoder.py). ``QueryEncoder.load`` returns None for any other layout, and the
caller then uses the full model.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

BATCH = 32  # texts per padded pass
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


@dataclass(eq=False)  # hashed by identity: models/tokens.py keys its tokenizer copies by it
class QueryEncoder:
    """Tokenizer and BERT weights of a plain sentence-transformers folder (``load``); ``encode`` gives unit
    vectors."""

    tokenizer: Any  # tokenizers.Tokenizer, truncating at the model's limit
    weights: dict[str, Any]  # name -> torch tensor, as in the checkpoint
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
        from safetensors.torch import load_file
        from tokenizers import Tokenizer

        tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        tokenizer.no_padding()
        tokenizer.enable_truncation(max_length=config["max_seq_length"])
        weights = {k.removeprefix("bert."): v for k, v in load_file(str(folder / "model.safetensors")).items()}
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
        (``BATCH`` texts at most), with the padding masked out of attention and of the mean."""
        import torch

        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        ids = [enc.ids for enc in self.tokenizer.encode_batch(texts)]
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        with self.lock, torch.inference_mode():
            for start in range(0, len(order), BATCH):
                rows = order[start:start + BATCH]
                width = max(len(ids[i]) for i in rows)
                batch = torch.zeros((len(rows), width), dtype=torch.long)
                mask = torch.zeros((len(rows), width), dtype=torch.bool)
                for r, i in enumerate(rows):
                    batch[r, :len(ids[i])] = torch.tensor(ids[i], dtype=torch.long)
                    mask[r, :len(ids[i])] = True
                padded = not bool(mask.all())
                hidden = self._forward(batch, mask if padded else None)
                weights = mask.to(hidden.dtype)[:, :, None]
                means = (hidden * weights).sum(dim=1) / weights.sum(dim=1)
                out[rows] = torch.nn.functional.normalize(means, dim=1).numpy()
        return out

    def _layer_norm(self, x: Any, name: str) -> Any:
        import torch

        w = self.weights
        return torch.nn.functional.layer_norm(x, x.shape[-1:], w[f"{name}.weight"], w[f"{name}.bias"], self.eps)

    def _linear(self, x: Any, name: str) -> Any:
        import torch

        return torch.nn.functional.linear(x, self.weights[f"{name}.weight"], self.weights[f"{name}.bias"])

    def _forward(self, ids: Any, mask: Any | None) -> Any:
        """BERT's last hidden state (as transformers' ``BertModel`` computes it); ``mask`` marks real tokens, None
        when no row is padded."""
        import torch
        from torch.nn import functional as F  # noqa: N812

        w = self.weights
        b, n = ids.shape
        keys = None if mask is None else mask[:, None, None, :]  # padding is never attended to
        x = (w["embeddings.word_embeddings.weight"][ids] + w["embeddings.token_type_embeddings.weight"][0]
             + w["embeddings.position_embeddings.weight"][:n])
        x = self._layer_norm(x, "embeddings.LayerNorm")
        dim = x.shape[-1]
        head = dim // self.heads
        for i in range(self.layers):
            p = f"encoder.layer.{i}"

            def split(t: torch.Tensor) -> torch.Tensor:
                return t.view(b, n, self.heads, head).transpose(1, 2)

            q, k, v = (split(self._linear(x, f"{p}.attention.self.{m}")) for m in ("query", "key", "value"))
            ctx = F.scaled_dot_product_attention(q, k, v, attn_mask=keys).transpose(1, 2).reshape(b, n, dim)
            x = self._layer_norm(self._linear(ctx, f"{p}.attention.output.dense") + x,
                                 f"{p}.attention.output.LayerNorm")
            inner = F.gelu(self._linear(x, f"{p}.intermediate.dense"))
            x = self._layer_norm(self._linear(inner, f"{p}.output.dense") + x, f"{p}.output.LayerNorm")
        return x
