"""Reference data that does not fit the model's signature is refused by the probe, before any tuning
Job: a references file missing an output, inputs of the wrong dtype, references of the wrong shape or
with a name the model does not give. Each run stalls InvalidInput naming the file and the tensor, with
a Warning Event and no traceback. Naming the outputs to check (spec.accuracy.outputs) lets a references
file leave the others out: that run is validated on those outputs only and reaches Ready."""

import io
import json
import time

import numpy as np

from enginewright.api.names import LABEL_COMPONENT, LABEL_STAGE
from tests.conftest import get_json
from tests.operator.conftest import (
    MODELS_BUCKET,
    apply,
    condition,
    event_posted,
    jobs,
    manifest,
    wait_condition,
)

KNOB = [{"name": "enable_mem_pattern", "values": ["0"]}]
CASES = {
    "missing-output": (
        "references",
        lambda a: {k: v for k, v in a.items() if k != "features"},
        ["spec.accuracy.pairs[1].references", "no reference for output 'features'", "spec.accuracy.outputs"],
    ),
    "input-dtype": (
        "inputs",
        lambda a: {"image": a["image"].astype(np.float64)},
        ["spec.accuracy.pairs[1].inputs", "input 'image' is float64", "image float32[8, 3, 32, 32]"],
    ),
    "reference-shape": (
        "references",
        lambda a: {**a, "logits": a["logits"][:, :5]},
        ["spec.accuracy.pairs[1].references", "reference 'logits' has shape [8, 5]", "logits float32[8, 10]"],
    ),
    "extra-name": (
        "references",
        lambda a: {**a, "probs": a["logits"]},
        ["spec.accuracy.pairs[1].references", "'probs' is not an output of the model"],
    ),
}


def put_bad(s3, example_in_store, name, kind, change) -> str:
    with np.load(example_in_store / f"{kind}-1.npz") as data:
        arrays = change(dict(data))
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    key = f"bad/{name}/{kind}-1.npz"
    s3.put_object(MODELS_BUCKET, key, io.BytesIO(buffer.getvalue()), len(buffer.getvalue()))
    return f"s3://{MODELS_BUCKET}/{key}"


def test_data_that_does_not_fit_stalls_invalid_input_after_the_probe_only(
    cluster, operator, run_namespace, s3, example_in_store
):
    applied = {}
    for case, (kind, change, _) in CASES.items():
        doc = manifest(f"misfit-{case}", knobs=KNOB)
        doc["spec"]["accuracy"]["pairs"][1][kind] = put_bad(s3, example_in_store, case, kind, change)
        apply(cluster, run_namespace, doc)
        applied[case] = time.monotonic()
    took = {}
    for case, (_, _, words) in CASES.items():
        name = f"misfit-{case}"
        status = wait_condition(cluster, run_namespace, name, "Stalled", 180)
        took[case] = time.monotonic() - applied[case]
        stall = condition(status, "Stalled")
        assert stall["reason"] == "InvalidInput", status
        for word in words:
            assert word in stall["message"], stall["message"]
        assert status["phase"] == "Failed" and status["targets"][0]["stage"] == "failed"
        event_posted(cluster, run_namespace, name, lambda e: e["reason"] == "InvalidInput" and e["type"] == "Warning")
    stages = sorted(j["metadata"]["labels"][LABEL_STAGE] for j in jobs(cluster, run_namespace))
    assert stages == ["probe"] * len(CASES), stages  # no tuning Job for any of them
    print(f"\nInvalidInput after apply: {', '.join(f'{c} {s:.1f}s' for c, s in took.items())}")
    operator.assert_clean()


def test_named_outputs_let_a_references_file_leave_the_others_out(
    cluster, operator, run_namespace, s3, example_in_store
):
    kind, change, _ = CASES["missing-output"]
    doc = manifest("named-outputs", knobs=KNOB)
    doc["spec"]["accuracy"]["pairs"][1][kind] = put_bad(s3, example_in_store, "named-outputs", kind, change)
    doc["spec"]["accuracy"]["outputs"] = ["logits"]
    doc["spec"]["publish"] = {"enabled": False}
    apply(cluster, run_namespace, doc)
    status = wait_condition(cluster, run_namespace, "named-outputs", "Ready", 420)
    assert status["accuracyValidated"] is True
    shards = get_json(cluster, "cm", "-n", run_namespace, "-l", f"{LABEL_COMPONENT}=cache")["items"]
    measured = [json.loads(text) for cm in shards for text in (cm.get("data") or {}).values()]
    measured = [e for e in measured if e.get("loss")]
    assert measured and all(set(e["loss"]) == {"logits"} for e in measured), measured
    operator.assert_clean()
