"""One route step in an isolated child process, so that a crash, hang or out-of-memory in one route
is recorded and the batch goes on.

    python -m enginewright.worker.child REQUEST.json

`build`: compile the route and write the engine bytes; the result is written as JSON to the
request's `result` path (a child that dies leaves none and the parent records a crash). `builds`:
a batch's build process: it imports once, then forks a process of its own for every build the
parent asks for, so that each build keeps its isolation without paying an interpreter start. `serve`: load
engine bytes (never a rebuild), run every reference pair and check accuracy, warm up, then hold the
engine and time it whenever the parent asks; the parent loads and drops further engines in the same
process, so that engines timed against each other run on the same thread (paired rounds,
confirmation rounds).
"""

from __future__ import annotations

import gc
import json
import os
import signal
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import Callable, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from enginewright.api.models import Accuracy as AccuracySpec, Timing, default_of
from enginewright.backends.base import Runner
from enginewright.measure.rounds import EngineFailed, Held, interleaved_round
from enginewright.measure.timing import calls_per_round, measure_all, warm_up


class ChildRequest(BaseModel):
    """What the worker hands a child process (one JSON file); the one place its fields and defaults
    are written."""

    model_config = ConfigDict(extra="forbid")

    action: Literal["build", "builds", "serve"]
    backend: str
    backend_options: dict = Field(default_factory=dict)
    workdir: str
    result: str | None = Field(None, description="Where build writes its JSON result.")
    engine: str = Field(
        description="build: where to write the engine; serve: the first engine to load ('': named on the first "
        "stdin line, `await_engine`)."
    )
    key: str = Field("engine", description="serve: the name the first engine is timed by.")
    check: bool = Field(True, description="serve: check the first engine's accuracy against `references`.")
    model: str | None = None
    settings: dict[str, str] = Field(default_factory=dict)
    input_shapes: list[dict] = Field(default_factory=list)
    route: dict[str, str] = Field(default_factory=dict)
    inputs: list[str] = Field(default_factory=list, description=".npz files of the reference inputs.")
    references: list[str] = Field(default_factory=list, description="Empty: accuracy is not checked.")
    outputs: list[str] = Field(default_factory=list, description="The outputs checked; empty: every reference.")
    metric: str = default_of(AccuracySpec, "metric").value
    threshold: float | None = None
    atol: float = default_of(AccuracySpec, "atol")
    rtol: float = default_of(AccuracySpec, "rtol")
    timing: Timing = Field(default_factory=Timing)


def load_npz(path: str) -> dict[str, np.ndarray]:
    with np.load(path, allow_pickle=False) as data:
        return {name: data[name] for name in data.files}


def _backend(request: ChildRequest):
    from enginewright.backends import get_backend

    return get_backend(request.backend, **request.backend_options)


