"""Packed encoding: several short texts share one row of a forward pass, with exactly their separate results.

A sentence-transformers model made of a BERT encoder, mean pooling and (optionally) normalisation embeds a text
independently of any other. Padding a batch to its longest text wastes most of a batch of single words (entity
names' words are mostly one or two tokens). Packing puts many texts in
one row instead: each text keeps its own position ids (0, 1, ...) and a block-diagonal attention mask lets a token
attend only within its own text, so every token's output is what it is alone (to float rounding, ~1e-7), and
each text's vector is the mean of its own tokens, as the model's pooling computes it. Rows are filled by pairing
the longest remaining text with the shortest ones that still fit.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from pathweaver.models.tokens import token_ids

PACK_TOKENS = 4096  # tokens per forward pass (rows x row length)
RECIPE = "fixed"  # how graph-text vectors are made (``fixed_padded``); stores record it, and a change re-makes them
FIXED_MIN = 4  # narrowest fixed-shape row ([CLS], a one-token word, [SEP] and one pad)
MIN_ROW = 32  # shortest row (single words ran faster than at 64, the same bits); rows are the next power of two above
# the longest text, up to the model's limit


def packable(model: Any) -> bool:
    """Whether ``model`` (a SentenceTransformer) is a BERT encoder with plain mean pooling (and normalisation)."""
    try:
        modules = list(model)
        bert = modules[0].auto_model
        pooling = modules[1]
    except (AttributeError, IndexError, TypeError):
        return False
    mode = getattr(pooling, "pooling_mode", None)
    if mode is None and getattr(pooling, "pooling_mode_mean_tokens", False):
        mode = "mean"
    extra = [type(m).__name__ for m in modules[2:]]
    return (
        getattr(bert.config, "model_type", "") == "bert"
        and mode == "mean"
        and getattr(pooling, "include_prompt", True)
        and extra in ([], ["Normalize"])
    )


def rows_for(lengths: np.ndarray, row: int) -> list[list[int]]:
    """Text indices per row: the longest remaining text, then the shortest ones while they fit in ``row``."""
    order = np.argsort(lengths, kind="stable").tolist()
    lens = lengths.tolist()
    rows: list[list[int]] = []
    lo, hi = 0, len(order) - 1
    while lo <= hi:
        members, room = [order[hi]], row - lens[order[hi]]
        hi -= 1
        while lo <= hi and lens[order[lo]] <= room:
            members.append(order[lo])
            room -= lens[order[lo]]
            lo += 1
        rows.append(members)
    return rows


def row_length(longest: int, limit: int) -> int:
    """The row length for texts whose longest has ``longest`` tokens: a power of two, at least ``MIN_ROW``."""
    return min(limit, max(MIN_ROW, 1 << max(0, longest - 1).bit_length()))


def encode_packed(model: Any, texts: list[str], pad_when_cheaper: bool = True) -> np.ndarray:
    """Unit vectors of ``texts`` (n, dim) float32 through ``model`` (``packable``), many texts per row. When one
    padded batch per ``PACK_TOKENS`` holds no more tokens than the packed rows would (a few questions or sentences:
    packed rows are at least ``MIN_ROW`` long), the texts go as plain padded batches instead, with no 4-d mask,
    which is cheaper for them (``pad_when_cheaper=False`` always packs, as the load probe must)."""
    import torch

    bert = model[0].auto_model
    limit = int(model.max_seq_length)
    ids = token_ids(model.tokenizer, texts, limit)
    lengths = np.fromiter((len(t) for t in ids), dtype=np.int64, count=len(ids))
    width = row_length(int(lengths.max()), limit)
    rows = rows_for(lengths, width)
    sums = torch.zeros(len(texts), bert.config.hidden_size, dtype=torch.float32)
    with torch.inference_mode():
        if pad_when_cheaper and len(texts) * int(lengths.max()) <= len(rows) * width:
            _padded(bert, ids, lengths, sums)
        else:
            _packed(bert, ids, lengths, rows, width, sums)
    means = sums / torch.from_numpy(lengths).to(torch.float32)[:, None]
    return torch.nn.functional.normalize(means, dim=1).numpy().astype(np.float32, copy=False)


def fixed_width(n_tokens: int, limit: int) -> int:
    """The row width of a text of ``n_tokens`` in fixed-shape passes: the power of two above it, at least
    ``FIXED_MIN``, at most the model's limit."""
    return min(limit, max(FIXED_MIN, 1 << max(0, n_tokens - 1).bit_length()))


