"""PyTorch Inductor backend (torch.compile), on a CUDA GPU or on CPU.

Input: a `torch.export` program (`torch.export.save`, usually `.pt2`). Knobs: options of
`torch._inductor.config` that change code generation, discovered from the installed torch (a knob
this torch does not have is simply not offered), and `compile` (true|false, exclusive).

`compile=false` is the eager route: the same flat graph module (below), under the same inference
mode, run without `torch.compile`; its engine carries no compile caches and is served eagerly on
load. It is offered by default because it costs no build and one measurement, and it is how a user
learns that compiling does not pay (on the H200 an eager fp16 MLP ran 0.058 ms/call, faster than
every compiled route, best 0.072). It is exclusive: Inductor options have no effect on it, so
planners never combine it with them and a route that does fails its build.

Engine: a tar of the exported program, the portable compile caches that the build produced
(`torch.compiler.save_cache_artifacts`: FX graph, AOTAutograd, Triton kernels, autotuning results)
and the route's options. Loading it in a fresh process hot-loads those caches and compiles the same
program with the same options, which hits the caches instead of re-tuning; the runner reports the
cache hits and misses so that can be checked. AOTInductor packages are not used: on the H200 machine
(torch 2.11, CUDA 13) they compiled but `aoti_load_package` segfaulted.

What is compiled is the program's graph as a flat function (tensors in, a flat tuple out), not
`ExportedProgram.module()`: that wrapper flattens and unflattens pytrees and checks input constraints
on every call, which made the loaded engine up to 1.9x slower per call than `torch.compile` on the
original module for launch-bound models (`bench/engine_overhead.py` measures both side by side).
(Compiling the graph without dynamo, `torch._inductor.compile`, was tried: it bypasses the FX-graph
and AOTAutograd caches, so a loaded engine would re-tune instead of hitting its caches.) The runner
holds inference mode for its whole life, so no call pays for entering it, and the code that times an
engine in the worker is the code that serves it (`Runner.run` / `run_prepared`).

Timing on CUDA (`timed_calls`): latency is the host clock around `run` (host arrays in and out);
throughput is one CUDA event pair around calls queued back to back on prepared inputs; gpuTime is an
event pair around each call, summed. Events are recorded on the current stream, the one the calls
(CUDA-graph replays included) run on. On CPU all three are the base class's host-clock timings.

On the host (CPU) the engine also carries the shared libraries its build compiled (`compiled/`: the
C++ of the kernels and of the wrapper, and of Inductor's probes of the CPU's vector instructions), put
back into the load's cache folder where the compiler would write them. The portable caches hold their
source only, so every fresh process compiled it again: ~8 s at the first call of a 15 ms MLP, 1.4 s
with the libraries. Inductor finds a library by a hash of its source and its compiler command, but
compiles with `-march=native` and the command names neither the CPU nor the compiler's version: a
library built on a newer CPU could crash an older one. So the engine records the building host's
CPU flags, compiler version and C library (`host_code_identity`), and a load uses the libraries only
on a host where all of them are the same; elsewhere it compiles, as before. CUDA engines carry none:
their Triton kernels are in the portable caches.

Inputs and outputs: inputs are the program's positional user inputs, by placeholder name; outputs
are named `output` (one tensor) or `output_0`, `output_1`, ... (a tuple), or by key (a dict).
Base settings: `device` (cuda|cpu), `input_dtype` (cast float inputs, e.g. float16 or bfloat16).
"""

from __future__ import annotations

import functools
import hashlib
import io
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path
from typing import Iterator, Mapping

import numpy as np

from enginewright.api.cache import Versions
from enginewright.api.routes import Knob
from enginewright.backends.base import OBJECTIVES, Backend, BackendUnavailable, BuildRequest, Runner, cuda_timed_calls

# Candidate knobs: name -> explicit values for non-boolean options (booleans sweep false/true).
CANDIDATES: dict[str, tuple[str, ...] | None] = {
    "max_autotune": None,
    "max_autotune_gemm_backends": ("ATEN", "TRITON", "ATEN,TRITON"),
    "max_autotune_pointwise": None,
    "coordinate_descent_tuning": None,
    "epilogue_fusion": None,
    "aggressive_fusion": None,
    "benchmark_fusion": None,
    "triton.cudagraphs": None,
    "triton.persistent_reductions": None,
    "freezing": None,
    "shape_padding": None,
    "comprehensive_padding": None,
    "layout_optimization": None,
    "split_reductions": None,
}
CUDA_ONLY = {"triton.cudagraphs", "triton.persistent_reductions", "max_autotune_pointwise"}
# Not a torch option: compile=false serves the exported program eagerly (see the module docstring).
COMPILE = Knob(
    "compile",
    ("true", "false"),
    "true",
    exclusive=True,
    help="false: run the exported program eagerly, without torch.compile (no build)",
)


def _torch():
    try:
        import torch
    except ImportError as exc:
        raise BackendUnavailable("the inductor backend needs PyTorch (pip install 'enginewright[torch]')") from exc
    return torch


def _config_value(config, dotted: str):
    node = config
    for part in dotted.split("."):
        if not hasattr(node, part):
            raise AttributeError(dotted)
        node = getattr(node, part)
    return node


