"""Loss metrics between an engine's outputs and reference outputs.

Metrics (per output tensor, computed in float64):
- abs: mean absolute error          - squared: mean squared error
- max: maximum absolute error       - cosine: 1 - cosine similarity of the flattened tensors, in [0, 2]
- l0: fraction of elements with |out - ref| > atol + rtol * |ref| (trtexec's l0)

Non-finite values: a position where output and reference hold the same non-finite value (both NaN,
or the same infinity) counts as equal; any other non-finite position makes the loss infinite, so
the tensor fails whatever the threshold. A tensor fails when its loss is >= threshold; a route
passes only if every output of every reference pair passes; the loss reported per output is the
worst over the pairs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np

from enginewright.api.models import Accuracy as AccuracySpec, Metric, default_of

METRICS = tuple(m.value for m in Metric)
ATOL, RTOL = default_of(AccuracySpec, "atol"), default_of(AccuracySpec, "rtol")


class AccuracyError(ValueError):
    """Outputs cannot be compared (missing tensor, shape mismatch, ...); the message names the tensor."""


def loss(
    output: np.ndarray,
    reference: np.ndarray,
    metric: str,
    *,
    atol: float = ATOL,
    rtol: float = RTOL,
    name: str = "output",
) -> float:
    """Loss of one tensor against its reference."""
    if metric not in METRICS:
        raise AccuracyError(f"unknown metric {metric!r} (one of {', '.join(METRICS)})")
    out = np.asarray(output)
    ref = np.asarray(reference)
    if out.shape != ref.shape:
        raise AccuracyError(f"tensor {name!r}: output shape {out.shape} differs from reference shape {ref.shape}")
    if out.dtype.kind not in "fiub" or ref.dtype.kind not in "fiub":
        raise AccuracyError(f"tensor {name!r}: cannot compare dtypes {out.dtype} and {ref.dtype}")
    out = out.astype(np.float64).ravel()
    ref = ref.astype(np.float64).ravel()
    if out.size == 0:
        return 0.0
    finite = np.isfinite(out) & np.isfinite(ref)
    if not finite.all():
        same = (np.isnan(out) & np.isnan(ref)) | (out == ref)
        if not (finite | same).all():
            return float("inf")
        out, ref = out[finite], ref[finite]
        if out.size == 0:
            return 0.0
    diff = out - ref
    if metric == "abs":
        return float(np.mean(np.abs(diff)))
    if metric == "squared":
        return float(np.mean(diff * diff))
    if metric == "max":
        return float(np.max(np.abs(diff)))
    if metric == "l0":
        return float(np.mean(np.abs(diff) > atol + rtol * np.abs(ref)))
    norm_out, norm_ref = np.linalg.norm(out), np.linalg.norm(ref)
    if norm_out == 0.0 and norm_ref == 0.0:
        return 0.0
    if norm_out == 0.0 or norm_ref == 0.0:
        return 1.0
    # Scale first: the dot product of two large tensors overflows before the ratio does.
    cos = float(np.dot(out / norm_out, ref / norm_ref))
    # Rounding can put |cos| a few ulps above 1 (opposite tensors gave 2.0000000000000004).
    return min(2.0, max(0.0, 1.0 - cos))


@dataclass
class Verdict:
    """Per-output worst loss over the pairs, and whether the route passes."""

    losses: dict[str, float]
    threshold: float
    failing: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not self.failing

    def summary(self) -> str:
        if self.passed:
            return f"accuracy passed (max loss {max(self.losses.values(), default=0.0):.3g} < {self.threshold:g})"
        worst = ", ".join(f"{n}={self.losses[n]:.3g}" for n in self.failing)
        return f"accuracy failed: {worst} (threshold {self.threshold:g})"


def compare(
    outputs: Sequence[Mapping[str, np.ndarray]],
    references: Sequence[Mapping[str, np.ndarray]],
    metric: str,
    threshold: float,
    *,
    atol: float = ATOL,
    rtol: float = RTOL,
    checked: Sequence[str] = (),
) -> Verdict:
    """Compare the outputs of every reference pair; every reference tensor must be produced.
    `checked`: compare only these outputs (empty: every reference tensor); that each checked output
    has a reference is `accuracy.signature`'s check, made before anything is built."""
    if threshold <= 0:
        raise AccuracyError(f"accuracy threshold must be > 0 (got {threshold})")
    if len(outputs) != len(references):
        raise AccuracyError(f"{len(outputs)} output sets for {len(references)} reference pairs")
    losses: dict[str, float] = {}
    for pair, (out, ref) in enumerate(zip(outputs, references)):
        for name, expected in ref.items():
            if checked and name not in checked:
                continue
            if name not in out:
                raise AccuracyError(
                    f"reference pair {pair}: the engine produced no output {name!r} (it produced {sorted(out)})"
                )
            value = loss(out[name], expected, metric, atol=atol, rtol=rtol, name=name)
            losses[name] = max(losses.get(name, 0.0), value)
    failing = sorted(n for n, v in losses.items() if not v < threshold)
    return Verdict(losses, threshold, failing)
