"""A build process forks its builds only where a fork is safe (`child.fork_hazards`): torch merely
imported is (the Inductor backend's build process imports it once a batch, `child.PRELOADED`), but
not once a thread was started that a fork would not copy (Inductor's compile pool's reader, OpenMP's
workers) or CUDA's driver was asked for its devices (torch then refuses CUDA in every fork). Then
each build runs in a fresh interpreter instead, and the build process's log says why."""

import ctypes
import json
import os
import subprocess
import sys

import pytest

from enginewright.api.cache import Outcome
from enginewright.api.routes import Route
from enginewright.worker import child, process
from enginewright.worker.measure import build
from tests.worker.conftest import recording_worker

torch = pytest.importorskip("torch")

MAIN = "from enginewright.worker.child import main; sys.exit(main(sys.argv))"
ROUTES = [Route.of({"enable_mem_pattern": "0"}), Route.of({"enable_cpu_mem_arena": "0"})]


def built_from(example, tmp_path, monkeypatch, prelude: str):
    """Two builds from one build process started with `prelude` run before it serves: their records
    (`interval_backend`) and the build process's log."""
    worker, intervals = recording_worker(example, tmp_path, monkeypatch)
    program = f"import sys\n{prelude}\n{MAIN}"
    monkeypatch.setattr(process, "child_command", lambda path: [sys.executable, "-c", program, str(path)])
    folder = tmp_path / "work" / "builds"
    with process.Builders(folder, 1) as builders:
        for route in ROUTES:
            built = build(worker.ctx, route, "stage1", "b0", builders)
            assert built.entry.outcome is Outcome.ok, built.entry.error
        assert builders.started == 1
    builds = [r for r in map(json.loads, intervals.read_text().splitlines()) if r["kind"] == "build"]
    assert len(builds) == 2
    return builds, (folder / "builder-0" / "builds.log").read_text()


def test_a_build_process_with_torch_imported_forks_its_builds(example, tmp_path, monkeypatch):
    builds, log = built_from(example, tmp_path, monkeypatch, "import torch")
    assert all(b["torch_loaded"] for b in builds)  # forked: torch came with the fork, no interpreter start
    assert len({b["parent"] for b in builds}) == 1
    assert "fresh interpreter" not in log


@pytest.mark.skipif(not torch.backends.cuda.is_built(), reason="a torch built without CUDA marks no fork")
def test_a_build_process_whose_torch_asked_cuda_for_devices_builds_in_fresh_interpreters(
    example, tmp_path, monkeypatch
):
    builds, log = built_from(example, tmp_path, monkeypatch, "import torch; torch.cuda.is_available()")
    assert not any(b["torch_loaded"] for b in builds)  # not forked from the torch process
    assert "CUDA's driver asked for its devices in the build process: this build runs in a fresh interpreter" in log


def test_a_build_process_with_another_python_thread_builds_in_fresh_interpreters(example, tmp_path, monkeypatch):
    prelude = "import threading, time, torch; threading.Thread(target=time.sleep, args=(600,), daemon=True).start()"
    builds, log = built_from(example, tmp_path, monkeypatch, prelude)
    assert not any(b["torch_loaded"] for b in builds)
    assert "1 Python threads besides the main one: this build runs in a fresh interpreter" in log


def test_threads_started_after_the_preload_make_a_fork_unsafe():
    """OpenMP's workers, started by torch's first parallel operation, are OS threads a fork does not
    copy: counted against the threads the preload left."""
    program = (
        "from enginewright.worker.child import fork_hazards, os_threads\n"
        "import torch\n"
        "threads = os_threads()\n"
        "before = fork_hazards(threads)\n"
        "torch.set_num_threads(2); torch.ones(512, 512) @ torch.ones(512, 512)\n"
        "print(before, fork_hazards(threads), sep='\\n')"
    )
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    before, after = done.stdout.strip().splitlines()[-2:]
    assert before == "[]"
    assert "OS threads where the preload left" in after


def test_a_preload_that_makes_a_fork_unsafe_is_undone(example, tmp_path, monkeypatch):
    """The build process starts again without it (exec: the same pid and pipes) and forks its builds,
    which import what they need themselves, rather than paying an interpreter start a build."""
    backend = "tests.worker.interval_backend:IntervalRecordingBackend"
    prelude = f"import enginewright.worker.child as c; c.PRELOADED[{backend!r}] = ('tests.worker.thread_on_import',)"
    builds, log = built_from(example, tmp_path, monkeypatch, prelude)
    assert "1 Python threads besides the main one after the preload: the build process starts again without it" in log
    assert log.strip().splitlines()[-1].startswith("preloaded [] in ")  # the process started bare
    assert "fresh interpreter" not in log
    assert len({b["parent"] for b in builds}) == 1


@pytest.mark.parametrize("given", [None, "0"])
def test_the_preload_has_torch_ask_nvml_whether_cuda_is_there(monkeypatch, given):
    """torch 2.11's Inductor asks torch.cuda.is_available() at import, and torch asks the CUDA
    runtime, which starts CUDA's driver: on the H200 every batch's preload was undone ("CUDA's driver
    initialised in the build process after the preload: the build process starts again without it").
    During the preload torch asks NVML instead, and the builds get the environment as it was."""
    module = "tests.worker.cuda_asked_on_import"
    monkeypatch.setitem(child.PRELOADED, "asks-cuda", ("torch", module))
    monkeypatch.delitem(sys.modules, module, raising=False)
    if given is None:
        monkeypatch.delenv("PYTORCH_NVML_BASED_CUDA_CHECK", raising=False)
    else:
        monkeypatch.setenv("PYTORCH_NVML_BASED_CUDA_CHECK", given)
    import gc

    try:
        assert child.preload("asks-cuda") == ["torch", module]
    finally:
        gc.unfreeze()
    assert sys.modules[module].asked_nvml is True
    assert os.environ.get("PYTORCH_NVML_BASED_CUDA_CHECK") == given


class Driver:
    """libcuda's cuDeviceGetCount, answering `code`."""

    def __init__(self, code: int):
        self.code = code

    def cuDeviceGetCount(self, count):  # noqa: N802 (the driver's name)
        return self.code


@pytest.mark.parametrize(
    ("driver", "started"),
    [
        (Driver(child.CUDA_ERROR_NOT_INITIALIZED), False),  # cuInit never ran here
        (Driver(0), True),  # it did: a forked child's cuInit would fail
        (Driver(100), True),  # no device, after cuInit
        (OSError("libcuda.so.1: cannot open shared object file"), False),  # no driver on this host
    ],
)
def test_the_cuda_driver_counts_as_started_unless_it_says_it_was_not(monkeypatch, driver, started):
    def cdll(name):
        assert name == "libcuda.so.1"
        if isinstance(driver, Exception):
            raise driver
        return driver

    monkeypatch.setattr(ctypes, "CDLL", cdll)
    assert child.cuda_driver_started() is started
    assert (child.cuda_hazard() == "CUDA's driver initialised in the build process") is started