def to_text(value) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def typed(value: str, default):
    """A route's string value as the type of the option's default."""
    if isinstance(default, bool):
        if value.lower() in ("true", "1", "on"):
            return True
        if value.lower() in ("false", "0", "off"):
            return False
        raise ValueError(f"expected true or false, got {value!r}")
    if isinstance(default, int):
        return int(value)
    if isinstance(default, float):
        return float(value)
    return value


def discover_knobs(config, device: str) -> list[Knob]:
    """`compile`, then the candidate knobs the installed torch has, with their defaults."""
    knobs = [COMPILE]
    for name, values in CANDIDATES.items():
        if device != "cuda" and name in CUDA_ONLY:
            continue
        try:
            default = _config_value(config, name)
        except AttributeError:
            continue
        allowed: tuple[str, ...]
        if isinstance(default, bool):
            allowed = ("false", "true")
        elif values is not None:
            allowed = tuple(dict.fromkeys((to_text(default),) + values))
        else:
            continue
        knobs.append(Knob(name, allowed, to_text(default)))
    return knobs


def compiles(route: Mapping[str, str]) -> bool:
    """Whether the route is compiled (`compile` is not false)."""
    try:
        return typed(route.get(COMPILE.name, COMPILE.default), True)
    except ValueError as exc:
        raise ValueError(f"inductor knob {COMPILE.name}: {exc}") from None


def route_options(config, route: Mapping[str, str]) -> dict:
    """Typed inductor options for `torch.compile(options=...)` (`compile` is not one of them);
    refuses unknown knobs, and any option on an eager (compile=false) route."""
    others = {name: value for name, value in route.items() if name != COMPILE.name}
    if not compiles(route) and others:
        listed = ", ".join(f"{name}={value}" for name, value in sorted(others.items()))
        raise ValueError(f"compile=false runs the program eagerly: options {listed} have no effect")
    options = {}
    for name, value in others.items():
        if name not in CANDIDATES:
            raise ValueError(f"inductor has no tunable knob {name!r}")
        try:
            default = _config_value(config, name)
        except AttributeError:
            raise ValueError(f"this torch has no inductor option {name!r}") from None
        try:
            options[name] = typed(value, default)
        except ValueError as exc:
            raise ValueError(f"inductor knob {name}: {exc}") from None
    return options


COMPILED = "compiled"  # the engine's folder of host libraries, laid out as under the build's cache folder
# (a probe's library comes with its `.load_ok` marker, which Inductor writes once the library loaded
# in a subprocess: with it, a fresh process skips that subprocess)
_LIBRARY = re.compile(r"compiled/([a-z0-9]{2}/[A-Za-z0-9_.]+\.so(?:\.load_ok)?)")


def _compiled_libraries(inductor_cache: Path) -> dict[str, bytes]:
    """The shared libraries a host build compiled (and the probes' markers), by their path under the
    engine's `compiled/`."""
    return {
        f"{COMPILED}/{path.relative_to(inductor_cache).as_posix()}": path.read_bytes()
        for path in sorted(inductor_cache.glob("*/*.so*"))
        if _LIBRARY.fullmatch(f"{COMPILED}/{path.relative_to(inductor_cache).as_posix()}")
    }


@functools.lru_cache(maxsize=1)
def host_code_identity() -> str | None:
    """What decides whether a library compiled on one host runs on another, which Inductor's own
    lookup does not see: it compiles with `-march=native` and finds a library by its source and its
    compiler command, which name neither the CPU nor the compiler's version. So: the CPU's instruction
    flags, the C++ compiler's version, the C library, the machine. None where any cannot be read
    (then no library is shipped or used)."""
    try:
        from torch._inductor.cpp_builder import get_compiler_version_info, get_cpp_compiler

        cpuinfo = Path("/proc/cpuinfo").read_text()
        flags = next(line.split(":", 1)[1] for line in cpuinfo.splitlines() if line.startswith("flags"))
        compiler = get_compiler_version_info(get_cpp_compiler())
    except Exception:  # another platform, another torch: compile on load, as every engine did
        return None
    if not compiler:
        return None
    parts = [" ".join(sorted(flags.split())), compiler, " ".join(platform.libc_ver()), platform.machine()]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:32]


def _members(tar: tarfile.TarFile, pattern: re.Pattern[str]) -> Iterator[tuple[re.Match[str], bytes]]:
    """The engine's regular members whose whole name `pattern` matches, with their bytes: what a load
    places by name (no links, no other paths)."""
    for member in tar.getmembers():
        found = pattern.fullmatch(member.name)
        if found is None or not member.isreg():
            continue
        source = tar.extractfile(member)
        assert source is not None  # a regular member
        yield found, source.read()


def _place_libraries(tar: tarfile.TarFile, inductor_cache: Path) -> int:
    """The engine's host libraries into the load's cache folder, where Inductor looks before it
    compiles: regular files named as Inductor names them, nothing else (no links, no other paths)."""
    placed = 0
    for found, data in _members(tar, _LIBRARY):
        target = inductor_cache / found.group(1)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        placed += 1
    return placed


