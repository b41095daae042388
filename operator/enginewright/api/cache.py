"""Cache entries: one per (target, route), written the moment a route's result is known.

trtexec's JSON Lines tuning cache, to and from these entries, is `enginewright.trtexec`.
"""

from __future__ import annotations

import json
import math
from datetime import datetime, timezone
from enum import Enum

from pydantic import Field, field_validator

from enginewright.api.fingerprint import Fingerprint
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


class Paired(WireModel):
    """The route timed against the default in paired rounds on one device: several loads of each in
    one serving process, every round interleaving all of them block by block (`measure.paired`)."""

    ratio: float = Field(
        description="Route/default: the route's geometric-mean time over its loads and "
        "rounds over the default's in the same rounds (< 1: faster)."
    )
    low: float = Field(description="Lower end of the ratio's 95% confidence interval (across loads and rounds).")
    high: float = Field(description="Upper end of the ratio's 95% confidence interval (across loads and rounds).")
    rounds: int
    stopped: str = Field(
        description="Why the rounds stopped: faster (beats the noise margin), "
        "not-faster (cannot beat it), slower (slower than the default beyond the noise margin, "
        "placed before minRounds), precise (interval within the precision), loads (the "
        "interval is made of lasting per-load offsets: more rounds would not narrow it), "
        "max-rounds, rejected (failed accuracy: timed only for the report)."
    )
    loads: int | None = Field(None, description="Loads of the route timed (entries before loads: one).")
    default_loads: int | None = Field(None, description="Loads of the default timed beside them.")
    df: int | None = Field(
        None,
        description="Degrees of freedom of the interval: pooled loads - engines, or Welch-Satterthwaite's "
        "where the rounds' moments widen it (0: one load each, the rounds as samples).",
    )
    route_ms: float | None = Field(None, description="The route's geometric-mean ms per call in these rounds.")
    default_ms: float | None = Field(
        None,
        description="The default's geometric-mean ms per call in the same rounds: route_ms / default_ms is `ratio`.",
    )
    load_spread: float | None = Field(
        None,
        description="Standard deviation of one load's mean log time "
        "(about the relative spread between loads of one engine).",
    )
    round_share: float | None = Field(
        None,
        description="Share of the interval's variance that more rounds would shrink: round-to-round noise and "
        "the rounds' moments (the rest lasts for a load).",
    )
    moment_spread: float | None = Field(
        None,
        description="Standard deviation (log) of the rounds' moment in route/default: how far the host's "
        "state at a round moved one engine against the other, beyond the loads' round noise (a "
        "host-bound default against a CUDA-graph route); counted in the interval. None: no such term.",
    )

    @property
    def speedup(self) -> float:
        return 1.0 / self.ratio


class Measurements(WireModel):
    """All three of trtexec's measurements of one engine, each timed for one round."""

    latency_ms: float = Field(description="One call from host inputs to host outputs, host clock.")
    throughput_ms: float = Field(description="Time per call with calls queued back to back (1000/throughput).")
    gpu_time_ms: float = Field(description="Device time per call (CPU compilers: compute time per call).")
    host_cpu_ms: float | None = Field(
        None,
        description="CPU time of the calling thread per call over the "
        "throughput round: the host's work to issue one call (launches, "
        "Python). Near throughput_ms: the call is host-bound (launch overhead), so "
        "its time depends on the serving host's CPU.",
    )

    @property
    def throughput_per_second(self) -> float:
        return 1000.0 / self.throughput_ms

    @property
    def host_bound(self) -> bool | None:
        """The host, not the device, sets the pace: it spends 80% or more of a call's time issuing it."""
        if self.host_cpu_ms is None or not self.throughput_ms:
            return None
        return self.host_cpu_ms >= 0.8 * self.throughput_ms


