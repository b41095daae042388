"""Cache entries: one per (target, route), written the moment a route's result is known.

Also the bridge to trtexec's JSON Lines tuning cache (`--tuningCacheFile`), so a user can bring one
in or take ours to trtexec. The trtexec format keeps less than we do (no stats, no versions): an
import fills what it can and marks the rest unknown.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from enum import Enum
from typing import Iterable

from pydantic import Field

from enginewright.api.models import WireModel


class Outcome(str, Enum):
    ok = "ok"
    crash = "crash"
    build_failed = "build-failed"
    timeout = "timeout"
    accuracy_rejected = "accuracy-rejected"


class TimingStats(WireModel):
    """Per-iteration execution time of one route, milliseconds."""

    median_ms: float
    mean_ms: float
    p90_ms: float
    min_ms: float
    n: int = Field(description="Timed iterations behind these numbers.")


class Versions(WireModel):
    """Everything a result depends on besides model, shapes and route."""

    compiler: str = Field(description="Compiler name and version, e.g. onnxruntime-1.20.1.")
    cuda: str | None = None
    driver: str | None = None
    gpu_name: str | None = None
    node: str | None = None


class CacheEntry(WireModel):
    """The result of one route on one target."""

    target: str = Field(description="GPU type (or 'cpu').")
    route_id: str
    route: str = Field(description="Canonical route string; '' is the default route.")
    knobs: dict[str, str] = Field(default_factory=dict)
    stage: str = Field("stage1", description="stage1, stage2, confirm, or imported.")
    batch: str | None = Field(None, description="The batch (Job) that measured it.")
    outcome: Outcome
    error: str | None = None
    timing: TimingStats | None = None
    baseline_ms: float | None = Field(None, description="Median of the default route measured in the same "
                                      "batch, on the same device: this entry's own baseline.")
    build_seconds: float | None = None
    loss: dict[str, float] | None = Field(None, description="Accuracy loss per output tensor (worst pair).")
    load_info: dict[str, float] | None = Field(None, description="How the engine loaded in the measuring "
                                               "process: seconds, compile-cache hits/misses.")
    engine_sha256: str | None = None
    engine_size: int | None = None
    engine_uri: str | None = None
    versions: Versions | None = None
    started_at: str | None = None
    finished_at: str | None = None

    @property
    def median_ms(self) -> float | None:
        return self.timing.median_ms if self.timing else None

    @property
    def passed(self) -> bool:
        """Measured and accuracy-passing: the only entries that can win."""
        return self.outcome is Outcome.ok and self.timing is not None

    def to_json(self) -> str:
        return json.dumps(self.wire(), sort_keys=True)

    @classmethod
    def from_json(cls, text: str | bytes) -> CacheEntry:
        return cls.model_validate_json(text)


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")


# ------------------------------------------------------------------- trtexec JSON Lines interop


def export_trtexec(entries: Iterable[CacheEntry], *, metric: str, atol: float, rtol: float,
                   search_mode: str, tuner_version: str = "", default_route: str = "") -> str:
    """Our entries as trtexec's tuning cache: a header line, then one line per route.

    trtexec reads `gpu_time` as mean compute time in ms; we write our mean for parity.
    """
    trt_metric = {"abs": "l1", "squared": "l2", "max": "lInf", "cosine": "cos", "l0": "l0"}[metric]
    header = {
        "tuner_version": tuner_version,
        "accuracy_algorithm": trt_metric,
        "accuracy_parameter": {"atol": atol, "rtol": rtol, "epsilon": 0.0},
        "searching_algorithm": search_mode,
        "command_line": "enginewright",
        "default_build_route": default_route,
        "tuning_expr": "",
        "files": {"onnx": "", "save_engine": "", "inputs": "", "ref_outputs": ""},
        "argv": [],
    }
    lines = [json.dumps(header)]
    for i, entry in enumerate(entries):
        crashed = entry.outcome in (Outcome.crash, Outcome.build_failed, Outcome.timeout)
        lines.append(json.dumps({
            "iter": i,
            "build_route": entry.route,
            "crash": crashed,
            "error_message": entry.error or "",
            "accuracy_loss": entry.loss,
            "gpu_time": entry.timing.mean_ms if entry.timing and not crashed else None,
        }))
    return "\n".join(lines) + "\n"


def import_trtexec(text: str, *, target: str, threshold: float | None) -> tuple[dict, list[CacheEntry]]:
    """Parse a trtexec tuning cache into (header, entries).

    Routes are re-canonicalized by the caller's planner when matched; here the route string is kept
    as written. A route whose loss reaches `threshold` on any tensor is marked accuracy-rejected.
    """
    from enginewright.search.routes import canonical_route, route_id, parse_route

    rows = [json.loads(line) for line in text.splitlines() if line.strip()]
    if not rows:
        raise ValueError("empty trtexec tuning cache")
    header, entries = rows[0], []
    if "tuner_version" not in header and "build_route" in header:
        raise ValueError("trtexec tuning cache has no header line (first line is a route)")
    for row in rows[1:]:
        knobs = parse_route(row.get("build_route", ""))
        route = canonical_route(knobs)
        loss = row.get("accuracy_loss")
        if row.get("crash"):
            outcome = Outcome.crash
        elif threshold is not None and loss and any(v >= threshold for v in loss.values()):
            outcome = Outcome.accuracy_rejected
        else:
            outcome = Outcome.ok
        gpu_time = row.get("gpu_time")
        timing = None
        if gpu_time is not None and outcome is not Outcome.crash:
            timing = TimingStats(median_ms=gpu_time, mean_ms=gpu_time, p90_ms=gpu_time, min_ms=gpu_time, n=1)
        entries.append(CacheEntry(
            target=target, route_id=route_id(route), route=route, knobs=knobs, stage="imported",
            outcome=outcome, error=row.get("error_message") or None, timing=timing, loss=loss,
            versions=Versions(compiler=f"tensorrt-tuner-{header.get('tuner_version', '?')}"),
        ))
    return header, entries
