"""TensorRT (>= 11.1) backend, written against the documented Python API.

NOT EXECUTED ANYWHERE YET: TensorRT's builder libraries cannot be installed on any machine this
project has (the registry's tensorrt-*-libs packages are stubs that download from an unreachable
index). Only the pure parts below (`parse_tensorrt_knobs` in `api.routes`, `build_route_string`,
`builder_settings`, `profile_shapes`) are tested. Nothing in the project simulates a TensorRT result.

Build: ONNX parser -> strongly typed network (TensorRT 11 has no FP16/INT8 builder flags) -> one
optimization profile from the spec's input shapes -> base builder settings (not tuner knobs) ->
`config.build_route` = the route -> `build_serialized_network`. Knobs come from
`config.all_build_routes`. Runtime: deserialize, one execution context, device buffers from torch,
`execute_async_v3` on the runner's stream. Timing (`timed_calls`): latency is the host clock around
`run` (copy in, execute, wait, copy out); throughput one CUDA event pair on that stream around calls
queued back to back on prepared buffers; gpuTime an event pair around each call, summed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from enginewright.api.cache import Versions
from enginewright.api.routes import Knob, canonical_route, parse_tensorrt_knobs
from enginewright.backends.base import (
    OBJECTIVES,
    Backend,
    BackendUnavailable,
    BuildRequest,
    Runner,
    cuda_timed_calls,
    onnx_signature,
)

# Base settings a TuningRun may pin for every route (IBuilderConfig attributes / flags).
INT_SETTINGS = {
    "builder_optimization_level": (0, 5),
    "tiling_optimization_level": (0, 3),  # trt.TilingOptimizationLevel value
    "max_num_tactics": (-1, 1 << 30),
    "max_aux_streams": (0, 64),
    "avg_timing_iterations": (1, 1 << 20),
    "hardware_compatibility_level": (0, 2),  # trt.HardwareCompatibilityLevel value
}
MEMORY_POOLS = {"workspace_bytes": "WORKSPACE", "tactic_shared_memory_bytes": "TACTIC_SHARED_MEMORY"}
FLAGS = {
    "tf32": "TF32",
    "strict_nans": "STRICT_NANS",
    "sparse_weights": "SPARSE_WEIGHTS",
    "direct_io": "DIRECT_IO",
    "refit": "REFIT",
    "version_compatible": "VERSION_COMPATIBLE",
}
TRUE, FALSE = ("true", "1", "on"), ("false", "0", "off")


def build_route_string(route: Mapping[str, str]) -> str:
    """`config.build_route` for a route: `-knob=value` tokens (canonical order); '' = default."""
    return canonical_route(dict(route))


@dataclass
class BuilderSettings:
    """Validated base settings, ready to apply to an IBuilderConfig."""

    ints: dict[str, int] = field(default_factory=dict)
    pools: dict[str, int] = field(default_factory=dict)
    flags: dict[str, bool] = field(default_factory=dict)


def builder_settings(settings: Mapping[str, str]) -> BuilderSettings:
    """Parse spec.compiler.settings for TensorRT; an unknown name or a bad value names the setting."""
    out = BuilderSettings()
    for name, value in settings.items():
        where = f"spec.compiler.settings.{name}"
        if name in INT_SETTINGS:
            low, high = INT_SETTINGS[name]
            try:
                number = int(value)
            except ValueError:
                raise ValueError(f"{where} must be an integer (got {value!r})") from None
            if not low <= number <= high:
                raise ValueError(f"{where} must be in [{low}, {high}] (got {number})")
            out.ints[name] = number
        elif name in MEMORY_POOLS:
            try:
                out.pools[MEMORY_POOLS[name]] = int(value)
            except ValueError:
                raise ValueError(f"{where} must be a number of bytes (got {value!r})") from None
        elif name in FLAGS:
            if value.lower() not in TRUE + FALSE:
                raise ValueError(f"{where} must be true or false (got {value!r})")
            out.flags[FLAGS[name]] = value.lower() in TRUE
        else:
            known = sorted([*INT_SETTINGS, *MEMORY_POOLS, *FLAGS])
            raise ValueError(f"{where} is not a TensorRT builder setting (known: {', '.join(known)})")
    return out


def profile_shapes(network_inputs: Mapping[str, Sequence[int]], input_shapes: Sequence) -> list[tuple]:
    """(name, min, opt, max) for every network input: from spec.compiler.inputShapes where given,
    else the input's static shape. A dynamic dimension (-1) without a shape range is an error, as is
    a range that contradicts a static dimension or names an input the network does not have."""
    given = {s.name: s for s in input_shapes}
    unknown = sorted(set(given) - set(network_inputs))
    if unknown:
        raise ValueError(
            f"spec.compiler.inputShapes names {unknown}, not inputs of the network (inputs: {sorted(network_inputs)})"
        )
    profile = []
    for name, dims in network_inputs.items():
        dims = list(dims)
        if name not in given:
            if any(d < 0 for d in dims):
                raise ValueError(
                    f"input {name!r} has dynamic shape {dims}: give its min/opt/max in spec.compiler.inputShapes"
                )
            profile.append((name, dims, dims, dims))
            continue
        shape = given[name]
        if len(shape.opt) != len(dims):
            raise ValueError(
                f"input {name!r} has rank {len(dims)}, spec.compiler.inputShapes gives rank {len(shape.opt)}"
            )
        for axis, d in enumerate(dims):
            if d >= 0 and not (shape.min[axis] == shape.opt[axis] == shape.max[axis] == d):
                raise ValueError(f"input {name!r} dimension {axis} is static ({d}); its range must be {d}")
        profile.append((name, list(shape.min), list(shape.opt), list(shape.max)))
    return profile


def _trt():
    try:
        import tensorrt as trt
    except ImportError as exc:
        raise BackendUnavailable(
            "the tensorrt backend needs TensorRT >= 11.1 (pip install 'enginewright[tensorrt]'); "
            "it is not installable on this project's machines"
        ) from exc
    return trt


class TensorRTRunner(Runner):
    """One execution context on its own stream. Input copies and output allocations happen on that
    stream too (a torch side stream does not wait for the default one), and `run_prepared` runs on
    the buffers of the latest `prepare`."""

    def __init__(self, trt, engine, torch):
        self.trt, self.engine, self.torch = trt, engine, torch
        self.context = engine.create_execution_context()
        self.stream = torch.cuda.Stream()
        self._event_pairs: list = []
        names = [engine.get_tensor_name(i) for i in range(engine.num_io_tensors)]
        self.inputs = [n for n in names if engine.get_tensor_mode(n) == trt.TensorIOMode.INPUT]
        self.outputs = [n for n in names if engine.get_tensor_mode(n) == trt.TensorIOMode.OUTPUT]

    def prepare(self, inputs: Mapping[str, np.ndarray]):
        torch, trt = self.torch, self.trt
        missing = [name for name in self.inputs if name not in inputs]
        if missing:
            raise ValueError(f"inputs {missing} missing (engine inputs: {self.inputs})")
        buffers = {}
        with torch.cuda.stream(self.stream):
            for name in self.inputs:
                dtype = trt.nptype(self.engine.get_tensor_dtype(name))
                tensor = torch.from_numpy(np.ascontiguousarray(inputs[name].astype(dtype))).cuda()
                self.context.set_input_shape(name, tuple(tensor.shape))
                self.context.set_tensor_address(name, tensor.data_ptr())
                buffers[name] = tensor
            for name in self.outputs:
                shape = tuple(self.context.get_tensor_shape(name))
                dtype = trt.nptype(self.engine.get_tensor_dtype(name))
                tensor = torch.empty(shape, dtype=getattr(torch, np.dtype(dtype).name), device="cuda")
                self.context.set_tensor_address(name, tensor.data_ptr())
                buffers[name] = tensor
        return buffers

    def run_prepared(self, prepared) -> None:
        if not self.context.execute_async_v3(self.stream.cuda_stream):
            raise RuntimeError("execute_async_v3 failed")

    def run(self, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        buffers = self.prepare(inputs)
        self.run_prepared(buffers)
        self.stream.synchronize()
        return {name: buffers[name].float().cpu().numpy() for name in self.outputs}

    def timed_calls(self, objective: str, inputs, count: int) -> float:
        """Throughput and gpuTime from CUDA events on the runner's stream; latency (host clock around
        `run`, which waits for its host outputs) and an unknown objective go to the base class."""
        if objective == "latency" or objective not in OBJECTIVES:
            return super().timed_calls(objective, inputs, count)
        prepared = self.prepare(inputs)
        return cuda_timed_calls(
            self.torch,
            self.stream,
            self._event_pairs,
            objective,
            lambda: self.run_prepared(prepared),
            count,
            self.stream.synchronize,
        )

    def synchronize(self) -> None:
        self.stream.synchronize()

    def close(self) -> None:
        self._event_pairs = []
        self.context = None
        self.engine = None


class TensorRTBackend(Backend):
    name = "tensorrt"
    engine_suffix = ".plan"

    def __init__(self, knobs_json: str | None = None):
        self._knobs_json = knobs_json

    def _logger(self):
        trt = _trt()
        return trt.Logger(trt.Logger.WARNING)

    def _build_routes(self) -> str:
        """TensorRT's `all_build_routes` JSON (read from the builder once, unless given)."""
        if self._knobs_json is None:
            trt = _trt()
            builder = trt.Builder(self._logger())
            self._knobs_json = builder.create_builder_config().all_build_routes
        return self._knobs_json

    def knobs(self) -> list[Knob]:
        version, knobs = parse_tensorrt_knobs(self._build_routes())
        if not knobs:
            raise BackendUnavailable("this TensorRT build reports no build-route knobs (all_build_routes is empty)")
        return knobs

    def cache_compiler(self) -> str:
        """trtexec's files name the tuner, not TensorRT: `tensorrt-tuner-<tuner_version>`."""
        self.knobs()
        return f"tensorrt-tuner-{parse_tensorrt_knobs(self._build_routes())[0]}"

    def versions(self) -> Versions:
        trt = _trt()
        import torch

        return Versions(
            compiler=f"tensorrt-{trt.__version__}",
            cuda=torch.version.cuda,
            gpu_name=torch.cuda.get_device_name(),
            compute_capability="{}.{}".format(*torch.cuda.get_device_capability()),
        )

    def build(self, request: BuildRequest, route: dict[str, str]) -> bytes:
        trt = _trt()
        logger = self._logger()
        builder = trt.Builder(logger)
        network = builder.create_network(1 << int(trt.NetworkDefinitionCreationFlag.STRONGLY_TYPED))
        parser = trt.OnnxParser(network, logger)
        if not parser.parse_from_file(str(request.model_path)):
            errors = "; ".join(str(parser.get_error(i)) for i in range(parser.num_errors))
            raise ValueError(f"ONNX parser: {errors}")
        config = builder.create_builder_config()
        settings = builder_settings(request.settings)
        for name, value in settings.ints.items():
            if name == "tiling_optimization_level":
                value = trt.TilingOptimizationLevel(value)
            elif name == "hardware_compatibility_level":
                value = trt.HardwareCompatibilityLevel(value)
            setattr(config, name, value)
        for pool, size in settings.pools.items():
            config.set_memory_pool_limit(getattr(trt.MemoryPoolType, pool), size)
        for flag, on in settings.flags.items():
            (config.set_flag if on else config.clear_flag)(getattr(trt.BuilderFlag, flag))
        inputs = {network.get_input(i).name: tuple(network.get_input(i).shape) for i in range(network.num_inputs)}
        profile = builder.create_optimization_profile()
        for name, low, opt, high in profile_shapes(inputs, request.input_shapes):
            profile.set_shape(name, low, opt, high)
        config.add_optimization_profile(profile)
        config.build_route = build_route_string(route)
        serialized = builder.build_serialized_network(network, config)
        if serialized is None:
            raise RuntimeError(f"TensorRT could not build route {build_route_string(route) or '(default)'}")
        return bytes(serialized)

    def signature(self, model_path: Path, settings: Mapping[str, str]):
        """The ONNX model's signature: a strongly typed network takes the ONNX types as they are."""
        try:
            import onnx  # noqa: F401
        except ImportError:  # an image without the onnx package: nothing is checked before building
            return None
        return onnx_signature(model_path)

    def load(self, engine: bytes, workdir: Path) -> Runner:
        trt = _trt()
        import torch

        runtime = trt.Runtime(self._logger())
        deserialized = runtime.deserialize_cuda_engine(engine)
        if deserialized is None:
            raise RuntimeError("TensorRT could not deserialize the engine (other TensorRT version or GPU?)")
        return TensorRTRunner(trt, deserialized, torch)
