"""A first `enginewright tune` that fails before any route passes (here: inputs named after tensors
the model does not have, so the default route cannot run) leaves neither the lock that would refuse
the corrected command on the same --out nor failed entries a rerun would take as results (they are
moved to OUT/failed-attempt/); a run that measured something keeps its lock."""

import json

import numpy as np

from tests.worker.conftest import run_tune


def misnamed_inputs(example, tmp_path):
    folder = tmp_path / "misnamed"
    folder.mkdir(parents=True)
    for name in ("mlp.onnx", "references-0.npz", "references-1.npz"):
        (folder / name).write_bytes((example / name).read_bytes())
    for i in (0, 1):
        with np.load(example / f"inputs-{i}.npz") as arrays:
            np.savez(folder / f"inputs-{i}.npz", **{f"wrong_{k}": arrays[k] for k in arrays.files})
    return folder


def test_the_corrected_command_runs_on_the_same_out(example, tmp_path):
    out = tmp_path / "out"
    failed = run_tune(misnamed_inputs(example, tmp_path), out, "--search", "fast", "--knob", "enable_mem_pattern=0",
                      "--no-confirm")
    assert failed.returncode != 0 and "Traceback" not in failed.stderr
    assert not (out / "run.json").exists() and not list(out.rglob("entries/*.json"))
    assert list((out / "failed-attempt").glob("*.json"))  # kept aside, to be read
    fixed = run_tune(example, out, "--search", "fast", "--knob", "enable_mem_pattern=0", "--no-confirm")
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert json.loads((out / "summary.json").read_text())["default_ms"] > 0

    # Now it holds results: another run's inputs are refused there, as before.
    other = run_tune(misnamed_inputs(example, tmp_path / "again"), out, "--search", "fast", "--no-confirm")
    assert other.returncode == 3 and "holds a run with different inputs" in other.stderr
