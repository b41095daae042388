"""The Inductor backend's eager route (`compile=false`) and its three timing objectives, in process on a
tiny MLP: on CUDA when present, else on CPU; skipped where torch is not installed (CI installs no torch:
see README). On CUDA it also times a CUDA-graph route, whose replays must land between the events."""

import io
import json
import math
import tarfile
import time

import numpy as np
import pytest

from tests.gpu.fresh_load import export_mlp

torch = pytest.importorskip("torch")

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


@pytest.fixture(scope="module")
def program(tmp_path_factory):
    folder = tmp_path_factory.mktemp("inductor-eager")
    name, x, reference = export_mlp(folder, DEVICE, rows=8, hidden=128, outputs=16)
    return folder / "model.pt2", {name: x}, reference


@pytest.fixture
def backend(monkeypatch):
    """The backend, with the cache folders it points torch at restored after the test."""
    from enginewright.backends.inductor import InductorBackend

    for var in ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR"):
        monkeypatch.setenv(var, "unset-by-the-test")
    return InductorBackend(device=DEVICE)


def build(backend, program, workdir, route):
    from enginewright.backends.base import BuildRequest

    model, inputs, _ = program
    started = time.monotonic()
    engine = backend.build(BuildRequest(model_path=model, workdir=workdir, sample_inputs=inputs), route)
    return engine, time.monotonic() - started


def members(engine: bytes) -> dict[str, bytes]:
    with tarfile.open(fileobj=io.BytesIO(engine)) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers()}


def served(backend, engine, workdir, inputs):
    """Load, run once, report how it loaded, close (runners close in turn: each holds inference mode)."""
    runner = backend.load(engine, workdir)
    try:
        return runner.run(inputs), runner.describe()
    finally:
        runner.close()


def test_compile_is_an_exclusive_knob_on_by_default(backend):
    knobs = {k.name: k for k in backend.knobs()}
    assert knobs["compile"].values == ("true", "false")
    assert knobs["compile"].default == "true" and knobs["compile"].exclusive


def test_eager_engine_builds_without_compiling_and_serves_what_the_compiled_default_does(
    backend, program, tmp_path, monkeypatch
):
    _, inputs, reference = program
    compiled_engine, compiled_seconds = build(backend, program, tmp_path / "build-default", {})
    compiled_out, compiled_info = served(backend, compiled_engine, tmp_path / "load-default", inputs)
    assert compiled_info["compiled"] == 1

    def refuse(*args, **kwargs):
        raise AssertionError("the eager route called torch.compile")

    monkeypatch.setattr(torch, "compile", refuse)
    eager_engine, eager_seconds = build(backend, program, tmp_path / "build-eager", {"compile": "false"})
    assert eager_seconds < 30 and eager_seconds < compiled_seconds, (eager_seconds, compiled_seconds)
    parts = members(eager_engine)
    assert parts["caches.bin"] == b""
    assert json.loads(parts["settings.json"])["options"] == {"compile": "false"}
    eager_out, eager_info = served(backend, eager_engine, tmp_path / "load-eager", inputs)
    assert eager_info == {
        "compiled": 0,
        "fxgraph_cache_hit": 0,
        "fxgraph_cache_miss": 0,
        "tuned_placed": 0,
        "tuned_by_descent": 0,
        "tuned_here": 0,
    }
    assert set(eager_out) == set(compiled_out) == {"output"}
    np.testing.assert_allclose(eager_out["output"], compiled_out["output"], rtol=1e-3, atol=1e-4)
    np.testing.assert_allclose(eager_out["output"], reference, rtol=1e-3, atol=1e-4)


def test_eager_route_with_another_option_fails_the_build(backend, program, tmp_path):
    with pytest.raises(ValueError, match="compile=false runs the program eagerly: options epilogue_fusion=false"):
        build(backend, program, tmp_path, {"compile": "false", "epilogue_fusion": "false"})


ROUTES = [{"compile": "false"}, {}] + ([{"triton.cudagraphs": "true"}] if DEVICE == "cuda" else [])


@pytest.mark.parametrize("route", ROUTES, ids=lambda r: ",".join(f"{k}={v}" for k, v in r.items()) or "default")
def test_timed_calls_times_every_objective_and_refuses_others(backend, program, tmp_path, route):
    _, inputs, reference = program
    engine, _ = build(backend, program, tmp_path / "build", route)
    runner = backend.load(engine, tmp_path / "load")
    try:
        for _ in range(3):  # warm (CUDA graphs record on the first calls)
            np.testing.assert_allclose(runner.run(inputs)["output"], reference, rtol=1e-3, atol=1e-4)
        totals = {
            objective: runner.timed_calls(objective, inputs, 20) for objective in ("latency", "throughput", "gpuTime")
        }
        assert all(math.isfinite(ms) and ms > 0 for ms in totals.values()), totals
        assert runner.timed_calls("gpuTime", inputs, 1) > 0
        with pytest.raises(ValueError, match="unknown timing objective"):
            runner.timed_calls("wallclock", inputs, 1)
        np.testing.assert_allclose(runner.run(inputs)["output"], reference, rtol=1e-3, atol=1e-4)
    finally:
        runner.close()