ENGINE_FILES = ("program.pt2", "caches.bin", "settings.json")
AUTOTUNED = "autotuned"  # the engine's folder of what its build tuned at run time, laid out as under its caches
_BEST_CONFIG = re.compile(r"autotuned/inductor/((?:[A-Za-z0-9_-]+/)+[A-Za-z0-9_][A-Za-z0-9_.-]*\.best_config)")
# (a kernel's files, not a shared library: Triton also keeps the host modules it compiled, a driver's
# utilities and launchers, in its cache, which are this host's and would run on the loading host's CPU)
_TRITON_KERNEL = re.compile(r"autotuned/triton/([A-Za-z0-9_-]+/[A-Za-z0-9_][A-Za-z0-9_.-]*)(?<!\.so)")
_FILE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*(?<!\.so)")


def _autotuned(caches: Path) -> dict[str, bytes]:
    """What the build's first call tuned at run time, by its path under the engine's `autotuned/`:
    Inductor keeps each tuned kernel's best config (coordinate descent, or the best of a kernel's
    configs) in a `.best_config` file beside the kernel's source in its cache folder. Torch 2.11's
    portable caches carry those files too (`AutotuneCache.save`; on an H100 an engine without
    `autotuned/` served its build's config, session 41), older torches' may not, so they are kept.
    What the caches lack is the kernel compiled for the tuned config: without it that load compiled
    it again (1 kernel). So with the files come the Triton kernels of the configs they name (their
    `triton_cache_hash`), or, where a torch names none (2.11 writes null), every kernel the build
    compiled: 10 folders, 0.87 MB, for an MLP's one tuned kernel on an H100. What made loads tune
    again (2.5 s of every load of the MLP's coordinate-descent route on an H100, session 33, with a
    result of that load's own) was the kernels looking for their configs in the build's folder:
    `_serve_tuned_configs`. Nothing where nothing was tuned."""
    inductor, triton = caches / "inductor", caches / "triton"
    found: dict[str, bytes] = {}
    for path in sorted(inductor.rglob("*.best_config")):
        name = f"{AUTOTUNED}/inductor/{path.relative_to(inductor).as_posix()}"
        if path.is_file() and _BEST_CONFIG.fullmatch(name):
            found[name] = path.read_bytes()
    if not found:
        return {}
    kernels = [_json_field(data, "triton_cache_hash") for data in found.values()]
    named = all(isinstance(k, str) and k for k in kernels)
    folders = [triton / k for k in sorted(set(kernels))] if named else sorted(triton.glob("*"))
    for folder in folders:
        for path in sorted(folder.glob("*")) if folder.is_dir() else ():
            name = f"{AUTOTUNED}/triton/{path.relative_to(triton).as_posix()}"
            if path.is_file() and not path.is_symlink() and _TRITON_KERNEL.fullmatch(name):
                data = path.read_bytes()
                found[name] = _kernel_group(data, str) if path.name.startswith(_GROUP) else data
    return found


_GROUP = "__grp__"  # Triton's index of a kernel's files, which names each by its absolute path


def _kernel_group(data: bytes, path_of) -> bytes:
    """A Triton kernel's index (`__grp__<kernel>.json`, `{"child_paths": {file: path}}`) with each file's
    path made by `path_of(file)`: packed with the bare names (the build's folder means nothing
    elsewhere, and Triton ignores a path that does not exist, so the kernel would be compiled again), placed
    with the load's own paths. Only plain file names are kept; an index that is not one lists nothing."""
    children = _json_field(data, "child_paths")
    names = (
        [c for c in children if isinstance(c, str) and _FILE_NAME.fullmatch(c)] if isinstance(children, dict) else []
    )
    return json.dumps({"child_paths": {c: path_of(c) for c in sorted(names)}}, sort_keys=True).encode()


def _json_field(data: bytes, key: str):
    """`key` of the JSON object `data`, or None where it is not one."""
    value = _json_object(data)
    return None if value is None else value.get(key)


# a tuned config's own fields: how the kernel runs (its block sizes, warps, stages) and how it was chosen;
# the rest (Inductor's digest of the configs it chose among, the seconds it took, a Triton cache key)
# says nothing of the kernel that runs
CONFIG_BOOKKEEPING = ("configs_hash", "time_taken_ms", "triton_cache_hash")


def tuned_configs(engine: bytes) -> dict[str, dict]:
    """The kernel configs an Inductor engine's build chose by timing, by the kernel's path under its
    Inductor cache (`<2 characters>/<key>.best_config`, the same for the same kernel source in every
    build): each config's fields, with `found_by_coordesc` (chosen by coordinate descent, else the
    best of a kernel's few configs), without Inductor's bookkeeping. Empty where the build tuned
    nothing by timing (an eager engine, a CPU build). Two builds of one route choose again
    (`api.contracts.TunedAtBuild`)."""
    configs: dict[str, dict] = {}
    with tarfile.open(fileobj=io.BytesIO(engine), mode="r") as tar:
        for found, data in _members(tar, _BEST_CONFIG):
            fields = _json_object(data)
            if fields is not None:
                configs[found.group(1)] = {k: v for k, v in fields.items() if k not in CONFIG_BOOKKEEPING}
    return dict(sorted(configs.items()))


