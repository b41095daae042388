"""trtexec's JSON Lines tuning cache (`--tuningCacheFile`) to and from our cache entries, so a user
can bring one in or take ours to trtexec. The trtexec format keeps less than we do (no stats, no
versions): an import fills what it can and marks the rest unknown.
"""

from __future__ import annotations

import json
import math
import sys
from collections import Counter
from pathlib import Path
from typing import Iterable, Sequence

from enginewright.api.cache import CacheEntry, Outcome, TimingStats, Versions
from enginewright.api.routes import Knob, canonical_route, route_id

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
