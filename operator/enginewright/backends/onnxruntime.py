"""ONNX Runtime (CPU) backend.

Knobs are real SessionOptions fields and session config entries that change speed. The engine is
a tar archive of the model as ORT optimized it (`optimized_model_filepath`) plus the settings that
produced it; loading it runs that optimized graph with graph optimization off, so what is measured
is what was built, not a re-optimization.
"""

from __future__ import annotations

import io
import json
import os
import tarfile
from pathlib import Path
from typing import TYPE_CHECKING, Mapping

import numpy as np

from enginewright.api.cache import Versions
from enginewright.api.routes import Knob
from enginewright.backends.base import Backend, BuildRequest, Runner
from enginewright.worker.capacity import usable_cores

if TYPE_CHECKING:
    from enginewright.accuracy.signature import Signature

_LEVELS = {
    "disable": "ORT_DISABLE_ALL",
    "basic": "ORT_ENABLE_BASIC",
    "extended": "ORT_ENABLE_EXTENDED",
    "all": "ORT_ENABLE_ALL",
}

# name -> (allowed values or None for open-ended, default, help)
_KNOBS = {
    "graph_optimization_level": (tuple(_LEVELS), "all", "Graph optimizations ORT applies before running."),
    "execution_mode": (("sequential", "parallel"), "sequential", "Run independent nodes in parallel."),
    "intra_op_num_threads": (None, "0", "Threads inside one operator; 0 = ORT's choice (physical cores)."),
    "inter_op_num_threads": (None, "0", "Threads across operators (parallel mode); 0 = ORT's choice."),
    "enable_mem_pattern": (("1", "0"), "1", "Pre-plan memory from the first run's allocation pattern."),
    "enable_cpu_mem_arena": (("1", "0"), "1", "Use the CPU memory arena allocator."),
    "session.intra_op.allow_spinning": (("1", "0"), "1", "Let idle intra-op threads spin instead of sleep."),
    "session.inter_op.allow_spinning": (("1", "0"), "1", "Let idle inter-op threads spin instead of sleep."),
    "session.disable_prepacking": (("0", "1"), "0", "Disable weight pre-packing of constant initializers."),
    "session.set_denormal_as_zero": (("0", "1"), "0", "Flush denormals to zero."),
    "session.disable_quant_qdq": (("0", "1"), "0", "Keep QDQ nodes instead of fusing to quantized ops."),
}
_SESSION_FIELDS = (
    "execution_mode",
    "intra_op_num_threads",
    "inter_op_num_threads",
    "enable_mem_pattern",
    "enable_cpu_mem_arena",
)


