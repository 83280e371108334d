"""The vector-invariance tests again under each instruction-set cap oneDNN honours (``ONEDNN_MAX_CPU_ISA``), so
that "incremental == fresh index" is shown for the kernels of older CPUs too, not only for this one's (the suite
itself runs uncapped: AMX where the CPU has it). A cap above what the CPU has changes nothing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
INVARIANCE_TESTS = [
    "tests/test_embedder.py::test_graph_vectors_do_not_depend_on_their_batch",
    "tests/test_embedder.py::test_fixed_padded_passes_are_the_models_vectors",
    "tests/test_embedder.py::test_precision_names_and_auto",
    "tests/test_extract.py::test_composed_phrase_vectors_are_order_stable_and_track_encoded_names",
    "tests/test_pipeline.py::test_graph_vector_precision_keeps_chunks_float32_and_its_own_cache",
    "tests/test_incremental.py::test_changing_vector_settings_remakes_every_vector",
    "tests/test_incremental.py::test_incremental_then_refresh_equals_fresh_index[0-statistical-sqlite]",
]


# each cap, and the CPU features (torch.cpu's checks) of which one is enough for the cap to change oneDNN's kernels
ABOVE_CAP = {
    "AVX2": ("_is_avx512_supported", "_is_amx_tile_supported"),
    "AVX512_CORE": ("_is_vnni_supported", "_is_avx512_bf16_supported", "_is_amx_tile_supported"),
    "AVX512_CORE_BF16": ("_is_amx_tile_supported",),
}


def cap_changes_kernels(isa: str) -> bool:
    """Whether this CPU has instructions above ``isa``: a cap it does not exceed runs the uncapped suite again."""
    import torch

    return any(bool(getattr(torch.cpu, check, lambda: False)()) for check in ABOVE_CAP[isa])


def test_the_invariance_tests_exist() -> None:
    """The ids the capped runs ask for still name tests, also on a CPU where every cap skips (a renamed or
    re-parametrised test would otherwise fail only on CPUs above AVX2)."""
    run = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                          *INVARIANCE_TESTS], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]


@pytest.mark.timeout(1200)  # seven tests in a fresh interpreter, model load included
@pytest.mark.parametrize("isa", list(ABOVE_CAP))
def test_invariance_under_every_isa(isa: str) -> None:
    if not cap_changes_kernels(isa):
        pytest.skip(f"this CPU has nothing above {isa}: under that cap the suite's own run already covers it")
    env = {**os.environ, "ONEDNN_MAX_CPU_ISA": isa}
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *INVARIANCE_TESTS],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=1100)
    assert run.returncode == 0, f"under ONEDNN_MAX_CPU_ISA={isa}:\n{run.stdout[-4000:]}{run.stderr[-2000:]}"
    from pathweaver.models.precision import native_bf16

    # below that cap, or on a CPU without bfloat16 instructions, bfloat16 is emulated and its case skips
    native = isa == "AVX512_CORE_BF16" and native_bf16()
    assert f"{len(INVARIANCE_TESTS) + native} passed" in run.stdout