def _json_object(data: bytes) -> dict | None:
    """`data` as a JSON object, or None where it is not one (a cache file not written as expected)."""
    try:
        value = json.loads(data)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _place_autotuned(tar: tarfile.TarFile, caches: Path) -> dict[str, bytes]:
    """The engine's tuned configs and their kernels into the load's cache folders, where Inductor and
    Triton look before they tune or compile: regular files named as they name them, nothing else (no
    links, no other paths); a file already there is left as it is. Returns the configs placed, by
    their path under the load's Inductor cache folder."""

    def place(target: Path, data: bytes) -> bool:
        if target.exists():
            return False
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        return True

    placed: dict[str, bytes] = {}
    for found, data in _members(tar, _BEST_CONFIG):
        if place(caches / "inductor" / found.group(1), data):
            placed[found.group(1)] = data
    for found, data in _members(tar, _TRITON_KERNEL):
        target = caches / "triton" / found.group(1)
        if target.name.startswith(_GROUP):
            data = _kernel_group(data, lambda name, folder=target.parent: str(folder / name))
        place(target, data)
    return placed


def _kernel_file_here(filename: str | None, inductor_cache: str) -> str | None:
    """Where this process's copy of a Triton kernel's module is, for a kernel that names its build's
    (`<build's Inductor cache>/<2 characters>/<kernel hash>.py`): the folder of the same name in
    `inductor_cache`, where the load placed the kernel's tuned config."""
    if not filename:
        return filename
    path = Path(filename)
    return str(Path(inductor_cache) / path.parent.name / path.name)


def _tuned_config_here(autotuner, reload_kernel_from_src, check, hashable, inductor_cache: str) -> None:
    """What a kernel loaded from the engine's caches serves: the config its build tuned. Inductor
    keeps such a kernel (compiled for a static launcher) as its build pickled it, with the build's
    file name, so it looked for the tuned config in the build's cache folder (gone on another host)
    and wrote a re-tuned one there; and torch 2.9-2.11 adopt a tuned config only for a kernel of
    several compiled configs and drop its "found by coordinate descent" mark (pytorch#172819), so
    every load of a coordinate-descent route tuned its kernels again: the engine served was that
    load's, not the one measured (Triton compiled 9 kernels in one such load on an H100, session 35).
    Here the kernel looks in the load's folder (`inductor_cache`) and writes any config it tunes
    there (`describe()`'s `tuned_here` counts them); a tuned config is adopted with its mark, from
    the compiled ones when it is one of them, else compiled (from Triton's cache, where the engine
    placed its kernels). `check` and `hashable` are Inductor's `check_autotune_cache` and
    `triton_config_to_hashable`."""
    autotuner.filename = _kernel_file_here(autotuner.filename, inductor_cache)
    configs = [result.config for result in autotuner.compile_results]
    # (a later torch, which may add a config to a kernel at run time, asks whether this one may)
    grows = (
        {"dynamic_scale_rblock_eligible": autotuner._could_rblock_scale}
        if hasattr(autotuner, "_could_rblock_scale")
        else {}
    )
    cached, cache, info = check(configs, autotuner.filename, autotuner.inductor_meta, **grows)
    autotuner.autotune_cache_info = info
    autotuner.save_cache_hook = cache.save if cache else None
    if info.get("autotune_cache_state") != "hit" or len(cached) != 1:
        return
    best = cached[0]
    by_descent, wanted = bool(getattr(best, "found_by_coordesc", False)), hashable(best)
    for result in autotuner.compile_results:
        if hashable(result.config) == wanted:
            result.config.found_by_coordesc = by_descent
            autotuner.compile_results = [result]
            return
    if autotuner.fn.fn is None:  # (dropped when the build pickled the kernel)
        autotuner.fn = reload_kernel_from_src().fn
    autotuner.compile_results = [autotuner._precompile_config(best)]


def _compile_with_torchs_tools() -> None:
    """Triton kernels compiled in this process use the tools torch's own compiles use (`TRITON_PTXAS_PATH`
    to the ptxas torch ships, and the libdevice it asks for, where its configuration asks), whichever
    path compiles them. Torch sets them only where it compiles a kernel itself, in its process or in a
    compile worker: a load whose kernels all come from the engine's caches never does, so a kernel it
    compiles after all (the tuned config of a kernel compiled for another, `_tuned_config_here`) would
    use Triton's own ptxas, and Triton's cache key (which holds the ptxas version) would miss the build's
    kernel of the same config: read in torch's source as the cause of the 1 kernel an H100 load
    compiled (session 37); with this, an H100 load compiled none (session 38). Set at build and at load
    alike, so both name the same tools."""
    try:
        from torch._inductor.runtime import compile_tasks
    except ImportError:  # a torch without them: it sets no tool paths of its own
        return
    for name in ("_set_triton_ptxas_path", "_set_triton_libdevice_path"):
        set_tool = getattr(compile_tasks, name, None)
        if set_tool is not None:
            set_tool()


def _serve_tuned_configs() -> None:
    """Loaded kernels serve their build's tuned configs (`_tuned_config_here`) in this process."""
    try:
        from torch._inductor.runtime import triton_heuristics as heuristics
        from torch._inductor.runtime.cache_dir_utils import cache_dir
    except ImportError:  # a torch without them keeps no kernels for a static launcher
        return
    autotuner = getattr(heuristics, "CachingAutotuner", None)
    if autotuner is None or not hasattr(autotuner, "recheck_autotune_cache"):
        return

    def recheck_autotune_cache(self, reload_kernel_from_src):
        _tuned_config_here(
            self,
            reload_kernel_from_src,
            heuristics.check_autotune_cache,
            heuristics.triton_config_to_hashable,
            cache_dir(),
        )

    autotuner.recheck_autotune_cache = recheck_autotune_cache


