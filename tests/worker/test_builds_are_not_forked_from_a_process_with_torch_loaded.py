"""A build process with torch (or triton, or tensorrt) loaded does not fork its builds: threads such
a library started (Inductor's compile pool and its reader thread, CUDA's) do not exist in a forked
child, whose next compile can then hang. Each build runs in a fresh interpreter instead, and says so
in the build process's log."""

import json
import sys

from enginewright.api.cache import Outcome
from enginewright.api.routes import Route
from enginewright.worker import process
from enginewright.worker.measure import build
from tests.worker.conftest import recording_worker

TORCH_FIRST = "import sys, torch; from enginewright.worker.child import main; sys.exit(main(sys.argv))"


def test_a_build_process_with_torch_loaded_builds_in_a_fresh_interpreter(example, tmp_path, monkeypatch):
    worker, intervals = recording_worker(example, tmp_path, monkeypatch)
    monkeypatch.setattr(process, "child_command", lambda path: [sys.executable, "-c", TORCH_FIRST, str(path)])
    folder = tmp_path / "work" / "builds"
    with process.Builders(folder, 1) as builders:
        for route in [Route.of({"enable_mem_pattern": "0"}), Route.of({"enable_cpu_mem_arena": "0"})]:
            built = build(worker.ctx, route, "stage1", "b0", builders)
            assert built.entry.outcome is Outcome.ok, built.entry.error
        assert builders.started == 1
    builds = [r for r in map(json.loads, intervals.read_text().splitlines()) if r["kind"] == "build"]
    assert len(builds) == 2 and not any(b["torch_loaded"] for b in builds)  # not forked from the torch process
    assert "torch loaded in the build process" in (folder / "builder-0" / "builds.log").read_text()
