"""A CUDA engine's build and its load compile any Triton kernel with the same tools: torch's own (its
ptxas, the libdevice it asks for), which torch sets only where it compiles a kernel itself. A load
whose kernels all come from the engine's caches never did, so the one kernel it compiled after all (a
tuned config the kernel was not compiled for) used Triton's ptxas, and Triton's cache key, which holds
the ptxas version, missed the kernel the build had compiled and packed (an H100, session 37:
`triton_compiled` 1 at such a load).

Pure logic on CPU, with torch's setters recorded (the real ones set paths that exist only in a CUDA
torch); what it changes on a GPU: tests/gpu/test_a_tuned_engine_loads_without_tuning_again.py."""

import io
import json
import tarfile

import numpy as np
import pytest

from enginewright.backends.base import BuildRequest
from enginewright.backends.inductor import ENGINE_FILES, InductorBackend

pytest.importorskip("torch")


@pytest.fixture
def torchs_setters(monkeypatch):
    """torch's tool setters, recorded in the order called, and what Inductor's kernels were told
    before they were (the load's `recheck_autotune_cache` is replaced for CUDA: restored after)."""
    from torch._inductor.runtime import compile_tasks, triton_heuristics

    called = []
    for name in ("_set_triton_ptxas_path", "_set_triton_libdevice_path"):
        monkeypatch.setattr(compile_tasks, name, lambda name=name: called.append(name), raising=False)
    autotuner = getattr(triton_heuristics, "CachingAutotuner", None)
    if autotuner is not None and hasattr(autotuner, "recheck_autotune_cache"):
        monkeypatch.setattr(autotuner, "recheck_autotune_cache", autotuner.recheck_autotune_cache)
    return called


def cuda_engine() -> bytes:
    """An engine as a CUDA build writes it, but for a program that does not load (the load stops there)."""
    settings = {"options": {}, "device": "cuda", "input_dtype": None, "input_names": ["x"], "torch": "any"}
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, data in zip(ENGINE_FILES, (b"not a program", b"", json.dumps(settings).encode())):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def test_a_cuda_load_sets_torchs_tools_before_it_loads_a_kernel(tmp_path, torchs_setters):
    with pytest.raises(Exception):  # (the program: no CUDA here, and not a program)
        InductorBackend(device="cuda").load(cuda_engine(), tmp_path / "load")
    assert torchs_setters == ["_set_triton_ptxas_path", "_set_triton_libdevice_path"]


def build_of_an_absent_model(tmp_path, device: str, route: dict) -> None:
    """A build on `device` that stops when it reads the model (absent)."""
    request = BuildRequest(
        model_path=tmp_path / "absent.pt2", workdir=tmp_path / "build", sample_inputs={"x": np.zeros(2, np.float32)}
    )
    with pytest.raises(Exception):
        InductorBackend(device=device).build(request, route)


def test_a_cuda_build_sets_them_before_it_compiles(tmp_path, torchs_setters):
    build_of_an_absent_model(tmp_path, "cuda", {})
    assert torchs_setters == ["_set_triton_ptxas_path", "_set_triton_libdevice_path"]


def test_a_cpu_build_leaves_them_to_torch(tmp_path, torchs_setters):
    build_of_an_absent_model(tmp_path, "cpu", {"compile": "false"})
    assert torchs_setters == []
