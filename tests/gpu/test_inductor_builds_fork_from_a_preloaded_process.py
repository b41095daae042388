"""A batch's Inductor builds are forked from one build process that imported torch, Dynamo and
Inductor once (`child.PRELOADED`), instead of each build importing them again (5-13 CPU-s of a
compiled route's build on a 2-core host). Nothing compiled lives in that process, so each build still
compiles everything itself into its own cache folders, and its engine carries all of it: a fresh
process loads every engine from its caches (no FX graph miss; on the host no C++ compiled), routes
that compile the same kernels included. What every first compile in a process repeats is done once
in the build process too (`prepare_builds`): on the host, Inductor's probes of the CPU's vector
instructions (a library compiled and loaded for each, 6 s of a 13-16 s build on 2 cores); no build
compiles them again, and every engine still carries them. Runs on CUDA when present, else on the host."""

import tarfile

import numpy as np
import pytest

from tests.gpu.fresh_load import export_mlp, load_fresh

torch = pytest.importorskip("torch")

from enginewright.api.cache import Outcome  # noqa: E402
from enginewright.worker import process  # noqa: E402
from enginewright.worker.child import ChildRequest  # noqa: E402

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"

# Routes whose kernels are the same on the host (coordinate descent tunes Triton kernels only): a
# process that kept what it compiled would give the second no artifacts of its own.
ROUTES = [{}, {"coordinate_descent_tuning": "true"}, {"compile": "false"}]


@pytest.fixture(scope="module")
def program(tmp_path_factory):
    folder = tmp_path_factory.mktemp("preloaded")
    _, _, reference = export_mlp(folder, DEVICE)
    return folder, reference


def test_builds_forked_from_a_preloaded_process_carry_all_they_compiled(program, tmp_path):
    folder, reference = program
    engines = []
    with process.Builders(tmp_path / "builds", 1) as builders:
        for i, route in enumerate(ROUTES):
            request = ChildRequest(
                action="build",
                backend="inductor",
                backend_options={"device": DEVICE},
                workdir=str(tmp_path / f"route-{i}"),
                engine=str(tmp_path / f"route-{i}.inductor.tar"),
                model=str(folder / "model.pt2"),
                route=route,
                inputs=[str(folder / "inputs.npz")],
            )
            result = builders.run(request, timeout=600, failure=Outcome.build_failed)
            assert result.ok, result.error
            engines.append(tmp_path / f"route-{i}.inductor.tar")
        assert builders.started == 1
    log = (tmp_path / "builds" / "builder-0" / "builds.log").read_text()
    assert "preloaded ['torch', 'torch._dynamo', 'torch._inductor.compile_fx', 'torch.export']" in log
    assert "fresh interpreter" not in log, log  # every build forked
    # from the preloaded process (on the H200 at 54e4c57 torch 2.11's Inductor started CUDA's driver
    # at import, and the build process started again without its preload: these lines passed all the same)
    assert "starts again without it" not in log, log
    assert "prepared ['torch_key'" in log, log
    prepared = tmp_path / "builds" / "builder-0" / "prepared" / "inductor"
    probes = {p.relative_to(prepared).as_posix() for p in prepared.glob("*/*.so")}
    if DEVICE == "cpu":  # the probes, compiled once in the build process, none by a build
        assert probes and "vector instructions" in log, log
        for i, route in enumerate(ROUTES):
            own = tmp_path / f"route-{i}" / "caches-build" / "inductor"
            assert not probes & {p.relative_to(own).as_posix() for p in own.glob("*/*.so")}, route
            if route.get("compile") != "false":
                with tarfile.open(engines[i]) as tar:
                    assert {f"compiled/{probe}" for probe in probes} <= set(tar.getnames()), route
    else:
        assert not probes  # a CUDA engine carries no host library

    for i, (route, engine) in enumerate(zip(ROUTES, engines)):
        loaded = load_fresh(engine, tmp_path / f"load-{i}", folder / "inputs.npz", DEVICE)
        np.testing.assert_allclose(np.array(loaded["output"]), reference, rtol=1e-3, atol=1e-4)
        assert loaded["compiled"] == 0, (route, loaded)
        # no compile pool beside the engine (on CUDA, Triton's presence starts one at the first compile)
        assert loaded["children"] == 0 and loaded["compile_threads"] == 1, (route, loaded)
        if route.get("compile") != "false":
            assert loaded["describe"]["fxgraph_cache_miss"] == 0 and loaded["describe"]["fxgraph_cache_hit"] >= 1, route

    # A batch's serving process imports Inductor before its first engine is built (`child.await_engine`):
    # its load must still compile nothing, start no compile pool and hit the engine's own caches.
    loaded = load_fresh(engines[0], tmp_path / "load-ahead", folder / "inputs.npz", DEVICE, imported_ahead=True)
    np.testing.assert_allclose(np.array(loaded["output"]), reference, rtol=1e-3, atol=1e-4)
    assert loaded["compiled"] == 0 and loaded["children"] == 0 and loaded["compile_threads"] == 1, loaded
    assert loaded["describe"]["fxgraph_cache_miss"] == 0 and loaded["describe"]["fxgraph_cache_hit"] >= 1, loaded