# The libraries of Inductor's probes of the CPU's vector instructions, compiled in this process
# (`_probe_host`; forked builds inherit them): every host engine carries them as if its build compiled them.
_PROBES: dict[str, bytes] = {}
_PROBED = False


_PROBE = "from torch._inductor import cpu_vec_isa; cpu_vec_isa.valid_vec_isa_list()"


def _probe_host(cache: Path) -> list[str]:
    """Inductor's probes of the CPU's vector instructions, which compile and load a small library for
    each candidate: it keeps their answer for the process's life but their libraries only in the
    cache folder they ran in, so an engine built in a process that had probed elsewhere shipped
    without them and a fresh load compiled them again. Every compiled host build and the build
    process's preparation go through here, with `cache` a fresh folder of theirs: the first in a
    process runs the probes there and keeps their libraries in _PROBES. Where they were answered
    elsewhere already (a load, a compile outside this module), a fresh interpreter runs them in
    `cache`: the probes leave state on torch's objects, so asking again in this process would not
    compile what a fresh load looks for. That failing costs time only (a load then compiles them)."""
    global _PROBED
    from torch._inductor import cpu_vec_isa

    if _PROBED:
        return [str(isa) for isa in cpu_vec_isa.valid_vec_isa_list()]
    answered = cpu_vec_isa.valid_vec_isa_list.cache_info().currsize > 0
    before = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(cache)
    try:
        if answered:
            try:
                subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, timeout=600, check=True)
            except (subprocess.SubprocessError, OSError):
                pass
        found = cpu_vec_isa.valid_vec_isa_list()
        _PROBED = True  # (a probe that failed: the next build probes again, in its folder)
    finally:
        if before is None:
            os.environ.pop("TORCHINDUCTOR_CACHE_DIR", None)
        else:
            os.environ["TORCHINDUCTOR_CACHE_DIR"] = before
        _PROBES.update(_compiled_libraries(cache))  # what the probes compiled, also half-way
    return [str(isa) for isa in found]


def _cuda_expected(torch) -> bool:
    """Whether builds that name no device will build for CUDA (`device`: CUDA when torch sees one),
    asked without starting CUDA's driver, which would make the build process unsafe to fork from: a
    torch built with CUDA, devices not hidden, the driver's device files present. A wrong answer costs
    time only (the builds then probe the CPU themselves, or the probes go unused)."""
    hidden = os.environ.get("CUDA_VISIBLE_DEVICES", None) in ("", "-1")
    return torch.version.cuda is not None and not hidden and Path("/dev/nvidiactl").exists()


def _isolate_caches(folder: Path) -> None:
    """Per-route compile caches: a build captures only its own artifacts, a load starts empty."""
    folder.mkdir(parents=True, exist_ok=True)
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(folder / "inductor")
    os.environ["TRITON_CACHE_DIR"] = str(folder / "triton")


def _to_tensors(torch, inputs: Mapping[str, np.ndarray], names: list[str], device: str, dtype: str | None):
    missing = [n for n in names if n not in inputs]
    if missing:
        raise ValueError(f"inputs are missing {missing} (the program takes {names})")
    cast = getattr(torch, dtype) if dtype else None
    tensors = []
    for name in names:
        t = torch.from_numpy(np.ascontiguousarray(inputs[name])).to(device)
        if cast is not None and t.is_floating_point():
            t = t.to(cast)
        tensors.append(t)
    return tensors


def _outputs(result) -> dict[str, np.ndarray]:
    def host(t):
        t = t.detach()
        return (t.float() if t.is_floating_point() else t).cpu().numpy()

    if isinstance(result, dict):
        return {str(k): host(v) for k, v in result.items()}
    if isinstance(result, (tuple, list)):
        return {f"output_{i}": host(v) for i, v in enumerate(result)}
    return {"output": host(result)}


def _flat_program(torch, path: Path, device: str):
    """The exported program as a flat graph module (positional tensors in, a flat tuple out), its
    user input names, and a function that gives the outputs the program's own structure back."""
    exported = torch.export.load(str(path))
    names = [
        spec.arg.name
        for spec in exported.graph_signature.input_specs
        if spec.kind == torch.export.graph_signature.InputKind.USER_INPUT
    ]
    try:
        module = exported.module(check_guards=False)
    except TypeError:  # a torch without that argument
        module = exported.module()
    codegen = module.graph._codegen
    out_spec = getattr(getattr(codegen, "pytree_info", None), "out_spec", None)
    # torch.export's per-call hooks: the input-constraint check and a pair that switches on inputs
    # of type nn.Module (an engine's inputs are named tensors: the pair does nothing here). A forward
    # hook sends every call down nn.Module's slow path (all hooks, `always_call` bookkeeping): on
    # CPU it cost a 16x64 MLP ~10 us a call, compiled or not (bench/engine_overhead.py, `tiny`).
    module._forward_pre_hooks.clear()
    module._forward_hooks.clear()
    module._forward_hooks_always_called.clear()
    module.graph._codegen = torch.fx.graph.CodeGen()  # no pytree flatten/unflatten around the graph
    module.recompile()
    # Parameters keep their requires_grad as exported: turning it off made Inductor's CUDA graphs copy
    # every weight into the graph's memory on each call (2x slower on the H200 transformer block).
    module = module.to(device)  # (an exported module's train/eval mode is fixed at export)
    if out_spec is None or out_spec.is_leaf():

        def structured(flat):
            return flat[0] if out_spec is not None else flat
    else:
        from torch.utils._pytree import tree_unflatten

        def structured(flat):
            return tree_unflatten(list(flat), out_spec)

    return module, names, structured


