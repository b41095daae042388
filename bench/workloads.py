"""Benchmark workloads built from code that ships in installed packages (torch, torchvision): no
downloads. Each is exported with torch.export on the target device in fp16, with float32 inputs
(cast by the `input_dtype` setting) and float32 eager reference outputs from the same weights."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np


@dataclass
class Workload:
    name: str
    make: Callable  # () -> torch.nn.Module (float32, eval)
    input_shape: tuple[int, ...]
    note: str


def _resnet():
    import torchvision

    return torchvision.models.resnet50(weights=None)


def _encoder():
    import torch

    return torch.nn.TransformerEncoderLayer(
        d_model=1024, nhead=16, dim_feedforward=4096, batch_first=True, dropout=0.0, norm_first=True
    )


def _mlp():
    import torch

    return torch.nn.Sequential(
        torch.nn.Linear(4096, 16384),
        torch.nn.GELU(),
        torch.nn.Linear(16384, 4096),
        torch.nn.GELU(),
        torch.nn.Linear(4096, 4096),
    )


def _convnet():
    import torch

    layers = []
    channels = 3
    for width in (32, 64, 64, 128):
        layers += [torch.nn.Conv2d(channels, width, 3, padding=1), torch.nn.BatchNorm2d(width), torch.nn.ReLU()]
        channels = width
    layers += [torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(channels, 10)]
    return torch.nn.Sequential(*layers)


def _attention(dim: int = 768, heads: int = 12):
    import torch

    class Attention(torch.nn.Module):
        def __init__(self, dim=768, heads=12):
            super().__init__()
            self.heads = heads
            self.norm = torch.nn.LayerNorm(dim)
            self.qkv = torch.nn.Linear(dim, 3 * dim)
            self.out = torch.nn.Linear(dim, dim)

        def forward(self, x):
            b, n, d = x.shape
            q, k, v = self.qkv(self.norm(x)).view(b, n, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
            y = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
            return x + self.out(y.transpose(1, 2).reshape(b, n, d))

    return Attention(dim, heads)


WORKLOADS = [
    Workload("resnet50", _resnet, (32, 3, 224, 224), "torchvision ResNet-50, random weights, batch 32"),
    Workload("encoder", _encoder, (16, 512, 1024), "transformer encoder layer d=1024 h=16 ff=4096, 16x512 tokens"),
    Workload("mlp", _mlp, (4096, 4096), "MLP 4096-16384-4096-4096 with GELU, 4096 rows"),
    Workload("convnet", _convnet, (64, 3, 64, 64), "4-layer conv+BN+ReLU net, batch 64, 64x64"),
    Workload("attention", _attention, (8, 1024, 768), "pre-norm causal self-attention block d=768 h=12, 8x1024"),
    # CPU-sized (bench/aa_power.py --device cpu): well under a millisecond a call on 2 cores
    Workload(
        "attention-small",
        lambda: _attention(256, 4),
        (1, 64, 256),
        "pre-norm causal self-attention block d=256 h=4, 1x64 (CPU-sized)",
    ),
]


def prepare(workload: Workload, folder: Path, device: str, dtype: str = "float16", pairs: int = 2) -> dict:
    """Export the workload (fp16 weights) and write float32 inputs and float32 eager references,
    keyed by the exported program's input name; returns the paths."""
    import torch

    folder.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    model = workload.make().eval().to(device)
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal(workload.input_shape).astype(np.float32) for _ in range(pairs)]
    refs = []
    with torch.no_grad():
        for x in xs:
            refs.append(model(torch.from_numpy(x).to(device)).float().cpu().numpy())
    half = model.to(getattr(torch, dtype))
    sample = torch.from_numpy(xs[0]).to(device).to(getattr(torch, dtype))
    exported = torch.export.export(half, (sample,))
    name = next(
        spec.arg.name
        for spec in exported.graph_signature.input_specs
        if spec.kind == torch.export.graph_signature.InputKind.USER_INPUT
    )
    program = folder / f"{workload.name}.pt2"  # the report's plot is titled by the model's file name
    torch.export.save(exported, str(program))
    inputs, references = [], []
    for i, (x, ref) in enumerate(zip(xs, refs)):
        np.savez(folder / f"inputs-{i}.npz", **{name: x})
        np.savez(folder / f"references-{i}.npz", output=ref)
        inputs.append(folder / f"inputs-{i}.npz")
        references.append(folder / f"references-{i}.npz")
    return {"program": program, "inputs": inputs, "references": references}


@dataclass
class Setup:
    """A workload prepared for the product's own worker code (bench/aa_power.py,
    bench/process_offsets.py): its files, a clock for progress lines, worker contexts and the
    default route's engine."""

    out: Path
    device: str
    workload: Workload
    files: dict
    timing: object  # api.models.Timing
    began: float

    def say(self, message: str) -> None:
        import time

        print(f"[{time.monotonic() - self.began:6.1f}s] {message}", flush=True)

    def context(self, backend: str = "inductor", options: dict | None = None, margin: float = 0.03, measure_cpus=None):
        """A WorkerContext for serving processes of `backend` (Inductor by default) on the workload."""
        from enginewright.store import LocalStore
        from enginewright.worker.context import Accuracy, WorkerContext

        return WorkerContext(
            backend=backend,
            model=self.files["program"],
            store=LocalStore(self.out / "store"),
            prefix="runs/bench",
            target="local",
            workdir=self.out / "work",
            engine_suffix=".inductor.tar",
            settings={"input_dtype": "float16"} if self.device == "cuda" else {},
            timing=self.timing,
            noise_margin=margin,
            accuracy=Accuracy(self.files["inputs"][:1], [], "cosine", None),
            route_timeout=600,
            backend_options=options if options is not None else {"device": self.device},
            progress=self.say,
            measure_cpus=measure_cpus,
        )

    def build_default(self) -> Path:
        """The default route's engine, built by the product's build child: OUT/engine.inductor.tar."""
        return self.build({}, "engine", f"{self.workload.name}: default route")

    def build(self, knobs: dict, name: str, label: str | None = None) -> Path:
        """The route of `knobs`, built by the product's build child: OUT/<name>.inductor.tar."""
        from enginewright.api.routes import Route
        from enginewright.worker.measure import build

        built = build(self.context(), Route.of(knobs), "bench", "bench")
        if built.engine_path is None:
            raise SystemExit(f"build of {label or name} failed: {built.entry.error}")
        engine = self.out / f"{name}.inductor.tar"
        engine.write_bytes(built.engine_path.read_bytes())
        self.say(f"{label or name} built in {built.entry.build_seconds:.1f}s")
        return engine


def setup(out: Path, workload: str | Workload, device: str, objective: str, repo: Path) -> Setup:
    """Prepare `workload` (one of WORKLOADS by name, or a Workload of a script's own) under OUT/data
    (fp16 on CUDA, fp32 on CPU) and put the repository's code on the PYTHONPATH the worker's child
    processes inherit."""
    import os
    import time

    from enginewright.api.models import Timing

    began = time.monotonic()
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [str(repo / "operator"), str(repo / "bench"), os.environ.get("PYTHONPATH", "")]
    )
    out.mkdir(parents=True, exist_ok=True)
    chosen = workload if isinstance(workload, Workload) else next(w for w in WORKLOADS if w.name == workload)
    files = prepare(chosen, out / "data", device, dtype="float16" if device == "cuda" else "float32")
    return Setup(out, device, chosen, files, Timing(objective=objective), began)
