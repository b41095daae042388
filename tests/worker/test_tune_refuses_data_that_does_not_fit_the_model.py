"""`enginewright tune` checks the reference data against the model's signature before it builds
anything (the probe's check): a mismatch exits nonzero with one message naming the file and tensor
and what the model expects, no traceback, no route built. `--output` names the outputs checked."""

import json
import time

import numpy as np
import pytest

from tests.worker.conftest import run_tune


def bad_copy(example, folder, case):
    """The example's model and pair files in `folder`, one of them made wrong as `case` says."""
    folder.mkdir()
    for i in range(2):
        for kind in ("inputs", "references"):
            with np.load(example / f"{kind}-{i}.npz") as data:
                arrays = dict(data)
            if i == 1 and case == "missing output" and kind == "references":
                del arrays["features"]
            if i == 1 and case == "wrong input dtype" and kind == "inputs":
                arrays["image"] = arrays["image"].astype(np.float64)
            if i == 1 and case == "reference of the wrong shape" and kind == "references":
                arrays["logits"] = arrays["logits"][:4]
            if i == 1 and case == "extra reference" and kind == "references":
                arrays["probs"] = arrays["logits"]
            np.savez(folder / f"{kind}-{i}.npz", **arrays)
    (folder / "mlp.onnx").write_bytes((example / "mlp.onnx").read_bytes())
    return folder


WORDS = {
    "missing output": ["references-1.npz", "no reference for output 'features'", "--output"],
    "wrong input dtype": ["inputs-1.npz", "input 'image' is float64", "image float32[8, 3, 32, 32]"],
    "reference of the wrong shape": [
        "references-1.npz",
        "reference 'logits' has shape [4, 10]",
        "logits float32[8, 10]",
    ],
    "extra reference": ["references-1.npz", "'probs' is not an output of the model"],
}


@pytest.mark.parametrize("case", sorted(WORDS))
def test_a_mismatch_stops_tune_before_any_build(example, tmp_path, case):
    folder = bad_copy(example, tmp_path / "data", case)
    began = time.monotonic()
    done = run_tune(folder, tmp_path / "out")
    took = time.monotonic() - began
    assert done.returncode == 3, done.stdout + done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    message = done.stderr.strip()
    assert message.startswith("enginewright tune: the reference data does not fit"), message
    for word in WORDS[case] + [
        "Expected: the model takes image float32[8, 3, 32, 32] and gives logits float32[8, 10], "
        "features float32[8, 512]"
    ]:
        assert word in message, message
    assert not (tmp_path / "out" / "store").exists()  # nothing was built or measured
    assert took < 30, took


def test_named_outputs_are_the_ones_checked(example, tmp_path):
    folder = bad_copy(example, tmp_path / "data", "missing output")
    done = run_tune(folder, tmp_path / "out", "--output", "logits", "--knob", "enable_mem_pattern=0", "--no-confirm")
    assert done.returncode == 0, done.stdout + done.stderr
    entries = [json.loads(p.read_text()) for p in (tmp_path / "out" / "store").rglob("entries/*.json")]
    measured = [e for e in entries if e.get("loss")]
    assert measured and all(set(e["loss"]) == {"logits"} for e in measured), entries
