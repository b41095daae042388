"""Cache entries: one per (target, route), written the moment a route's result is known.

Also the bridge to trtexec's JSON Lines tuning cache (`--tuningCacheFile`), so a user can bring one
in or take ours to trtexec. The trtexec format keeps less than we do (no stats, no versions): an
import fills what it can and marks the rest unknown.
"""

from __future__ import annotations

import json
import math
import sys
from collections import Counter
from datetime import datetime, timezone
from enum import Enum
from pathlib import Path
from typing import Iterable, Sequence

from pydantic import Field, field_validator

from enginewright.api.fingerprint import Fingerprint
from enginewright.api.models import WireModel
from enginewright.search.routes import Knob


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
    one serving process, every round interleaving all of them block by block (`search.paired`)."""

    ratio: float = Field(
        description="Route/default: the route's geometric-mean time over its loads and "
        "rounds over the default's in the same rounds (< 1: faster)."
    )
    low: float = Field(description="Lower end of the ratio's 95% confidence interval (across loads).")
    high: float = Field(description="Upper end of the ratio's 95% confidence interval (across loads).")
    rounds: int
    stopped: str = Field(
        description="Why the rounds stopped: faster (beats the noise margin), "
        "not-faster (cannot beat it), precise (interval within the precision), loads (the "
        "interval is made of lasting per-load offsets: more rounds would not narrow it), "
        "max-rounds, rejected (failed accuracy: timed only for the report)."
    )
    loads: int | None = Field(None, description="Loads of the route timed (entries before loads: one).")
    default_loads: int | None = Field(None, description="Loads of the default timed beside them.")
    df: int | None = Field(
        None,
        description="Degrees of freedom of the interval: pooled loads - engines "
        "(0: one load each, the rounds as samples).",
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
        description="Share of that spread's variance that round-to-round noise explains (the rest lasts for a load).",
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


# ------------------------------------------------------------------- trtexec JSON Lines interop
#
# The format as TensorRT 11.1's trtexec writes it (samples/common/sampleUtils.cpp,
# writeTuningCacheHeader / writeTuningCacheIteration; samples/common/sampleTuning.cpp): a header
# line with, in this order, tuner_version, accuracy_algorithm (the metric's printed name),
# accuracy_parameter {atol, rtol, epsilon = --accuracyThreshold}, searching_algorithm, command_line,
# default_build_route (every knob of the knob database at its default, in database order),
# tuning_expr, files (only the keys that are set; inputs / ref_outputs as {tensor: path} of the first
# reference pair) and argv; then one line per iteration: iter, build_route (every knob of the
# expression, defaults included), crash, error_message, accuracy_loss ({tensor: loss}, null when
# crashed or empty), gpu_time (null when crashed). nlohmann's dump() is compact, keeps non-ASCII
# text as UTF-8 and writes NaN and infinities as null. Mixed search restarts `iter` at 0 for its
# second phase, and that phase can repeat routes of the first.

TRTEXEC_METRIC_NAMES = {"l0": "L0", "abs": "L1", "squared": "L2", "max": "LInf", "cosine": "Cosine"}
"""Our metric -> the name trtexec prints (getAlgorithmName) and writes as accuracy_algorithm."""

# Import also accepts trtexec's --accuracyAlgorithm spellings and our own metric names.
_METRIC_FROM_TRTEXEC = {
    **{v.lower(): k for k, v in TRTEXEC_METRIC_NAMES.items()},
    "l1": "abs",
    "l2": "squared",
    "linf": "max",
    "cos": "cosine",
    **{k: k for k in TRTEXEC_METRIC_NAMES},
}

_CRASHED = (Outcome.crash, Outcome.build_failed, Outcome.timeout)
_TUNER_PREFIX = "tensorrt-tuner-"


def trtexec_metric(name: str) -> str | None:
    """Our metric name for a trtexec accuracy_algorithm (`Cosine`, `cos`, `L0`, ...); None if unknown."""
    return _METRIC_FROM_TRTEXEC.get(str(name).lower())


def _dump(obj: dict) -> str:
    """One line as nlohmann's dump() writes it: compact, UTF-8, non-finite numbers as null."""
    return json.dumps(_finite(obj), separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def _finite(value):
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


def parse_trtexec_route(text: str) -> list[tuple[str, str]]:
    """`-k1=v1 -k2=v2` as trtexec writes it, in its order; a knob whose default is empty is written
    `-k=`, so empty values are allowed here (unlike a route a user gives)."""
    pairs = []
    for token in (text or "").split():
        if not token.startswith("-") or "=" not in token:
            raise ValueError(f"build_route token {token!r} is not of the form -knob=value")
        name, value = token[1:].split("=", 1)
        pairs.append((name, value))
    return pairs


def default_build_route(knobs: Sequence[Knob]) -> str:
    """Every knob at its default, in the knob list's order (trtexec's buildDefaultPath)."""
    return " ".join(f"-{k.name}={k.default}" for k in knobs)


def trtexec_files(
    model: Path | None = None, inputs: Path | None = None, references: Path | None = None, engine: Path | None = None
) -> dict:
    """The header's `files` for a run: absolute paths of the model and the saved engine, and for the
    first reference pair {tensor: path} maps (our tensors live in one .npz per pair, so every tensor
    of a pair maps to that file). Only what is given is set."""
    import numpy as np

    def tensors(path: Path | None) -> dict[str, str] | None:
        if path is None:
            return None
        with np.load(path) as arrays:
            return {name: str(Path(path).resolve()) for name in arrays.files}

    return {
        k: v
        for k, v in {
            "onnx": str(Path(model).resolve()) if model and Path(model).suffix == ".onnx" else None,
            "save_engine": str(Path(engine).resolve()) if engine else None,
            "inputs": tensors(inputs),
            "ref_outputs": tensors(references),
        }.items()
        if v
    }


def _defaults(knobs: Sequence[Knob] | None, header: dict) -> dict[str, str]:
    if knobs:
        return {k.name: k.default for k in knobs}
    return dict(parse_trtexec_route(header.get("default_build_route") or ""))


def export_trtexec(
    entries: Iterable[CacheEntry],
    *,
    metric: str,
    atol: float,
    rtol: float,
    search_mode: str,
    threshold: float | None = None,
    knobs: Sequence[Knob] | None = None,
    tuner_version: str | None = None,
    files: dict | None = None,
    header: dict | None = None,
    first_iter: int = 0,
) -> str:
    """Our entries as trtexec's tuning cache: a header line, then one line per route.

    `knobs` (the compiler's knob list) gives `default_build_route` and lets each `build_route` list
    every tuned knob with its default, as trtexec does; without it routes are written canonical
    (non-default knobs only), which trtexec's --setBuildRoute reads the same way. `header` is an
    imported trtexec header: its command_line, tuning_expr, files and argv are kept. The tuner
    version is `tuner_version`, else the header's, else the one recorded by an import, else the
    compiler of the entries when they share one (`onnxruntime-1.23.2`: an import of the file is
    then used only by that compiler), else "unknown" (trtexec's own value when it has none).
    `gpu_time` is our mean, as trtexec's is a mean. `iter` starts at `first_iter`.
    """
    entries = list(entries)
    source = header or {}
    knob_list = list(knobs or [])
    defaults = _defaults(knob_list, source)
    order = [k.name for k in knob_list] or list(defaults)
    tuned = {name for e in entries for name in e.knobs}
    tuned_order = [n for n in order if n in tuned] + sorted(tuned - set(order))
    if tuner_version is None:
        recorded = [
            e.versions.compiler[len(_TUNER_PREFIX) :]
            for e in entries
            if e.versions and e.versions.compiler.startswith(_TUNER_PREFIX)
        ]
        compilers = {e.versions.compiler for e in entries if e.versions}
        tuner_version = (
            source.get("tuner_version")
            or (recorded[0] if recorded else None)
            or (compilers.pop() if len(compilers) == 1 else "unknown")
        )
    seen: dict[str, list[str]] = {name: [] for name in tuned_order}
    for e in entries:
        for name in tuned_order:
            value = e.knobs.get(name, defaults.get(name))
            if value is not None and value not in seen[name]:
                seen[name].append(value)
    expr = " ".join(f"-{n}={v[0]}" if len(v) == 1 else f"-{n}=[{'|'.join(v)}]" for n, v in seen.items() if v)
    out_header = {
        "tuner_version": tuner_version,
        "accuracy_algorithm": TRTEXEC_METRIC_NAMES[metric],
        "accuracy_parameter": {"atol": atol, "rtol": rtol, "epsilon": threshold if threshold is not None else 0.0},
        "searching_algorithm": search_mode,
        "command_line": source.get("command_line", "enginewright"),
        "default_build_route": default_build_route(knob_list) if knob_list else source.get("default_build_route", ""),
        "tuning_expr": source.get("tuning_expr", expr),
        "files": {k: v for k, v in {**source.get("files", {}), **(files or {})}.items() if v},
        "argv": source.get("argv", []),
    }
    lines = [_dump(out_header)]
    iteration, stage = first_iter, None
    for entry in entries:
        if stage is not None and entry.stage != stage:
            iteration = 0  # trtexec restarts `iter` for the second phase of a mixed search
        stage = entry.stage
        crashed = entry.outcome in _CRASHED
        if defaults and all(n in defaults for n in tuned_order):
            route = " ".join(f"-{n}={entry.knobs.get(n, defaults[n])}" for n in tuned_order)
        else:
            route = entry.route
        lines.append(
            _dump(
                {
                    "iter": iteration,
                    "build_route": route,
                    "crash": crashed,
                    "error_message": entry.error or "",
                    "accuracy_loss": entry.loss if entry.loss and not crashed else None,
                    "gpu_time": entry.timing.mean_ms if entry.timing and not crashed else None,
                }
            )
        )
        iteration += 1
    return "\n".join(lines) + "\n"


TRTEXEC_FIELDS = ("iter", "build_route", "crash", "error_message", "accuracy_loss", "gpu_time")
"""An iteration line's keys, in the order writeTuningCacheIteration writes them."""


def trtexec_compiler(header: dict) -> str:
    """The compiler a trtexec-format cache came from, as our entries name it: `tensorrt-tuner-<v>` for
    trtexec's own files; our exports of other compilers write their compiler (`onnxruntime-1.23.2`,
    `inductor-...`) as tuner_version."""
    version = str(header.get("tuner_version") or "unknown")
    if version.split("-", 1)[0] in ("onnxruntime", "inductor", "tensorrt") and "-" in version:
        return version
    return f"{_TUNER_PREFIX}{version}"


def _no_constant(name: str):
    raise ValueError(f"{name} is not JSON (nlohmann writes NaN and infinities as null)")


def _strict(line: str):
    return json.loads(line, parse_constant=_no_constant)


def _iteration(row) -> str | None:
    """Why `row` is not an iteration line as writeTuningCacheIteration writes it (None: it is)."""
    if not isinstance(row, dict):
        return "not a JSON object"
    missing = [k for k in TRTEXEC_FIELDS if k not in row]
    if missing:
        return f"no {', '.join(missing)}"
    if not isinstance(row["iter"], int) or isinstance(row["iter"], bool) or row["iter"] < 0:
        return f"iter {row['iter']!r} is not a count"
    if not isinstance(row["build_route"], str) or not isinstance(row["error_message"], str):
        return "build_route and error_message must be strings"
    if not isinstance(row["crash"], bool):
        return f"crash {row['crash']!r} is not true or false"
    loss, gpu_time = row["accuracy_loss"], row["gpu_time"]
    if loss is not None and not (
        isinstance(loss, dict)
        and all(v is None or (isinstance(v, (int, float)) and not isinstance(v, bool)) for v in loss.values())
    ):
        return "accuracy_loss must be null or {tensor: number or null}"
    if gpu_time is not None and (not isinstance(gpu_time, (int, float)) or isinstance(gpu_time, bool)):
        return f"gpu_time {gpu_time!r} is not a number"
    return None


def trtexec_reading(row: dict, *, defaults: dict[str, str], threshold: float | None) -> dict:
    """What one iteration line says, as the fields of our cache entry, inventing nothing: knobs at
    their default are dropped (so trtexec's all-default route is our default route `""`); `crash`
    is a crash with trtexec's message; a route trtexec did not crash gets its gpu_time as its time
    when it is > 0 (none when it is null or 0: such a route is not a measurement and is measured
    again when used); a null loss (NaN or infinite) fails, and so does a loss >= `threshold`."""
    from enginewright.search.routes import canonical_route, route_id

    # Interned: 100,000 routes of a few knobs share a handful of names and values.
    knob_values = {
        sys.intern(k): sys.intern(v) for k, v in parse_trtexec_route(row["build_route"]) if defaults.get(k) != v
    }
    route = canonical_route(knob_values)
    raw_loss = row["accuracy_loss"]
    loss = (
        {name: None if value is None else float(value) for name, value in raw_loss.items()}
        if isinstance(raw_loss, dict)
        else None
    )
    gpu_time = row["gpu_time"]
    if row["crash"]:
        outcome = Outcome.crash
    elif loss and (
        any(v is None for v in loss.values())
        or (threshold is not None and any(v is not None and v >= threshold for v in loss.values()))
    ):
        outcome = Outcome.accuracy_rejected
    else:
        outcome = Outcome.ok
    measured = gpu_time is not None and gpu_time > 0 and not row["crash"]
    return {
        "route_id": route_id(route),
        "route": route,
        "knobs": knob_values,
        "outcome": outcome,
        "error": row["error_message"] or None,
        "loss": loss,
        "gpu_time": gpu_time if measured else None,
    }


def trtexec_entry(reading: dict, *, target: str, versions: Versions) -> CacheEntry:
    """The cache entry of a `trtexec_reading`."""
    ms = reading["gpu_time"]
    timing = TimingStats(median_ms=ms, mean_ms=ms, p90_ms=ms, min_ms=ms, n=1) if ms is not None else None
    return CacheEntry(
        target=target,
        route_id=reading["route_id"],
        route=reading["route"],
        knobs=reading["knobs"],
        stage="imported",
        batch="trtexec",
        outcome=reading["outcome"],
        error=reading["error"],
        timing=timing,
        loss=reading["loss"],
        versions=versions,
    )


def trtexec_threshold(header: dict, threshold: float | None = None) -> float | None:
    """`threshold`, else the header's accuracy_parameter.epsilon when > 0 (0: none was given)."""
    if threshold is not None:
        return threshold
    epsilon = (header.get("accuracy_parameter") or {}).get("epsilon")
    return epsilon if isinstance(epsilon, (int, float)) and epsilon > 0 else None


class TrtexecCache:
    """A trtexec tuning cache read line by line: the header, then every iteration line either
    turned into a cache entry (`entries`, one per route: a route that a mixed search repeats keeps
    its first result) or, when it is damaged, listed in `damaged` as (line number, why) and skipped."""

    def __init__(
        self,
        lines: Iterable[str | bytes],
        *,
        target: str = "local",
        threshold: float | None = None,
        knobs: Sequence[Knob] | None = None,
        defaults: dict[str, str] | None = None,
        keep_entries: bool = True,
    ):
        lines = iter(lines)
        first = next(lines, None)
        if first is None or not _text(first).strip():
            raise ValueError("empty trtexec tuning cache (no header line)")
        try:
            header = _strict(_text(first))
        except ValueError as exc:
            raise ValueError(f"line 1 is not trtexec's header: {exc}") from None
        if not isinstance(header, dict) or "tuner_version" not in header:
            raise ValueError(
                "line 1 is not trtexec's header (it has no tuner_version"
                + ("; it is an iteration line)" if isinstance(header, dict) and "build_route" in header else ")")
            )
        self.header = header
        self.compiler = trtexec_compiler(header)
        self.threshold = trtexec_threshold(header, threshold)
        self.defaults = defaults if defaults is not None else _defaults(knobs, header)
        self.entries: list[CacheEntry] = []
        self.outcomes: Counter = Counter()
        self.damaged: list[tuple[int, str]] = []
        self.lines = 0  # iteration lines, damaged ones included
        self.repeats = 0
        seen: set[str] = set()
        versions = Versions(compiler=self.compiler)  # one for all: 100,000 copies would cost memory
        for number, raw in enumerate(lines, 2):
            try:
                line = _text(raw)
            except UnicodeDecodeError as exc:
                self.lines += 1
                self.damaged.append((number, f"not UTF-8 ({exc.reason} at byte {exc.start})"))
                continue
            if not line.strip():
                continue
            self.lines += 1
            try:
                row = _strict(line)
                why = _iteration(row)
                if why is None:
                    reading = trtexec_reading(row, defaults=self.defaults, threshold=self.threshold)
            except ValueError as exc:
                why = str(exc).splitlines()[0]
            if why is not None:
                self.damaged.append((number, why if line.endswith("}") else f"truncated or damaged: {why}"))
                continue
            if reading["route_id"] in seen:
                self.repeats += 1
                continue
            seen.add(reading["route_id"])
            self.outcomes[reading["outcome"].value] += 1
            if keep_entries:
                self.entries.append(trtexec_entry(reading, target=target, versions=versions))
        self.route_ids = seen
        baseline = next((e for e in self.entries if e.route == ""), None)
        if baseline is not None and baseline.passed:
            for e in self.entries:  # in place: a copy of 100,000 entries would double the peak memory
                e.baseline_ms = baseline.median_ms


def _text(line: str | bytes) -> str:
    return (line.decode("utf-8") if isinstance(line, bytes) else line).rstrip("\r\n")


def import_trtexec(
    text: str, *, target: str, threshold: float | None = None, knobs: Sequence[Knob] | None = None
) -> tuple[dict, list[CacheEntry]]:
    """Parse a trtexec tuning cache into (header, entries), one entry per route (`TrtexecCache`;
    damaged lines are skipped)."""
    cache = TrtexecCache(text.splitlines(), target=target, threshold=threshold, knobs=knobs)
    return cache.header, cache.entries
