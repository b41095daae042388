"""The backend interface: knobs, build, load, run, time, versions; and how one engine is timed."""

from __future__ import annotations

import abc
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Mapping

import numpy as np

from enginewright.api.cache import Versions
from enginewright.api.routes import Knob

if TYPE_CHECKING:
    from enginewright.accuracy.signature import Signature


class BackendUnavailable(RuntimeError):
    """The compiler this backend needs is not installed or has no usable device here."""


@dataclass
class BuildRequest:
    """Everything a build depends on besides the route."""

    model_path: Path
    settings: dict[str, str] = field(default_factory=dict)
    input_shapes: list = field(default_factory=list)  # api.models.InputShape
    workdir: Path = Path(".")
    sample_inputs: dict | None = None  # named arrays of the first reference pair, for shape-specializing compilers


OBJECTIVES = ("latency", "throughput", "gpuTime")  # api.models.Objective's values


class Runner(abc.ABC):
    """A loaded engine. The code that times it is the code that serves it: `run` for one request,
    `prepare` + `run_prepared` for calls on inputs already in place."""

    # Blocks a round of this engine is split into when it is timed interleaved with others in one
    # process (measure.rounds.interleaved_round); 1: whole rounds, for runtimes whose threads spin on
    # after a run.
    interleave_blocks: int = 10
    # Seconds of the parts of the backend's `load` that made this runner, by part, where the backend
    # times them (the serving process reports them beside the load's own: `worker.child.load`).
    load_parts: Mapping[str, float] = MappingProxyType({})

    @abc.abstractmethod
    def run(self, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Run once on host arrays, return host arrays by output name (the result waited for)."""

    def prepare(self, inputs: Mapping[str, np.ndarray]):
        """Inputs in the form `run_prepared` wants (e.g. already on the device)."""
        return inputs

    def run_prepared(self, prepared) -> None:
        self.run(prepared)

    def timed_calls(self, objective: str, inputs: Mapping[str, np.ndarray], count: int) -> float:
        """Total milliseconds of `count` calls, timed as `objective` says (see `api.models.Timing`):
        latency: each call host arrays in -> host arrays out, host clock; throughput: calls back to
        back on prepared inputs, waited for once; gpuTime: each call's device time, summed. This CPU
        version times throughput and gpuTime alike (there is no device); GPU runners override it."""
        if objective == "latency":
            start = time.perf_counter()
            for _ in range(count):
                self.run(inputs)
            return (time.perf_counter() - start) * 1000.0
        if objective not in OBJECTIVES:
            raise ValueError(f"unknown timing objective {objective!r} (one of {', '.join(OBJECTIVES)})")
        prepared = self.prepare(inputs)
        start = time.perf_counter()
        for _ in range(count):
            self.run_prepared(prepared)
        return (time.perf_counter() - start) * 1000.0

    def synchronize(self) -> None:
        """Wait for work this runner queued on a device (CPU runners: nothing is queued)."""

    def host_cpu_ms(self, inputs: Mapping[str, np.ndarray], calls: int = 4, trials: int = 8) -> float:
        """CPU time of the calling thread to issue one call on prepared inputs: the median over
        `trials` of `calls` calls, each trial after the device went idle and timed before waiting for
        it (a wait could spin and count), with few calls so a device-bound engine's queue never
        fills. Near the call's time: the host sets the pace (launch overhead)."""
        prepared = self.prepare(inputs)
        spent = []
        for _ in range(trials):
            self.synchronize()
            started = time.thread_time()
            for _ in range(calls):
                self.run_prepared(prepared)
            spent.append((time.thread_time() - started) / calls * 1000.0)
        self.synchronize()
        return statistics.median(spent)

    def describe(self) -> dict:
        """How the engine loaded (e.g. compile-cache hits), recorded in the cache entry."""
        return {}

    def close(self) -> None:
        """Release device memory and handles."""


LEAD_CALLS = 1  # untimed calls queued ahead of the timed ones (cuda_timed_calls)


def cuda_timed_calls(torch, stream, pairs: list, objective: str, call, count: int, synchronize) -> float:
    """Total milliseconds of `count` calls of `call()` from CUDA events recorded on `stream` (the one
    the calls run on): throughput one event pair around the calls back to back, gpuTime a pair around
    each call. `pairs` is the runner's list of event pairs, grown here ahead of the timed calls and
    reused (torch creates an event on its first record, which inside the timed calls would add the
    creation to a call's device time); `synchronize` waits for the device before and after.

    One untimed call is queued first (LEAD_CALLS), so the first timed event waits behind it, as every
    call of a serving loop waits behind the one before: an event recorded on a drained device fires at
    once, and the call's device time then holds the host's own time to reach its first kernel. On the
    H200 that read a device-bound MLP (1.8 ms a call) 19-20% slow in blocks of one call, and the
    attention block's CUDA-graph route 0.23 vs 0.175 ms in ten blocks of a round against the
    round in one go (bench/block_bias.py, docs/benchmarks/raw/s9/call2): so interleaved rounds, made
    of blocks, read every engine slower than it serves, by a share that grows with its blocks."""
    wanted = 1 if objective == "throughput" else count
    while len(pairs) < wanted:
        pair = (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
        pair[0].record(stream)
        pair[1].record(stream)
        pairs.append(pair)
    used = pairs[:wanted]
    synchronize()
    for _ in range(LEAD_CALLS):
        call()
    if objective == "throughput":
        used[0][0].record(stream)
        for _ in range(count):
            call()
        used[0][1].record(stream)
    else:
        for start, end in used:
            start.record(stream)
            call()
            end.record(stream)
    synchronize()
    return sum(start.elapsed_time(end) for start, end in used)


class Backend(abc.ABC):
    """One compiler."""

    name: str = ""
    engine_suffix: str = ".engine"

    @abc.abstractmethod
    def knobs(self) -> list[Knob]:
        """Every route knob this compiler (as installed) supports."""

    @abc.abstractmethod
    def versions(self) -> Versions:
        """Compiler, CUDA, driver and GPU versions, for provenance and catalog keys."""

    def cache_compiler(self) -> str:
        """The compiler as a trtexec-format tuning cache names it (its `tuner_version`): a cache
        imported from a file is used only by the compiler that wrote it."""
        return self.versions().compiler

    @abc.abstractmethod
    def build(self, request: BuildRequest, route: dict[str, str]) -> bytes:
        """Build the route into engine bytes (raises on a build failure)."""

    @abc.abstractmethod
    def load(self, engine: bytes, workdir: Path) -> Runner:
        """Load engine bytes (possibly in a fresh process) into a runner."""

    def prepare_builds(self, folder: Path, settings: Mapping[str, str]) -> list[str]:
        """Work that every build would repeat, done once in a build process before its builds are forked
        from it (`worker.child.builds`; `settings`: the builds' base settings), files it writes in
        `folder`; what was done, by name. It must leave no thread running and start no GPU driver (the
        build process checks, and starts again without it if either happened)."""
        return []

    def signature(self, model_path: Path, settings: Mapping[str, str]) -> "Signature | None":
        """The model's inputs and outputs as this compiler reads them (None: not known here, nothing is
        checked before building). Raises on a model the compiler cannot read."""
        return None


def onnx_signature(model_path: Path) -> "Signature":
    """Inputs (initializers left out) and outputs of an ONNX model, with their element types and
    dimensions (a dim_param is a named dynamic size). Raises on a file that is not a valid ONNX model."""
    import onnx
    from onnx import helper

    from enginewright.accuracy.signature import Signature, TensorSpec

    onnx.checker.check_model(str(model_path))
    model = onnx.load(str(model_path), load_external_data=False)

    def spec(value) -> TensorSpec:
        tensor = value.type.tensor_type
        try:
            dtype = str(np.dtype(helper.tensor_dtype_to_np_dtype(tensor.elem_type))) if tensor.elem_type else None
        except (KeyError, TypeError, ValueError):
            dtype = None  # a type numpy has no name for (bfloat16, float8): not checked
        shape = None
        if tensor.HasField("shape"):
            shape = tuple(d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in tensor.shape.dim)
        return TensorSpec(value.name, dtype, shape)

    initializers = {i.name for i in model.graph.initializer}
    return Signature(
        tuple(spec(i) for i in model.graph.input if i.name not in initializers),
        tuple(spec(o) for o in model.graph.output),
    )
