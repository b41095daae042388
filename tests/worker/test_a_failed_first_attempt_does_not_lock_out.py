"""A first `enginewright tune` that fails before any route passes (here: a base setting ONNX Runtime
refuses, so the default route cannot be built) leaves neither the lock that would refuse the
corrected command on the same --out nor failed entries a rerun would take as results (they are
moved to OUT/failed-attempt/); a run that measured something keeps its lock. (Data that does not
fit the model is refused before --out is touched: test_tune_refuses_data_that_does_not_fit_the_model.py.)"""

import json

from tests.worker.conftest import run_tune


def swapped_pairs(example, tmp_path):
    """The example with its two reference pairs in the other order: other inputs, as far as --out knows."""
    folder = tmp_path / "swapped"
    folder.mkdir(parents=True)
    (folder / "mlp.onnx").write_bytes((example / "mlp.onnx").read_bytes())
    for kind in ("inputs", "references"):
        for i in (0, 1):
            (folder / f"{kind}-{i}.npz").write_bytes((example / f"{kind}-{1 - i}.npz").read_bytes())
    return folder


def test_the_corrected_command_runs_on_the_same_out(example, tmp_path):
    out = tmp_path / "out"
    failed = run_tune(
        example,
        out,
        "--search",
        "fast",
        "--knob",
        "enable_mem_pattern=0",
        "--no-confirm",
        "--setting",
        "inter_op_num_threads=-1",
    )
    assert failed.returncode != 0 and "Traceback" not in failed.stderr
    assert not (out / "run.json").exists() and not list(out.rglob("entries/*.json"))
    assert list((out / "failed-attempt").glob("*.json"))  # kept aside, to be read
    fixed = run_tune(example, out, "--search", "fast", "--knob", "enable_mem_pattern=0", "--no-confirm")
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert json.loads((out / "summary.json").read_text())["default_ms"] > 0

    # Now it holds results: another run's inputs are refused there, as before.
    other = run_tune(swapped_pairs(example, tmp_path / "again"), out, "--search", "fast", "--no-confirm")
    assert other.returncode == 3 and "holds a run with different inputs" in other.stderr, other.stderr