def fixed_packed(model: Any, texts: list[str]) -> np.ndarray:
    """Unit vectors of ``texts`` through ``model`` (``packable``), each the same bits whatever else is in the call:
    texts of at most ``MIN_ROW`` tokens share rows of ``MIN_ROW`` (a row's attention then spans one small block
    of keys, so a text's offset in it does not change its sums), a longer text sits alone at the start of a row of
    its own width (``fixed_width``), and every pass of a width holds exactly ``PACK_TOKENS // width`` rows, the
    last filled up with empty rows. Math kernels are chosen by the shape of a product, and rows of a batch are
    computed alike (docs/design-notes.md, "Batch-invariant vectors")."""
    import torch

    bert = model[0].auto_model
    limit = int(model.max_seq_length)
    ids = token_ids(model.tokenizer, texts, limit)
    lengths = np.fromiter((len(t) for t in ids), dtype=np.int64, count=len(ids))
    widths = np.fromiter((max(MIN_ROW, fixed_width(int(n), limit)) for n in lengths), dtype=np.int64,
                         count=len(ids))
    sums = torch.zeros(len(texts), bert.config.hidden_size, dtype=torch.float32)
    with torch.inference_mode():
        for width in np.unique(widths).tolist():
            members = np.flatnonzero(widths == width)
            if width == MIN_ROW:
                rows = [[int(members[i]) for i in row] for row in rows_for(lengths[members], width)]
            else:
                rows = [[int(m)] for m in members]
            _packed(bert, ids, lengths, rows, width, sums, full=True)
    means = sums / torch.from_numpy(lengths).to(torch.float32)[:, None]
    return torch.nn.functional.normalize(means, dim=1).numpy().astype(np.float32, copy=False)


def fixed_padded(model: Any, texts: list[str]) -> np.ndarray:
    """Unit vectors of ``texts`` through a sentence-transformers ``model``, each text the same bits whatever else
    is in the call: every text sits alone at the start of a row of its own width (``fixed_width``), and every pass
    of that width holds exactly ``PACK_TOKENS // width`` rows (the last filled up with copies of a row of it, whose
    outputs are dropped). Math kernels are chosen by the shape of a product, and rows of a batch are computed
    alike, so nothing but the text decides its vector (docs/design-notes.md, "Batch-invariant vectors")."""
    import torch

    limit = int(model.max_seq_length)
    lengths = [len(t) for t in token_ids(model.tokenizer, texts, limit)]
    widths = np.fromiter((fixed_width(n, limit) for n in lengths), dtype=np.int64, count=len(texts))
    parts: list[tuple[list[int], Any]] = []
    with torch.inference_mode():
        for width in np.unique(widths).tolist():
            members = np.flatnonzero(widths == width).tolist()
            per_pass = max(1, PACK_TOKENS // width)
            for start in range(0, len(members), per_pass):
                part = members[start : start + per_pass]
                batch = [texts[i] for i in part] + [texts[part[0]]] * (per_pass - len(part))
                features = model.tokenizer(batch, padding="max_length", truncation=True, max_length=width,
                                           return_tensors="pt")
                parts.append((part, model(dict(features))["sentence_embedding"][: len(part)].float()))
    dim = parts[0][1].shape[1] if parts else 0
    out = torch.zeros(len(texts), dim, dtype=torch.float32)
    for part, vecs in parts:
        out[part] = torch.nn.functional.normalize(vecs, dim=1)
    return out.numpy()


def _padded(bert: Any, ids: list[list[int]], lengths: np.ndarray, sums: Any) -> None:
    """Add each text's token outputs into its row of ``sums``: batches padded to their longest, ``PACK_TOKENS``
    tokens at most each, with the usual 2-d attention mask."""
    import torch

    per_pass = max(1, PACK_TOKENS // int(lengths.max()))
    for start in range(0, len(ids), per_pass):
        part = range(start, min(start + per_pass, len(ids)))
        longest = int(lengths[part.start : part.stop].max())
        inp = np.zeros((len(part), longest), dtype=np.int64)
        for r, m in enumerate(part):
            inp[r, : lengths[m]] = ids[m]
        mask = torch.from_numpy(np.arange(longest)[None, :] < lengths[part.start : part.stop, None])
        tokens = torch.from_numpy(inp)
        hidden = bert(input_ids=tokens, attention_mask=mask.long(), token_type_ids=torch.zeros_like(tokens)
                      ).last_hidden_state
        sums[part.start : part.stop] = (hidden * mask[:, :, None]).sum(1).float()


def _packed(bert: Any, ids: list[list[int]], lengths: np.ndarray, rows: list[list[int]], width: int,
            sums: Any, full: bool = False) -> None:
    """Add each text's token outputs into its row of ``sums``: ``rows`` of ``width`` tokens, ``PACK_TOKENS`` per
    pass, each text with its own position ids and a block-diagonal mask; with ``full`` the last pass is filled up
    with empty rows, so that every pass has the same shape."""
    import torch

    per_pass = max(1, PACK_TOKENS // width)
    steps = np.arange(width, dtype=np.int64)
    for start in range(0, len(rows), per_pass):
        group = rows[start : start + per_pass]
        height = per_pass if full else len(group)
        inp = np.zeros((height, width), dtype=np.int64)
        pos = np.zeros((height, width), dtype=np.int64)
        seg = np.tile(-1 - steps, (height, 1))  # a padding slot attends only to itself (no empty row)
        for r, members in enumerate(group):
            at = 0
            for m in members:
                n = int(lengths[m])
                inp[r, at : at + n] = ids[m]
                pos[r, at : at + n] = steps[:n]
                seg[r, at : at + n] = m
                at += n
        mask = torch.from_numpy(seg[:, None, :, None] == seg[:, None, None, :])
        tokens = torch.from_numpy(inp)
        hidden = bert(input_ids=tokens, attention_mask=mask, position_ids=torch.from_numpy(pos),
                      token_type_ids=torch.zeros_like(tokens)).last_hidden_state
        real = seg >= 0
        sums.index_add_(0, torch.from_numpy(seg[real]), hidden[torch.from_numpy(real)].float())