def thread_counts(cores: int) -> tuple[str, ...]:
    """intra_op_num_threads values worth trying on `cores`: ORT's choice (0), one thread (no pool:
    small models often win here), half and all of the cores."""
    return tuple(dict.fromkeys(["0", "1", str(max(1, cores // 2)), str(cores)]))


def _ort():
    import onnxruntime

    return onnxruntime


# ONNX Runtime's element type names (NodeArg.type) as numpy's (ml_dtypes' for bfloat16, float8 and
# int4, as the onnx package names them); one not here (strings) is not checked.
_ORT_DTYPES = {
    f"tensor({name})": name
    for name in ("float16", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "bool")
    + ("bfloat16", "int4", "uint4")
}
_ORT_DTYPES.update({"tensor(float)": "float32", "tensor(double)": "float64"})
_ORT_DTYPES.update({f"tensor(float8{k})": f"float8_{k}" for k in ("e4m3fn", "e4m3fnuz", "e5m2", "e5m2fnuz")})


def ort_signature(model_path: Path) -> "Signature":
    """Inputs (overridable initializers left out, as ORT leaves them out of get_inputs) and outputs of
    an ONNX model as an ORT session of it reads them. Raises on a model ORT cannot load."""
    from enginewright.accuracy.signature import Signature, TensorSpec

    one_thread = {"intra_op_num_threads": "1", "inter_op_num_threads": "1"}
    options = session_options(one_thread, optimize=False)  # (errors only: the model's warnings are its builds')
    session = _ort().InferenceSession(str(model_path), options, providers=["CPUExecutionProvider"])

    def spec(arg) -> TensorSpec:
        shape = None if arg.shape is None else tuple(arg.shape)  # [] is a scalar (or no shape declared)
        return TensorSpec(arg.name, _ORT_DTYPES.get(arg.type), shape)

    return Signature(tuple(map(spec, session.get_inputs())), tuple(map(spec, session.get_outputs())))


def session_options(settings: Mapping[str, str], *, optimize: bool = True):
    """SessionOptions for base settings + route knobs (route wins). Raises ValueError on a value
    ORT refuses, naming the knob."""
    ort = _ort()
    options = ort.SessionOptions()
    options.log_severity_level = 3
    for name, value in settings.items():
        try:
            if name == "graph_optimization_level":
                level = _LEVELS[value] if optimize else "ORT_DISABLE_ALL"
                options.graph_optimization_level = getattr(ort.GraphOptimizationLevel, level)
            elif name == "execution_mode":
                options.execution_mode = getattr(ort.ExecutionMode, f"ORT_{value.upper()}")
            elif name in ("intra_op_num_threads", "inter_op_num_threads"):
                number = int(value)
                if number < 0:
                    raise ValueError("must be >= 0")
                setattr(options, name, number)
            elif name in ("enable_mem_pattern", "enable_cpu_mem_arena"):
                if value not in ("0", "1"):
                    raise ValueError("must be 0 or 1")
                setattr(options, name, value == "1")
            else:
                options.add_session_config_entry(name, value)
        except (KeyError, ValueError, AttributeError) as exc:
            raise ValueError(f"onnxruntime knob {name}={value!r} is invalid: {exc}") from exc
    if not optimize:
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return options


class OnnxRuntimeRunner(Runner):
    # Its intra-op threads spin ~45 ms after a run: interleaved block by block, every block would wait
    # for the other session's threads to stop first. Whole rounds, one engine after the other.
    interleave_blocks = 1

    def __init__(self, session):
        self.session = session
        self.output_names = [o.name for o in session.get_outputs()]

    def run(self, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        values = self.session.run(self.output_names, dict(inputs))
        return dict(zip(self.output_names, values))

    def run_prepared(self, prepared) -> None:
        self.session.run(self.output_names, prepared)


class OnnxRuntimeBackend(Backend):
    name = "onnxruntime"
    engine_suffix = ".ort.tar"

    def knobs(self) -> list[Knob]:
        """The knob database; `intra_op_num_threads` swept by default over counts from the cores this
        worker may use (ORT's own choice, 0, is every physical core of the machine, however few the
        pod is given)."""
        knobs = [Knob(name, values, default, help) for name, (values, default, help) in _KNOBS.items()]
        counts = thread_counts(usable_cores())
        return [
            Knob(
                k.name,
                k.values,
                k.default,
                k.help + f" Swept by default over {', '.join(counts)} (from the cores this worker may use).",
                suggested=counts,
            )
            if k.name == "intra_op_num_threads"
            else k
            for k in knobs
        ]

    def versions(self) -> Versions:
        import platform

        return Versions(
            compiler=f"onnxruntime-{_ort().__version__}",
            gpu_name=f"cpu-{platform.machine()}",
            node=os.environ.get("NODE_NAME") or platform.node(),
        )

    def build(self, request: BuildRequest, route: dict[str, str]) -> bytes:
        ort = _ort()
        unknown = sorted(set(route) - set(_KNOBS))
        if unknown:
            raise ValueError(f"onnxruntime has no knob(s) {unknown}")
        settings = {**request.settings, **route}
        optimized = request.workdir / "optimized.onnx"
        options = session_options(settings)
        options.optimized_model_filepath = str(optimized)
        ort.InferenceSession(str(request.model_path), options, providers=["CPUExecutionProvider"])
        meta = json.dumps({"settings": settings, "onnxruntime": ort.__version__}, sort_keys=True).encode()
        # members from bytes, not `tar.add(path)`: a file's mtime (fractional, in a PAX header) and
        # owner made every build of the same route a different engine, and so a different sha256
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w") as tar:
            for arcname, data in (("model.onnx", optimized.read_bytes()), ("settings.json", meta)):
                info = tarfile.TarInfo(arcname)
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
        return buffer.getvalue()

    def load(self, engine: bytes, workdir: Path) -> Runner:
        ort = _ort()
        workdir.mkdir(parents=True, exist_ok=True)
        with tarfile.open(fileobj=io.BytesIO(engine), mode="r") as tar:
            missing = {"model.onnx", "settings.json"} - set(tar.getnames())
            if missing:
                raise ValueError(f"not an onnxruntime engine: it lacks {sorted(missing)}")
            tar.extractall(workdir, filter="data")
        settings = json.loads((workdir / "settings.json").read_text())["settings"]
        options = session_options(settings, optimize=False)
        session = ort.InferenceSession(str(workdir / "model.onnx"), options, providers=["CPUExecutionProvider"])
        return OnnxRuntimeRunner(session)

    def signature(self, model_path: Path, settings: Mapping[str, str]):
        """The model's inputs and outputs as ONNX Runtime reads them: a session of it (graph optimization
        off, one thread) is what loads it here, and ORT is imported already. Not `onnx_signature`:
        importing the onnx package (ml_dtypes first) took 1.2-2.4 s of every tune's and probe's start
        on 2 cores, longer than reading the model. ORT gives a graph input with no shape declared as it
        gives a scalar (`[]`): read as a scalar (onnx.checker refused such a model outright)."""
        return ort_signature(model_path)