_INFERENCE: dict = {"runners": 0, "mode": None}  # the inference mode the runners of this process share


def _hold_inference_mode(torch) -> None:
    """Enter inference mode with the first runner of the process; later runners share it. (Each
    runner entering its own would break when they close out of order: a runner's exit restores the
    mode as it was at its entry, and could leave another runner's calls outside inference mode.)"""
    if _INFERENCE["runners"] == 0:
        _INFERENCE["mode"] = torch.inference_mode()
        _INFERENCE["mode"].__enter__()
    _INFERENCE["runners"] += 1


def _release_inference_mode() -> None:
    """Leave inference mode with the last runner that closes."""
    _INFERENCE["runners"] -= 1
    if _INFERENCE["runners"] == 0:
        _INFERENCE["mode"].__exit__(None, None, None)
        _INFERENCE["mode"] = None


class InductorRunner(Runner):
    """A compiled program, or (`eager`) the same module run without torch.compile. The runners of a
    process hold inference mode from the first one's creation to the last one's `close`, in the
    thread that created them (an engine only infers), and mark a CUDA-graph step before each call
    only for compiled CUDA-graph routes, where the previous call's outputs are overwritten."""

    def __init__(
        self,
        torch,
        module,
        options: dict,
        names: list[str],
        structured,
        device: str,
        dtype: str | None,
        eager: bool = False,
    ):
        self.torch, self.names, self.device, self.dtype = torch, names, device, dtype
        self.structured = structured
        if device != "cuda":
            # On the host, engines share its caches and its thread pool: switching engines every few
            # calls timed them cold (an MLP of 33 MB of weights, 2.1 ms a call served alone, read
            # 3.2-4.4 ms in rounds of 10 blocks, 2.2-2.3 in whole rounds). Whole rounds, as ONNX
            # Runtime's. On a GPU the blocks stay: they cancel the host's drift (measure.rounds).
            self.interleave_blocks = 1
        self.eager = eager
        self.mark_step = not eager and device == "cuda" and bool(options.get("triton.cudagraphs"))
        self.info: dict = {}
        self._event_pairs: list = []
        self._counted = {}  # compile-cache counters before this engine loaded (others may share the process)
        self.tuned_in: tuple[Path, dict[str, bytes]] | None = None  # the load's Inductor cache folder, configs placed
        if not eager:
            from torch._dynamo.utils import counters

            self._counted = dict(counters["inductor"])
        _hold_inference_mode(torch)
        self._holds_inference = True
        self.compiled = module if eager else torch.compile(module, backend="inductor", options=options, dynamic=False)

    def _call(self, tensors):
        if self.mark_step:
            self.torch.compiler.cudagraph_mark_step_begin()
        return self.structured(self.compiled(*tensors))

    def run(self, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        return _outputs(self._call(self.prepare(inputs)))

    def prepare(self, inputs):
        return _to_tensors(self.torch, inputs, self.names, self.device, self.dtype)

    def run_prepared(self, prepared):
        return self._call(prepared)

    def timed_calls(self, objective: str, inputs, count: int) -> float:
        """CUDA: throughput and gpuTime from CUDA events on the current stream (the one the calls and
        CUDA-graph replays run on); latency (host clock around `run`, which waits for its host
        outputs), CPU and an unknown objective go to the base class."""
        if self.device != "cuda" or objective == "latency" or objective not in OBJECTIVES:
            return super().timed_calls(objective, inputs, count)
        torch = self.torch
        prepared = self.prepare(inputs)
        return cuda_timed_calls(
            torch,
            torch.cuda.current_stream(),
            self._event_pairs,
            objective,
            lambda: self.run_prepared(prepared),
            count,
            torch.cuda.synchronize,
        )

    def synchronize(self) -> None:
        if self.device == "cuda":
            self.torch.cuda.synchronize()

    def describe(self) -> dict:
        """Compile-cache hits and misses of this engine so far: a loaded engine must hit, never
        re-tune. An eager engine compiles nothing: all zero. `tuned_here` reads the load's own cache
        folder, which the process's Inductor writes to until another engine loads: asked after the
        first call, as the serving process does, it is this load's."""
        if self.eager:
            return {
                "compiled": 0,
                "fxgraph_cache_hit": 0,
                "fxgraph_cache_miss": 0,
                "tuned_placed": 0,
                "tuned_by_descent": 0,
                "tuned_here": 0,
            }
        from torch._dynamo.utils import counters

        inductor = counters["inductor"]

        def count(name: str) -> int:
            return int(inductor.get(name, 0) - self._counted.get(name, 0))

        folder, placed = self.tuned_in if self.tuned_in else (None, {})
        found = {p.relative_to(folder).as_posix(): p for p in folder.rglob("*.best_config")} if folder else {}
        return {
            "compiled": 1,
            "fxgraph_cache_hit": count("fxgraph_cache_hit"),
            "fxgraph_cache_miss": count("fxgraph_cache_miss"),
            # kernels whose tuned config the engine brought (`_place_autotuned`), and kernels this load
            # tuned itself (a config written beside them that is not one the engine brought): 0 for an
            # engine that serves what was measured
            "tuned_placed": len(placed),
            # of those, the ones its build chose by coordinate descent (the rest: the best of a few)
            "tuned_by_descent": sum(_json_field(data, "found_by_coordesc") is True for data in placed.values()),
            "tuned_here": sum(placed.get(name) != path.read_bytes() for name, path in found.items()),
        }

    def close(self) -> None:
        self.compiled = None
        self._event_pairs = []
        if self._holds_inference:
            _release_inference_mode()
            self._holds_inference = False
        if self.device == "cuda":
            self.torch.cuda.empty_cache()


class InductorBackend(Backend):
    name = "inductor"
    engine_suffix = ".inductor.tar"

    def __init__(self, device: str | None = None):
        self._device = device

    @property
    def device(self) -> str:
        if self._device is None:
            torch = _torch()
            self._device = "cuda" if torch.cuda.is_available() else "cpu"
        return self._device

    def knobs(self) -> list[Knob]:
        import torch._inductor.config as config  # noqa: F401  (imports torch)

        _torch()
        return discover_knobs(config, self.device)

    def versions(self) -> Versions:
        torch = _torch()
        gpu, driver, capability = None, None, None
        if self.device == "cuda":
            gpu = torch.cuda.get_device_name()
            capability = "{}.{}".format(*torch.cuda.get_device_capability())
            try:
                import pynvml

                pynvml.nvmlInit()
                driver = pynvml.nvmlSystemGetDriverVersion()
                driver = driver.decode() if isinstance(driver, bytes) else driver
            except Exception:
                driver = None
        else:
            import platform

            gpu = f"cpu-{platform.machine()}"
        try:
            import triton

            compiler = f"inductor-torch-{torch.__version__}-triton-{triton.__version__}"
        except ImportError:
            compiler = f"inductor-torch-{torch.__version__}"
        return Versions(
            compiler=compiler, cuda=torch.version.cuda, driver=driver, gpu_name=gpu, compute_capability=capability
        )

    def _runner(
        self, torch, program: Path, options: dict, device: str, dtype: str | None, eager: bool = False
    ) -> InductorRunner:
        # Built outside inference mode even when another engine of the process holds it: tensors made
        # under it are inference tensors, so an engine loaded second would differ from the first.
        with torch.inference_mode(False):
            module, names, structured = _flat_program(torch, program, device)
        return InductorRunner(torch, module, options, names, structured, device, dtype, eager)

    def prepare_builds(self, folder: Path, settings: Mapping[str, str]) -> list[str]:
        """What the first compile in a process does, once a batch instead of once a build: Inductor
        probes which vector instructions the CPU has by compiling and loading a small library for each
        (6 s of a 13-16 s build of an MLP on 2 cores), and hashes torch's own source for its cache keys.
        Both are kept for the process's life, so builds forked from it skip them; the probes' libraries
        go into every host engine, as when each build compiled them. Not the pattern matcher's lazy
        set-up: called ahead of a compile it registered patterns twice and every build failed
        ("Duplicate pattern"), and it asked CUDA's driver for its devices."""
        from torch._inductor.codecache import torch_key

        done = []
        torch_key()
        done.append("torch_key")
        device = settings.get("device") or self._device or ("cuda" if _cuda_expected(_torch()) else "cpu")
        if device != "cuda":
            found = _probe_host(folder / "inductor")
            done.append(f"vector instructions {found} ({len(_PROBES)} libraries)")
        return done

    def build(self, request: BuildRequest, route: dict[str, str]) -> bytes:
        shutil.rmtree(request.workdir / "caches-build", ignore_errors=True)  # (a build again in the same folder)
        _isolate_caches(request.workdir / "caches-build")
        torch = _torch()
        import torch._inductor.config as config

        options = route_options(config, route)
        eager = not compiles(route)
        settings = dict(request.settings)
        device = settings.pop("device", None) or self.device
        self._device = device
        dtype = settings.pop("input_dtype", None)
        if device != "cuda" and not eager:
            _probe_host(request.workdir / "caches-build" / "inductor")
        sample = request.sample_inputs
        if sample is None:
            raise ValueError("the inductor backend needs sample inputs to compile for their shapes")
        if device == "cuda":
            _compile_with_torchs_tools()
        runner = self._runner(torch, request.model_path, options, device, dtype, eager)
        try:
            runner.run(sample)  # compiles (and autotunes) for these shapes; eager: checks that it runs
            if device == "cuda":
                torch.cuda.synchronize()
        finally:
            runner.close()
        artifacts, libraries, tuned = b"", {}, {}
        if not eager:
            saved = torch.compiler.save_cache_artifacts()
            artifacts = saved[0] if saved else b""
            host = host_code_identity() if device != "cuda" else None
            if host is not None:
                libraries = {**_PROBES, **_compiled_libraries(request.workdir / "caches-build" / "inductor")}
            tuned = _autotuned(request.workdir / "caches-build")
        recorded = {COMPILE.name: "false"} if eager else {k: to_text(v) for k, v in options.items()}
        meta = {
            "options": recorded,
            "device": device,
            "input_dtype": dtype,
            "input_names": runner.names,
            "torch": torch.__version__,
        }
        if libraries:
            meta["host_code"] = host  # where the libraries may be used (`load`)
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w") as tar:
            own = (request.model_path.read_bytes(), artifacts, json.dumps(meta, sort_keys=True).encode())
            for arcname, data in (
                *zip(ENGINE_FILES, own),  # program.pt2, caches.bin, settings.json
                *libraries.items(),
                *tuned.items(),
            ):
                info = tarfile.TarInfo(arcname)
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
        return buffer.getvalue()

    def load(self, engine: bytes, workdir: Path) -> Runner:
        began = time.monotonic()
        workdir.mkdir(parents=True, exist_ok=True)
        _isolate_caches(workdir / "caches-load")
        with tarfile.open(fileobj=io.BytesIO(engine), mode="r") as tar:
            # only the engine's own three files, regular ones: its other members are placed by name
            # (`_place_libraries`, `_place_autotuned`) or not at all, so none lands in the load's cache folders
            own = [m for m in tar.getmembers() if m.name in ENGINE_FILES and m.isreg()]
            missing = sorted(set(ENGINE_FILES) - {m.name for m in own})
            if missing:
                raise ValueError(f"not an inductor engine: it lacks {missing} (as regular files)")
            tar.extractall(workdir, members=own, filter="data")
            meta = json.loads((workdir / "settings.json").read_text())
            # a host build's libraries, only on a host like the one that compiled them: else compiled here
            if meta.get("host_code") and meta["host_code"] == host_code_identity():
                _place_libraries(tar, workdir / "caches-load" / "inductor")
            tuned = _place_autotuned(tar, workdir / "caches-load")
        torch = _torch()
        import torch._inductor.config as config

        # No compile workers: a load takes its kernels from the engine's caches. Where Triton is
        # installed, a process's first compile otherwise starts Inductor's pool (a sidecar that
        # imports torch and forks a worker per core, 16 on the H200's host) beside the engines it
        # times. (A load that misses the caches, after a torch or Triton change, compiles one kernel
        # at a time.)
        config.compile_threads = 1
        if meta["device"] == "cuda":
            _compile_with_torchs_tools()
            _serve_tuned_configs()
        self._device = meta["device"]
        unpacked = time.monotonic()
        artifacts = (workdir / "caches.bin").read_bytes()
        if artifacts:
            torch.compiler.load_cache_artifacts(artifacts)
        cached = time.monotonic()
        options = route_options(config, meta["options"])
        runner = self._runner(
            torch,
            workdir / "program.pt2",
            options,
            meta["device"],
            meta.get("input_dtype"),
            not compiles(meta["options"]),
        )
        # where the load went (`child.load` reports them; `bench/tune_profile.py` sums them): the tar,
        # the compile caches, the program (deserialized, flattened, its weights on the device); the
        # first call, timed by the caller, then compiles it from the caches
        runner.tuned_in = (workdir / "caches-load" / "inductor", tuned)
        runner.load_parts = {
            "unpack": round(unpacked - began, 3),
            "caches": round(cached - unpacked, 3),
            "program": round(time.monotonic() - cached, 3),
        }
        return runner

    def signature(self, model_path: Path, settings: Mapping[str, str]):
        """The exported program's user inputs (placeholder names) and outputs (named as `_outputs` names
        them), dtypes and sizes from the program's example values; a symbolic size keeps its symbol's name.
        With the input_dtype setting, floating inputs are cast, so any floating dtype fits."""
        from enginewright.accuracy.signature import Signature, TensorSpec

        torch = _torch()
        exported = torch.export.load(str(model_path))
        placeholders = {n.name: n for n in exported.graph.nodes if n.op == "placeholder"}

        def spec(name: str, value) -> TensorSpec:
            if not isinstance(value, torch.Tensor):
                return TensorSpec(name)
            dtype = str(value.dtype).removeprefix("torch.")
            shape = tuple(int(d) if isinstance(d, int) else str(d) for d in value.shape)
            return TensorSpec(name, dtype, shape)

        kinds = torch.export.graph_signature
        inputs = tuple(
            spec(s.arg.name, placeholders[s.arg.name].meta.get("val") if s.arg.name in placeholders else None)
            for s in exported.graph_signature.input_specs
            if s.kind == kinds.InputKind.USER_INPUT
        )
        output_node = next(n for n in exported.graph.nodes if n.op == "output")
        flat = list(output_node.args[0]) if isinstance(output_node.args[0], (tuple, list)) else [output_node.args[0]]
        user = [
            value
            for s, value in zip(exported.graph_signature.output_specs, flat)
            if s.kind == kinds.OutputKind.USER_OUTPUT
        ]
        values = [v.meta.get("val") if hasattr(v, "meta") else None for v in user]
        out_spec = exported.call_spec.out_spec
        if out_spec is None or out_spec.is_leaf() or len(values) != getattr(out_spec, "num_children", -1):
            names = ["output"] if len(values) == 1 else [f"output_{i}" for i in range(len(values))]
        elif out_spec.type is dict:
            names = [str(k) for k in out_spec.context]
        else:
            names = [f"output_{i}" for i in range(len(values))]
        # Floating outputs come back as float32 (`_outputs`); a reference is compared in float64 anyway.
        return Signature(
            inputs, tuple(spec(n, v) for n, v in zip(names, values)), casts_inputs=bool(settings.get("input_dtype"))
        )
