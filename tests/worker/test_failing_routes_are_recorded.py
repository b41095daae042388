"""A route the compiler refuses is recorded and the run goes on; a reference that does not match
makes every route fail accuracy and the command says so."""

import json

import numpy as np

from enginewright.api.cache import CacheEntry, Outcome
from tests.worker.conftest import run_tune


def test_refused_knob_value_is_recorded_as_build_failed_and_run_continues(example, tmp_path):
    out = tmp_path / "run"
    result = run_tune(
        example, out, "--knob", "intra_op_num_threads=-1,2", "--knob", "enable_mem_pattern=0", "--no-confirm"
    )
    assert result.returncode == 0, result.stderr
    entries = {
        e.route: e
        for e in (CacheEntry.from_json(p.read_text()) for p in (out / "store/runs/local/entries").glob("*.json"))
    }
    assert entries["-intra_op_num_threads=-1"].outcome is Outcome.build_failed
    assert "intra_op_num_threads" in entries["-intra_op_num_threads=-1"].error
    assert entries["-intra_op_num_threads=2"].outcome is Outcome.ok
    assert entries["-enable_mem_pattern=0"].outcome is Outcome.ok
    assert "build-failed" in result.stdout


def test_perturbed_references_fail_every_route_with_a_clear_message(example, tmp_path):
    for i in range(2):
        with np.load(example / f"references-{i}.npz") as ref:
            perturbed = {
                k: ref[k] + np.random.default_rng(i).standard_normal(ref[k].shape).astype(np.float32) for k in ref.files
            }
        np.savez(example / f"perturbed-{i}.npz", **perturbed)
    out = tmp_path / "run"
    result = run_tune(example, out, "--knob", "enable_mem_pattern=0", references="perturbed")
    assert result.returncode == 3
    assert "the default route failed accuracy validation" in result.stderr
    assert "the reference outputs do not match this model" in result.stderr
    assert "--references" in result.stderr
    # A failed first attempt keeps its entries aside: a corrected rerun must not take them as results.
    entries = [json.loads(p.read_text()) for p in (out / "failed-attempt").glob("*.json")]
    assert entries and all(e["outcome"] == "accuracy-rejected" for e in entries)
    assert all(max(e["loss"].values()) >= 1e-4 for e in entries)


def test_report_rerenders_from_a_cache_directory(example, tmp_path):
    out = tmp_path / "run"
    assert run_tune(example, out, "--knob", "enable_mem_pattern=0", "--no-confirm").returncode == 0
    (out / "report.md").unlink()
    (out / "report.png").unlink()
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "enginewright", "report", str(out)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "-enable_mem_pattern=0" in (out / "report.md").read_text()
    assert (out / "report.png").stat().st_size > 1000
