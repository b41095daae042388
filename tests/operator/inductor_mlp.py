"""A tiny MLP exported with torch.export and its reference pairs, in the store, and an Inductor
TuningRun of it on CPU nodes: shared by the Inductor operator tests (host processes and image mode)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

PAIRS = 2  # reference pairs (the API asks for at least two)
THRESHOLD = 1e-4
# Two paired rounds a route: their interval is wide, so the sweep places nothing and candidates go to
# the confirmation round (what the tests are about, not the speed of a tiny MLP on a shared CPU).
TIMING = {"warmupIterations": 2, "roundSeconds": 0.005, "minRounds": 2, "maxRounds": 2}


def put_mlp(s3, folder: Path, models_bucket: str, runs_bucket: str) -> Path:
    """Write model.pt2, inputs-<i>.npz and references-<i>.npz into `folder` and the store (inductor/...)."""
    try:
        import torch
    except ImportError:
        pytest.fail("no torch in the test venv: `make setup` (or `make torch`) installs CPU torch")
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4)).eval()
    exported = torch.export.export(model, (torch.zeros(4, 8),))
    (name,) = [
        s.arg.name
        for s in exported.graph_signature.input_specs
        if s.kind == torch.export.graph_signature.InputKind.USER_INPUT
    ]
    torch.export.save(exported, str(folder / "model.pt2"))
    for i in range(PAIRS):
        x = np.random.default_rng(i).standard_normal((4, 8)).astype(np.float32)
        with torch.no_grad():
            y = model(torch.from_numpy(x)).numpy()
        np.savez(folder / f"inputs-{i}.npz", **{name: x})
        np.savez(folder / f"references-{i}.npz", output=y)
    for bucket in (models_bucket, runs_bucket):
        if not s3.bucket_exists(bucket):
            s3.make_bucket(bucket)
    for file in ["model.pt2", *(f"{kind}-{i}.npz" for kind in ("inputs", "references") for i in range(PAIRS))]:
        s3.fput_object(models_bucket, f"inductor/{file}", str(folder / file))
    return folder


def inductor_run(name: str, mode: str, knobs: list[dict], models_bucket: str, **search) -> dict:
    """The TuningRun of the MLP on `cpu` nodes; `search` adds spec.search fields."""
    return {
        "apiVersion": "tuning.enginewright.io/v1alpha1",
        "kind": "TuningRun",
        "metadata": {"name": name},
        "spec": {
            "model": {"uri": f"s3://{models_bucket}/inductor/model.pt2", "format": "torch-export"},
            "compiler": {"name": "inductor", "settings": {"device": "cpu"}},
            "search": {
                "mode": mode,
                "knobs": knobs,
                "routesPerJob": 8,
                "confirm": {"topK": 2, "rounds": 3, "loads": 2},
                **search,
            },
            "accuracy": {
                "metric": "cosine",
                "threshold": THRESHOLD,
                "pairs": [
                    {
                        "inputs": f"s3://{models_bucket}/inductor/inputs-{i}.npz",
                        "references": f"s3://{models_bucket}/inductor/references-{i}.npz",
                    }
                    for i in range(PAIRS)
                ],
            },
            "timing": TIMING,
            "publish": {"modelName": name},
            "targets": [{"gpuType": "cpu", "gpusPerJob": 0}],
        },
    }
