"""Which floating-point precision the model and the all-pairs bound products may use on this CPU.

bfloat16 keeps float32's range with 8 significant bits. On a CPU that multiplies it natively (AVX512-BF16 or
AMX), torch runs the embedding model and a product of two matrices faster under bfloat16; elsewhere it converts,
and is slower than float32. Question vectors are always float32; ``extract.graph_vector_precision`` decides for
the model passes that only feed graph-element vectors (the words of composed names, or whole names and triples
when encoded), ``ingest.chunk_vector_precision`` for those behind chunk vectors.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from functools import lru_cache

from pathweaver.config import ConfigError

PRECISIONS = ("auto", "bfloat16", "float32")
# oneDNN instruction-set caps below the first with bfloat16 dot products (AVX512_CORE_BF16): under one of these
# oneDNN emulates bfloat16, whatever the CPU has
NO_BF16_CAPS = frozenset({"SSE41", "AVX", "AVX2", "AVX2_VNNI", "AVX2_VNNI_2", "AVX512_CORE", "AVX512_CORE_VNNI"})


@lru_cache(maxsize=1)
def native_bf16() -> bool:
    """Whether torch multiplies bfloat16 with the CPU's own instructions (AVX512-BF16 or AMX tiles), and
    ``ONEDNN_MAX_CPU_ISA`` (or its old name ``DNNL_MAX_CPU_ISA``) does not forbid them."""
    cap = os.environ.get("ONEDNN_MAX_CPU_ISA") or os.environ.get("DNNL_MAX_CPU_ISA") or ""
    if cap.strip().upper() in NO_BF16_CAPS:
        return False
    import torch

    checks = ("_is_avx512_bf16_supported", "_is_amx_tile_supported")
    return any(bool(getattr(torch.cpu, name, lambda: False)()) for name in checks)


def check_precision(name: str, setting: str = "extract.graph_vector_precision") -> None:
    """Raise ``ConfigError`` naming ``setting`` unless ``name`` is one of ``PRECISIONS`` (no torch import:
    settings are checked before any model loads)."""
    if name not in PRECISIONS:
        raise ConfigError(f"{setting} must be one of {', '.join(PRECISIONS)}, got {name!r}")


def resolve_precision(name: str, invariant: Callable[[str], bool],
                      setting: str = "extract.graph_vector_precision") -> str:
    """``name`` as "bfloat16" or "float32": "auto" is bfloat16 where the CPU multiplies it natively and
    ``invariant("bfloat16")`` holds (the embedder's vectors at that precision do not depend on their batch,
    ``Embedder.batch_invariant``), else float32."""
    check_precision(name, setting)
    if name == "auto":
        return "bfloat16" if native_bf16() and invariant("bfloat16") else "float32"
    return name


def machine_key() -> str:
    """What a batch-invariance probe's answer depends on besides the model: torch's version and the CPU code path
    it takes (its capability, the oneDNN cap, the CPU's name)."""
    import platform

    import torch

    cpu = platform.processor()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            cpu = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), cpu)
    except OSError:
        pass
    capability = getattr(torch.backends.cpu, "get_cpu_capability", lambda: "")()
    cap = os.environ.get("ONEDNN_MAX_CPU_ISA") or os.environ.get("DNNL_MAX_CPU_ISA") or ""
    return f"torch {torch.__version__}|{capability}|{cap}|{cpu}"
