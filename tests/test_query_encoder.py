"""The light question encoder (models/query_encoder.py): the full model's vectors and token counts, without
importing sentence-transformers or transformers; any other folder layout is refused."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np

from pathweaver.models import tokens
from pathweaver.models.embedder import Embedder, resolve_model_path
from pathweaver.models.query_encoder import QueryEncoder

TEXTS = [
    "Where was the director of film Inherent Vice born?",
    "Who warned Scrooge that three spirits would visit him, and what had he been to Scrooge?",
    "x",
    "Café naïve façade 東京 — " * 60,  # past the model's 256-token limit: truncated alike
]


def test_same_vectors_and_tokens_as_the_full_model() -> None:
    folder = resolve_model_path(Embedder().model_name)
    light = QueryEncoder.load(folder)
    assert light is not None
    full = Embedder()
    assert full.query_encoder() is not None  # light while the full model is not loaded
    assert np.abs(light.encode(TEXTS) - full.model.encode(TEXTS, normalize_embeddings=True)).max() < 1e-5
    assert full.query_encoder() is None  # the loaded model takes over
    for text in TEXTS:
        assert np.abs(light.encode([text])[0] - full.encode_one(text)).max() < 1e-6
        assert tokens.count(light, text, 256) == tokens.count(full.model.tokenizer, text, 256)
        assert tokens.offsets(light, text, 256) == tokens.offsets(full.model.tokenizer, text, 256)
    assert light.dim == full.dim and light.max_tokens == full.max_tokens


def test_other_layouts_are_refused(tmp_path: Path) -> None:
    folder = Path(resolve_model_path(Embedder().model_name))
    copy = tmp_path / "model"
    shutil.copytree(folder, copy)
    pooling = copy / "1_Pooling" / "config.json"
    config = json.loads(pooling.read_text())
    pooling.write_text(json.dumps({**config, "pooling_mode_mean_tokens": False, "pooling_mode_cls_token": True}))
    assert QueryEncoder.load(copy) is None  # CLS pooling is not what it computes
    assert QueryEncoder.load(tmp_path / "missing") is None


def test_a_question_is_embedded_without_sentence_transformers_or_torch() -> None:
    code = ("import sys; from pathweaver.models.embedder import Embedder; e = Embedder(); "
            "v = e.encode_one('Who was Scrooge?'); e.count_tokens('Who was Scrooge?'); "
            "print(v.shape, 'sentence_transformers' in sys.modules, 'transformers' in sys.modules, "
            "'torch' in sys.modules)")
    src = str(Path(__file__).resolve().parents[1] / "src")
    env = dict(os.environ, PYTHONPATH=src + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["(384,)", "False", "False", "False"]