def build(request: ChildRequest) -> dict:
    from enginewright.api.models import InputShape
    from enginewright.backends.base import BuildRequest

    if request.model is None:
        raise ValueError("a build request needs `model`, the model file to build (got none)")
    backend = _backend(request)
    workdir = Path(request.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    sample = load_npz(request.inputs[0]) if request.inputs else None
    engine = backend.build(
        BuildRequest(
            model_path=Path(request.model),
            settings=request.settings,
            input_shapes=[InputShape.model_validate(s) for s in request.input_shapes],
            workdir=workdir,
            sample_inputs=sample,
        ),
        request.route,
    )
    Path(request.engine).write_bytes(engine)
    return {"build_seconds": time.monotonic() - started, "engine_size": len(engine)}


def check(runner: Runner, request: ChildRequest, inputs: list[dict]) -> dict:
    """Run every reference pair and compare (no references: passed, nothing checked)."""
    if not request.references:
        return {"loss": None, "passed": True, "failing": []}
    if request.threshold is None:
        raise ValueError("a serve request with `references` needs `threshold`, the accuracy bound (got none)")
    from enginewright.accuracy import compare

    references = [load_npz(p) for p in request.references]
    outputs = [runner.run(pair) for pair in inputs]
    verdict = compare(
        outputs,
        references,
        request.metric,
        request.threshold,
        atol=request.atol,
        rtol=request.rtol,
        checked=request.outputs,
    )
    return {"loss": verdict.losses, "passed": verdict.passed, "failing": verdict.failing, "summary": verdict.summary()}


def serve(request: ChildRequest) -> None:
    """Hold engines loaded in this process and time them whenever the parent asks: paired rounds of
    a route against the default, confirmation rounds. The request's engine is loaded first (key
    `request.key`); the reply is one `ready` JSON line (versions, load info, accuracy, calls per
    round); a request that names no engine was launched before its engine was built (`await_engine`)
    and loads the one its first stdin line names. Then one JSON request per stdin line, one JSON reply
    line each:

    - `{"op": "load", "key": K, "engine": PATH, "workdir": DIR, "check": bool}` loads another engine
      beside the others (optionally with its own `backend`/`backend_options`) and replies as `ready`;
    - `{"op": "time", "key": K}` -> `{"ms": per-call time of one round, "calls": calls per round
      from now on}`, timed as `timing.objective` says (no key: the first engine);
    - `{"op": "interleave", "keys": [A, B, ...]}` -> `{"ms": [A's, B's, ... per-call time],
      "calls": [their calls per round from now on], "busy_starts": blocks of this round begun
      before the other threads went quiet}`: one round of those engines, interleaved in blocks
      (`interleaved_round`);
    - a timed call that raises (`time`, `interleave`) -> `{"failed": the engine's key, "error": ...}`
      (the process goes on; a crash of the process names no engine);
    - `{"op": "measurements", "key": K}` -> latency, throughput and device time;
    - `{"op": "drop", "keys": [K, ...]}` closes those engines -> `{"dropped": [K, ...]}`.

    Engines timed against each other share this process and its one thread: two processes holding
    the same engine ran lastingly apart on the H200 (up to 1.7x in gpuTime, by the CPU each process's
    thread sat on; bench/process_offsets.py), so a route timed in a process of its own against the
    default in another measured the processes, not the engines. A round lasts about
    `timing.roundSeconds`: one short burst of host noise must not decide it."""
    reply = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # anything else the libraries print goes to the log, not into the protocol

    def say(message: dict) -> None:
        reply.write(json.dumps(message) + "\n")
        reply.flush()

    backend = None
    if not request.engine:
        request, backend = await_engine(request, say)
        if not request.engine:
            return  # the parent closed the pipe first: its batch ended before the engine was built
    timing = request.timing
    objective = timing.objective.value
    inputs = [load_npz(p) for p in request.inputs]
    engines: dict[str, Held] = {}

    def failed(exc: Exception) -> dict:
        traceback.print_exc()
        return {"ready": False, "error": f"{type(exc).__name__}: {exc}".strip()[:4000]}

    def answer(timed) -> dict:
        """The reply of a timing request, or which engine's call raised."""
        try:
            return timed()
        except EngineFailed as exc:
            traceback.print_exc()
            return {"failed": exc.key, "error": str(exc)}

    try:
        say(
            load(
                engines,
                request.key,
                Path(request.engine),
                Path(request.workdir) / "load",
                request.check,
                backend if backend is not None else _backend(request),
                request,
                inputs,
            )
        )
    except Exception as exc:
        say(failed(exc))
        return
    for line in sys.stdin:
        message = json.loads(line) if line.strip() else {}
        op, key = message.get("op"), message.get("key", request.key)
        if op == "load":
            backend_request = request.model_copy(
                update={k: message[k] for k in ("backend", "backend_options") if k in message}
            )
            try:
                say(
                    load(
                        engines,
                        key,
                        Path(message["engine"]),
                        Path(message["workdir"]),
                        bool(message.get("check", True)),
                        _backend(backend_request),
                        request,
                        inputs,
                        same_engine(engines, Path(message["engine"])),
                    )
                )
            except Exception as exc:
                say(failed(exc))
        elif op == "time":
            held = engines[key]
            say(
                answer(lambda: {"ms": held.round(objective, inputs[0], timing.round_seconds), "calls": held.calls})
            )  # (calls after the round: it may re-size them)
        elif op == "interleave":
            many = [engines[k] for k in message["keys"]]
            say(answer(lambda: interleaved_reply(many, objective, inputs[0], timing.round_seconds)))
        elif op == "measurements":
            held = engines[key]
            say({"measurements": measure_all(held.runner, inputs[0], timing.round_seconds, held.calls).wire()})
        elif op == "drop":
            for dropped in message["keys"]:
                engines.pop(dropped).runner.close()
            gc.collect()  # what the engines' compiled code still held (device memory included)
            say({"dropped": message["keys"]})
        else:
            break
    for held in reversed(list(engines.values())):
        held.runner.close()


def await_engine(request: ChildRequest, say: Callable[[dict], None]) -> tuple[ChildRequest, object | None]:
    """A serving process launched before its first engine was built (`Server.launch` without one):
    import what the backend's engines need (`PRELOADED`, and the backend's own module) while the
    batch builds, say so (`{"imported": [modules]}`, `Server.wait_imported`), then wait for the first
    stdin line, `{"op": "load", "engine": PATH}`, which may also name the engine's `key` and whether
    its accuracy is `check`ed (a process launched ahead for a confirmation learns them only then).
    Returns the request naming that engine (none when the parent closed the pipe first) and the
    backend, made already (None when making it failed: the load makes it again, and its error is the
    reply). Only imports run here, no engine is loaded or timed while a build may run (importing
    torch 2.11's Inductor starts CUDA's driver, harmless in a process that never forks). A backend
    with no `PRELOADED` modules (TensorRT) imports only its own module ahead; the rest loads with the
    engine."""
    import importlib

    started = time.perf_counter()
    loaded = []
    for module in PRELOADED.get(request.backend, ()):
        try:
            importlib.import_module(module)
        except Exception as exc:  # noqa: BLE001  (a broken library: the load names it in its reply)
            print(f"not imported ahead: {module} ({type(exc).__name__}: {exc})", file=sys.stderr)
            break
        loaded.append(module)
    try:
        backend = _backend(request)
    except Exception:  # noqa: BLE001  (said by the load, which makes it again)
        backend = None
    seconds = round(time.perf_counter() - started, 3)
    print(f"imported {loaded} in {seconds:.2f} s; waiting for the first engine", file=sys.stderr)
    sys.stderr.flush()
    try:
        say({"imported": loaded, "seconds": seconds})
    except OSError:  # (the parent is gone: the read below ends this process)
        pass
    line = sys.stdin.readline()
    message = json.loads(line) if line.strip() else {}
    if message.get("op") != "load":
        return request, backend
    named = {"engine": str(message["engine"]), **{k: message[k] for k in ("key", "check") if k in message}}
    return request.model_copy(update=named), backend


def interleaved_reply(many: list[Held], objective: str, inputs: dict, round_seconds: float) -> dict:
    """The reply of an `interleave` request: one round of `many` (`interleaved_round`)."""
    busy = sum(h.busy_starts for h in many)
    ms = interleaved_round(many, objective, inputs, round_seconds)
    return {"ms": ms, "calls": [h.calls for h in many], "busy_starts": sum(h.busy_starts for h in many) - busy}


def load(
    engines: dict[str, Held],
    key: str,
    engine: Path,
    workdir: Path,
    checked: bool,
    backend,
    request: ChildRequest,
    inputs: list[dict],
    earlier: Held | None = None,
) -> dict:
    """Load one engine from its bytes into `engines[key]`, check its accuracy (when `checked`), warm it
    up and find how many calls fill a round; the `ready` reply. `earlier`: an earlier load of the same
    engine file in this process (`same_engine`), whose calls per round it takes (`calls_from` names
    it) instead of timing trial rounds again (0.06 s a load of a 0.08 ms engine on an H100, 28 loads
    a run); a round's calls follow its wall time anyway (`Held.follow`). An engine that fails is
    closed again."""
    if key in engines:
        raise ValueError(f"an engine is already loaded as {key!r}")
    started = time.monotonic()
    runner = backend.load(engine.read_bytes(), workdir)
    try:
        made = time.monotonic()
        runner.run(inputs[0])  # first call: lazy compilers finish loading here
        loaded = time.monotonic()
        load_info = {"load_seconds": round(loaded - started, 3), **runner.describe()}
        ready = {
            "ready": True,
            "key": key,
            "versions": backend.versions().wire(),
            "load_info": load_info,
            **check(runner, request if checked else request.model_copy(update={"references": []}), inputs),
        }
        checked_at = time.monotonic()
        # Rejected routes are timed too: the report plots every route's time against its loss.
        objective = request.timing.objective.value
        warm_up(runner, inputs[0], objective, request.timing.warmup_iterations)
        warm = time.monotonic()
        ready["calls_from"] = None if earlier is None else earlier.key
        ready["calls"] = (
            earlier.calls
            if earlier is not None
            else calls_per_round(runner, inputs[0], objective, request.timing.round_seconds)
        )
        # where the load's time went (bench/tune_profile.py sums them)
        ready["seconds"] = {
            "load": load_info["load_seconds"],
            # the load's parts: the backend's `load` (its own parts, where it times them) and the first call
            **{f"load.{part}": seconds for part, seconds in runner.load_parts.items()},
            "load.backend": round(made - started, 3),
            "load.first call": round(loaded - made, 3),
            "check": round(checked_at - loaded, 3),
            "warm_up": round(warm - checked_at, 3),
            "calls_per_round": round(time.monotonic() - warm, 3),
        }
    except BaseException:
        runner.close()
        raise
    engines[key] = Held(runner, ready["calls"], key, source=str(engine))
    return ready


def same_engine(engines: dict[str, Held], engine: Path) -> Held | None:
    """An engine held here that was loaded from the file `engine` (its primer, another load of the
    same route), else None."""
    return next((held for held in engines.values() if held.source == str(engine)), None)


# What a build process imports before it forks its first build, by backend, so that no build pays
# it. onnxruntime's import leaves the build process with 3 OS threads (OpenBLAS's from numpy, one of
# onnxruntime's own), which a fork does not copy; they hold no lock a build needs: 200 forked
# onnxruntime builds in a row never hung. torch's, Dynamo's and Inductor's imports were most of a
# compiled route's build on a 2-core host (5-13 CPU-s of it); they start no thread and touch no GPU:
# CUDA is initialised by each build itself, after the fork (`cuda_hazard` checks that it can be).
PRELOADED = {
    "onnxruntime": ("onnxruntime",),
    "inductor": ("torch", "torch._dynamo", "torch._inductor.compile_fx", "torch.export"),
}

# Libraries whose loading alone makes a fork unsafe: TensorRT's builds run in a fresh interpreter each.
FORK_UNSAFE = ("tensorrt",)

CUDA_ERROR_NOT_INITIALIZED = 3  # the driver's answer to every call but cuInit until cuInit ran


def os_threads() -> int:
    """This process's OS threads (Python's and every library's)."""
    return len(os.listdir("/proc/self/task"))


def cuda_driver_started() -> bool:
    """Whether CUDA's driver was initialised in this process, by torch or anything else (torch's own
    flags miss a driver another library started): until cuInit runs, cuDeviceGetCount answers
    CUDA_ERROR_NOT_INITIALIZED, and asking starts nothing. No driver library here: never."""
    import ctypes

    try:
        driver = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False
    count = ctypes.c_int()
    return driver.cuDeviceGetCount(ctypes.byref(count)) != CUDA_ERROR_NOT_INITIALIZED


def _torch_marks_forks_bad() -> bool | None:
    """Whether torch marks a child forked from here as one that may not use CUDA (it does once CUDA
    was initialised or its devices counted, even where there is no driver), asked in a forked probe,
    the only place torch says so; None when the probe gave no answer."""
    torch = sys.modules["torch"]
    read, write = os.pipe()
    try:
        pid = os.fork()
    except OSError:
        os.close(read)
        os.close(write)
        return None
    if pid == 0:  # the probe: say whether torch calls this fork a bad one, and leave at once
        try:
            os.close(read)
            os.write(write, b"1" if getattr(torch.cuda, "_is_in_bad_fork", lambda: False)() else b"0")
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as answer:
        said = answer.read()
    os.waitpid(pid, 0)
    return {b"0": False, b"1": True}.get(said)


def cuda_hazard() -> str | None:
    """Why a child forked from here could not use CUDA as a fresh process can, None when it could."""
    if cuda_driver_started():
        return "CUDA's driver initialised in the build process"
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    if torch.cuda.is_initialized():
        return "CUDA initialised in the build process"
    bad = _torch_marks_forks_bad()
    if bad is None:
        return "torch's fork check gave no answer"
    return "CUDA's driver asked for its devices in the build process" if bad else None


def fork_hazards(threads: int, cuda: str | None = None) -> list[str]:
    """Why a build forked from this process could hang or fail, [] when nothing does: a thread a fork
    would not copy beyond the `threads` the preload left (a second Python thread, as Inductor's
    compile pool's reader; OS threads, as OpenMP's workers after a parallel region), a `FORK_UNSAFE`
    library loaded, or `cuda` (`cuda_hazard`, asked once: it cannot change while the build process
    only forks)."""
    import threading

    found = [f"{name} loaded" for name in FORK_UNSAFE if name in sys.modules]
    if threading.active_count() > 1:
        found.append(f"{threading.active_count() - 1} Python threads besides the main one")
    if os_threads() > threads:
        found.append(f"{os_threads()} OS threads where the preload left {threads}")
    if cuda:
        found.append(cuda)
    return found


# Set while the preload imports: torch.cuda.is_available() then asks NVML how many GPUs there are
# instead of the CUDA runtime, whose answer starts CUDA's driver (cuInit) in the asking process, after
# which no fork of it may use CUDA (torch's own advice for a process that forks). torch 2.11's Inductor
# asks at import (torch/_inductor/runtime/benchmarking.py), so on the H200 every batch's preload was
# undone (the build process started again without it). Where NVML cannot answer, torch asks the
# runtime after all and `cuda_hazard` still sees it.
NVML_CHECK = "PYTORCH_NVML_BASED_CUDA_CHECK"


def preload(backend: str) -> list[str]:
    """Import the backend's `PRELOADED` modules, `NVML_CHECK` set meanwhile; those imported. One that
    fails to import is left to the builds, whose own error then names what is missing. The first
    import that starts CUDA's driver all the same is named on stderr."""
    import importlib

    done, started = [], cuda_driver_started()
    before = os.environ.get(NVML_CHECK)
    os.environ[NVML_CHECK] = "1"
    try:
        for module in PRELOADED.get(backend, ()):
            try:
                importlib.import_module(module)
            except ImportError as exc:
                print(f"not preloaded: {module} ({exc})", file=sys.stderr)
                break
            done.append(module)
            if not started and cuda_driver_started():
                started = True
                print(f"importing {module} started CUDA's driver", file=sys.stderr)
    finally:  # the builds see the environment the build process was given
        if before is None:
            os.environ.pop(NVML_CHECK, None)
        else:
            os.environ[NVML_CHECK] = before
    gc.freeze()  # what the imports made stays out of every build's collections: fewer pages copied
    return done


def prepare(request: ChildRequest, folder: Path) -> list[str]:
    """The backend's work that every build would repeat (`Backend.prepare_builds`), done once here;
    what was done. One that fails is left to the builds, which then do it themselves."""
    try:
        return _backend(request).prepare_builds(folder, request.settings)
    except Exception as exc:
        print(f"not prepared: {type(exc).__name__}: {exc}", file=sys.stderr)
        return []


def start_build(message: dict, hazards: list[str]) -> int:
    """Start the build in `message` in a process of its own group, stdin closed and its output to
    its log; its pid. Forked from this process (no interpreter start) unless there are `hazards`
    (`fork_hazards`): then in a fresh interpreter."""
    if hazards:
        print(f"{'; '.join(hazards)}: this build runs in a fresh interpreter", file=sys.stderr)
        with open(message["log"], "wb") as log_file:
            started = subprocess.Popen(
                [sys.executable, "-m", "enginewright.worker.child", message["request"]],
                stdin=subprocess.DEVNULL,
                stdout=log_file,
                stderr=log_file,
                start_new_session=True,
            )
        started.returncode = 0  # reaped by `builds`, not by Popen
        return started.pid
    pid = os.fork()
    if pid == 0:  # the build: its own group, stdin closed, stdout and stderr to its log
        code = 1
        try:
            os.setpgid(0, 0)
            log_fd = os.open(message["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            null = os.open(os.devnull, os.O_RDONLY)
            os.dup2(null, 0)
            os.dup2(log_fd, 1)
            os.dup2(log_fd, 2)
            code = main(["build", message["request"]])
        except BaseException:
            traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    try:
        os.setpgid(pid, pid)  # (also in the child: whichever runs first)
    except OSError:
        pass  # it already set it, or already exited
    return pid


def builds(request: ChildRequest, path: str, bare: bool = False) -> None:
    """A batch's build process: one JSON line per build on stdin, `{"request": REQUEST.json, "log":
    LOG}`; each is run by `main` in a process forked from this one (`start_build`: a fresh
    interpreter instead while a fork would be unsafe, `fork_hazards`; its own process group, its
    output in LOG, its memory released when it exits), and answered by two lines: `{"pid": P}` when it
    starts (the parent kills P's group on a timeout) and `{"code": C}` when it ended (C < 0: killed
    by signal -C). What the build left running in its group is killed before the next one starts.
    The imports of an interpreter start and the backend's (`PRELOADED`), and the work every build
    would repeat (`prepare`), are paid once a batch. A preload that made a fork unsafe is undone:
    the process starts again (`exec`: the same pid and pipes, `path` its request) without it
    (`bare`), and its builds import and prepare what they need themselves, as before there was a
    preload."""
    before = [] if bare else fork_hazards(os_threads(), cuda_hazard())
    started = time.perf_counter()
    loaded = [] if bare else preload(request.backend)
    threads = os_threads()  # what the imports left; a thread the preparation leaves is a hazard
    print(f"preloaded {loaded} in {time.perf_counter() - started:.2f} s", file=sys.stderr)
    if loaded and not before:  # (forks already unsafe: every build starts afresh and prepares itself)
        started = time.perf_counter()
        prepared = prepare(request, Path(path).parent / "prepared")
        print(f"prepared {prepared} in {time.perf_counter() - started:.2f} s", file=sys.stderr)
    cuda = cuda_hazard()
    after = fork_hazards(threads, cuda)
    if loaded and after and not before:
        print(f"{'; '.join(after)} after the preload: the build process starts again without it", file=sys.stderr)
        sys.stderr.flush()
        os.execv(sys.executable, [sys.executable, "-m", "enginewright.worker.child", path, "--bare"])
    reply = os.fdopen(os.dup(1), "w")  # the protocol; a forked build's own stdout goes to its log
    reply.write(json.dumps({"ready": True}) + "\n")
    reply.flush()
    for line in sys.stdin:
        if not line.strip():
            break
        message = json.loads(line)
        pid = start_build(message, fork_hazards(threads, cuda))
        reply.write(json.dumps({"pid": pid}) + "\n")
        reply.flush()
        os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)  # ended, not yet reaped: its pid is still its group's
        try:
            os.killpg(pid, signal.SIGKILL)  # whatever it started and left behind
        except OSError:
            pass
        _, status = os.waitpid(pid, 0)
        reply.write(json.dumps({"code": os.waitstatus_to_exitcode(status)}) + "\n")
        reply.flush()


ACTIONS = {"build": build}


def main(argv: list[str]) -> int:
    request = ChildRequest.model_validate_json(Path(argv[1]).read_text())
    if request.action == "serve":
        serve(request)
        return 0
    if request.action == "builds":
        builds(request, argv[1], bare=argv[2:] == ["--bare"])
        return 0
    if request.result is None:
        raise ValueError(f"a {request.action} request needs `result`, the file its JSON result goes to (got none)")
    out = Path(request.result)
    try:
        result = {"ok": True, **ACTIONS[request.action](request)}
    except Exception as exc:  # recorded as build-failed / crash by the parent, with the message
        result = {
            "ok": False,
            "error": f"{type(exc).__name__}: {exc}".strip()[:4000],
            "traceback": traceback.format_exc()[-4000:],
        }
    out.write_text(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
