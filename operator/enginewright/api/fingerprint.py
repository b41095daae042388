"""The fingerprint of a route's measurement: everything its result depends on, defined once.

A measurement is reused by another run only when their fingerprints are equal, part for part: the
same model bytes, input shapes, GPU (product and compute capability), compiler and its versions
(for Inductor: torch, Triton, CUDA), driver major, build settings, route, accuracy data, the
accuracy rule as it decides pass or fail, and the timing objective. The digest is the sha256 of the
fingerprint's canonical JSON (sorted keys, no spaces): two fingerprints match exactly when their
digests do.
"""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Mapping, Sequence

from pydantic import Field

from enginewright.api.models import WireModel

if TYPE_CHECKING:
    from enginewright.api.cache import Versions

TOLERANCE_METRICS = frozenset({"l0"})
"""Metrics whose loss depends on atol and rtol (l0 counts elements outside atol + rtol*|ref|)."""


class Fingerprint(WireModel):
    """What one route's measurement depends on. `route_id` is '' for a run's context (every part but
    the route), set per entry."""

    backend: str = Field(description="The backend that built and timed it (onnxruntime, inductor, tensorrt).")
    backend_options: dict = Field(default_factory=dict, description="The backend's own options (Inductor: device).")
    model_sha256: str
    input_shapes: dict[str, list[int]] = Field(default_factory=dict, description="Shapes of the timed inputs.")
    declared_shapes: list[dict] = Field(default_factory=list, description="Input shape profiles given to the build.")
    gpu_product: str | None = Field(
        None, description="GPU name as the compiler's runtime reports it (CPU: cpu-<arch>)."
    )
    compute_capability: str | None = None
    compiler: str = Field(description="Compiler name and version (Inductor: torch and Triton versions).")
    cuda: str | None = None
    driver_major: str | None = None
    settings: dict[str, str] = Field(default_factory=dict, description="Base build settings beside the route.")
    route_id: str = ""
    data_sha256: list[str] = Field(
        default_factory=list, description="sha256 of each inputs and references file, in order (inputs first)."
    )
    metric: str | None = Field(None, description="None: accuracy not checked (no references or threshold).")
    threshold: float | None = None
    atol: float | None = Field(None, description="Only for metrics that use it (l0).")
    rtol: float | None = Field(None, description="Only for metrics that use it (l0).")
    outputs: list[str] = Field(default_factory=list, description="Outputs checked; empty: every output.")
    objective: str

    def canonical(self) -> str:
        return json.dumps(self.model_dump(mode="json", by_alias=True), sort_keys=True, separators=(",", ":"))

    @property
    def digest(self) -> str:
        return hashlib.sha256(self.canonical().encode()).hexdigest()

    def for_route(self, route_id: str) -> Fingerprint:
        return self.model_copy(update={"route_id": route_id})

    def measured_with(self, versions: "Versions") -> Fingerprint:
        """The same with the stack parts taken from `versions` (what the measuring process reported)."""
        return self.model_copy(
            update={
                "gpu_product": versions.gpu_name,
                "compute_capability": versions.compute_capability,
                "compiler": versions.compiler,
                "cuda": versions.cuda,
                "driver_major": driver_major(versions.driver),
            }
        )

    def differences(self, other: Fingerprint) -> list[str]:
        """The parts (Python field names) in which `other` differs."""
        mine, theirs = self.model_dump(mode="json"), other.model_dump(mode="json")
        return sorted(k for k in mine if mine[k] != theirs.get(k))


def driver_major(driver: str | None) -> str | None:
    """`550.54.15` -> `550`."""
    return driver.split(".", 1)[0] if driver else None


def fingerprint_of(
    *,
    backend: str,
    model_sha256: str,
    versions: "Versions",
    objective: str,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    declared_shapes: Sequence[dict] = (),
    settings: Mapping[str, str] | None = None,
    data_sha256: Sequence[str] = (),
    metric: str | None = None,
    threshold: float | None = None,
    atol: float | None = None,
    rtol: float | None = None,
    outputs: Sequence[str] = (),
    route_id: str = "",
    backend_options: Mapping | None = None,
) -> Fingerprint:
    """A fingerprint with the accuracy rule reduced to what decides pass or fail: no threshold (or no
    references, which the caller says with metric=None) leaves it out; atol/rtol count only for the
    metrics that use them."""
    checked = metric is not None and threshold is not None
    tolerances = checked and metric in TOLERANCE_METRICS
    return Fingerprint(
        backend=backend,
        backend_options=dict(backend_options or {}),
        model_sha256=model_sha256,
        input_shapes={k: [int(d) for d in v] for k, v in (input_shapes or {}).items()},
        declared_shapes=list(declared_shapes),
        gpu_product=versions.gpu_name,
        compute_capability=versions.compute_capability,
        compiler=versions.compiler,
        cuda=versions.cuda,
        driver_major=driver_major(versions.driver),
        settings=dict(settings or {}),
        route_id=route_id,
        data_sha256=list(data_sha256),
        metric=metric if checked else None,
        threshold=float(threshold) if checked and threshold is not None else None,
        atol=float(atol) if tolerances and atol is not None else None,
        rtol=float(rtol) if tolerances and rtol is not None else None,
        outputs=sorted(outputs) if checked else [],
        objective=objective,
    )