class Host(WireModel):
    """The machine that measured: launch-bound times depend on its CPU and how busy it was."""

    cpu_model: str | None = None
    cpus: int | None = Field(None, description="CPUs the measuring process could use.")
    load_average: float | None = Field(None, description="1-minute load average when the route was measured.")
    busy_starts: int | None = Field(
        None,
        description="Timed requests and interleaved blocks of this route's measurement (its rounds "
        "against the default, its measurements) that began while the measuring process's other threads "
        "were still busy: the wait for them to go quiet gave up after 0.5 s, so those times include "
        "their work (a loaded host, or a thread that never rests). 0: every one began quiet.",
    )


class Versions(WireModel):
    """Everything a result depends on besides model, shapes and route."""

    compiler: str = Field(description="Compiler name and version, e.g. onnxruntime-1.20.1.")
    cuda: str | None = None
    driver: str | None = None
    gpu_name: str | None = None
    compute_capability: str | None = Field(None, description="The GPU's compute capability, e.g. 9.0.")
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
    objective: str | None = Field(None, description="What `timing` times: latency, throughput or gpuTime.")
    baseline_ms: float | None = Field(
        None,
        description="Median of the default route measured in the same "
        "batch, on the same device: this entry's own baseline (paired entries: "
        "the default's rounds interleaved with this route's).",
    )
    paired: Paired | None = Field(None, description="This route against the default, round by round.")
    measurements: Measurements | None = None
    measure_seconds: float | None = Field(
        None, description="Wall time spent timing this route, the default's paired rounds included."
    )
    build_seconds: float | None = None
    loss: dict[str, float | None] | None = Field(
        None,
        description="Accuracy loss per output tensor (worst pair); "
        "null: not finite (NaN or infinite, as trtexec writes it), failing "
        "any threshold.",
    )
    load_info: dict[str, float] | None = Field(
        None, description="How the engine loaded in the measuring process: seconds, compile-cache hits/misses."
    )
    engine_sha256: str | None = None
    engine_size: int | None = None
    engine_uri: str | None = None
    versions: Versions | None = None
    host: Host | None = None
    started_at: str | None = None
    finished_at: str | None = None
    fingerprint: Fingerprint | None = Field(
        None,
        description="Everything the measurement depends on "
        "(`api.fingerprint`); entries without one are never reused by another run.",
    )
    run: str | None = Field(None, description="The run that measured it (`tune`: the id in OUT/run.json).")
    reused_from: str | None = Field(
        None,
        description="Set when a run reuses this entry from an earlier run: "
        "where it came from (the run, and the cache holding it). Never set on the "
        "default route: it is measured fresh by every run.",
    )

    @property
    def reused(self) -> bool:
        return self.reused_from is not None

    @field_validator("loss")
    @classmethod
    def _finite_or_null(cls, loss: dict[str, float | None] | None) -> dict[str, float | None] | None:
        """A non-finite loss is stored as null: strict JSON has no NaN or Infinity."""
        if loss is None:
            return None
        return {name: value if value is not None and math.isfinite(value) else None for name, value in loss.items()}

    @property
    def max_loss(self) -> float | None:
        """The worst output's loss (infinite when one is not finite); None when not checked."""
        if not self.loss:
            return None
        return max(math.inf if value is None else value for value in self.loss.values())

    @property
    def median_ms(self) -> float | None:
        return self.timing.median_ms if self.timing else None

    @property
    def speedup(self) -> float | None:
        """The default's time over this route's: from the paired rounds when there are any, else from
        the batch baseline (entries written before pairing, or imported)."""
        if self.paired is not None:
            return self.paired.speedup
        if self.baseline_ms and self.median_ms:
            return self.baseline_ms / self.median_ms
        return None

    @property
    def spent_seconds(self) -> float:
        """Seconds spent timing it (old entries: the timed iterations only)."""
        if self.measure_seconds is not None:
            return self.measure_seconds
        return self.timing.mean_ms * self.timing.n / 1000 if self.timing else 0.0

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
