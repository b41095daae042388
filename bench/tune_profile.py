"""Where one `enginewright tune` run's wall time goes (issue 19, ask 7): the run in this process, with
the worker's requests to its serving processes, the quiet waits before timing, the serving processes'
starts and ends, the build processes' ends, the reference data check and the report's figure timed as they
happen. A profiling aid: it changes no code path, it wraps the functions named in WRAPPED.

    python bench/tune_profile.py --json out/profile.json -- MODEL --backend onnxruntime --search mixed ...

Everything after `--` is `enginewright tune`'s own arguments. Prints one line per wrapped function
(seconds in it, calls) and writes them to --json as it ends (also when tune fails). Seconds nest: a
request's seconds include its quiet wait (`wait_quiet` is also counted alone, and the waits that
reached their limit before the process went quiet as "gave up", 0 s), and `server.start` includes the
first engine's load (not counted as a `load` request). "in the serving process" rows are the serving
process's own account of its loads (`child.load`: the load and first call, the accuracy check, the
warm-up, finding the calls per round), nested in the requests and starts above. A batch's serving process is launched as the
batch starts and imports while its first group builds: `server.load_first` is the wait for it and its
first engine's load once the default is built (also counted as a `load` request).
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import time
from pathlib import Path
from typing import Callable

spent: dict[str, float] = collections.defaultdict(float)
calls: collections.Counter[str] = collections.Counter()
first: dict[str, float] = {}  # when each first began, seconds after tune began (a timeline)
BEGAN = time.monotonic()


def timed(name: str, fn: Callable) -> Callable:
    def wrapper(*args, **kwargs):
        started = time.monotonic()
        first.setdefault(name, started - BEGAN)
        try:
            return fn(*args, **kwargs)
        finally:
            spent[name] += time.monotonic() - started
            calls[name] += 1

    return wrapper


def wrap() -> None:
    """WRAPPED: `Server._ask` per request op, `Server.start`/`load_first`/`close`, the server's `wait_quiet`, the
    imports a process launched ahead reports (`Server._reply`), the build processes' `Builders.close`, the
    worker's batches, builds, wait for the confirmation process's imports and confirmations, tune's
    `_check_data` and `report.plot`."""
    import enginewright.cli.tune as tune
    import enginewright.report as report
    from enginewright.worker import process, server

    ask = server.Server._ask

    def by_op(self, request, timeout):
        started = time.monotonic()
        try:
            return ask(self, request, timeout)
        finally:
            spent[f"request {request['op']}"] += time.monotonic() - started
            calls[f"request {request['op']}"] += 1

    server.Server._ask = by_op  # type: ignore[method-assign]
    ready = server.Server._ready

    def by_phase(self, key, reply):
        # the serving process's own account of each load (`child.load`'s `seconds`), its first load
        # (the default's, after the process's start) apart from the others
        which = "first load" if not self.calls_of else "load"
        for phase, seconds in (reply.get("seconds") or {}).items():
            spent[f"in the serving process: {which}: {phase}"] += float(seconds)
            calls[f"in the serving process: {which}: {phase}"] += 1
        return ready(self, key, reply)

    server.Server._ready = by_phase  # type: ignore[method-assign]
    server.Server.start = timed("server.start (process + first load)", server.Server.start)  # type: ignore[method-assign]
    if hasattr(server.Server, "load_first"):  # (an operator from before it, profiled side by side, has none)
        server.Server.load_first = timed(  # type: ignore[method-assign]
            "server.load_first (process launched ahead: the rest of its start + first load)", server.Server.load_first
        )
    server.Server.close = timed("server.close", server.Server.close)  # type: ignore[method-assign]
    quiet = timed("wait_quiet (before timing requests)", server.wait_quiet)

    def wait_quiet(*args, **kwargs):
        went_quiet = quiet(*args, **kwargs)
        if not went_quiet:  # its limit passed first: the request was timed beside a busy thread
            calls["wait_quiet: gave up at its limit"] += 1
            spent["wait_quiet: gave up at its limit"] += 0.0
        return went_quiet

    server.wait_quiet = wait_quiet
    process.Builders.close = timed("build processes: close", process.Builders.close)  # type: ignore[method-assign]
    from enginewright.worker import batch

    batch.Worker.run_batch = timed("worker: a batch", batch.Worker.run_batch)  # type: ignore[method-assign]
    # a route's build as the batch waits for it (the build process's preload included, for the first)
    build = timed("worker: a build (asked to built; the first waits for the build process)", batch.build)

    def first_build(*args, **kwargs):
        try:
            return build(*args, **kwargs)
        finally:  # when the first build (the default's) was done: the batch's first timing waits for it
            name = "worker: the first build done (first at)"
            first.setdefault(name, time.monotonic() - BEGAN)
            spent[name], calls[name] = 0.0, 1

    batch.build = first_build
    if hasattr(batch.Worker, "_imported_ahead"):  # (an operator from before it has none)
        batch.Worker._imported_ahead = timed(  # type: ignore[method-assign]
            "worker: wait for the confirmation process's imports (before the first timing)",
            batch.Worker._imported_ahead,
        )
    launch, reply = server.Server.launch, server.Server._reply
    launched: dict[int, float] = {}

    def noted(self):
        launched[id(self)] = time.monotonic() - BEGAN
        return launch(self)

    def imports(self, timeout, what):
        # a process launched ahead says how long its imports took (`child.await_engine`): with its
        # launch, about when they were done (its interpreter's start before them left out), by folder
        answer = reply(self, timeout, what)
        if "imported" in answer:
            seconds = float(answer.get("seconds") or 0.0)
            name = f"imports of the process launched ahead in serve/{self.workdir.name} (first at: done by)"
            first.setdefault(name, launched.get(id(self), 0.0) + seconds)
            spent[name] += seconds
            calls[name] += 1
        return answer

    server.Server.launch = noted  # type: ignore[method-assign]
    server.Server._reply = imports  # type: ignore[method-assign]
    batch.Worker.confirm = timed("worker: a confirmation", batch.Worker.confirm)  # type: ignore[method-assign]
    tune._check_data = timed("tune: reference data check", tune._check_data)
    report.plot = timed("report: figure (report.png)", report.plot)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--json", type=Path, required=True, help="where the seconds are written")
    p.add_argument("tune", nargs=argparse.REMAINDER, help="-- then enginewright tune's arguments")
    args = p.parse_args()
    tune_args = args.tune[1:] if args.tune[:1] == ["--"] else args.tune
    wrap()
    from enginewright.cli import main as cli

    global BEGAN
    began = BEGAN = time.monotonic()
    code: int | None = None
    try:
        code = cli(["tune", *tune_args])
    finally:
        total = time.monotonic() - began
        rows = sorted(spent.items(), key=lambda kv: -kv[1])
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(
            json.dumps(
                {
                    "command": ["enginewright", "tune", *tune_args],
                    "exit_code": code,
                    "wall_seconds": round(total, 3),
                    "spent": {
                        name: {"seconds": round(s, 3), "calls": calls[name], "first_began_at": round(first[name], 3)}
                        if name in first
                        else {"seconds": round(s, 3), "calls": calls[name]}
                        for name, s in rows
                    },
                },
                indent=2,
            )
        )
        print(f"\ntune's wall time in this process: {total:.2f} s", file=sys.stderr)
        for name, seconds in rows:
            at = f"  first at {first[name]:7.2f} s" if name in first else ""
            print(f"  {name:42s} {seconds:8.2f} s  x{calls[name]}{at}", file=sys.stderr)
    return code or 0


if __name__ == "__main__":
    raise SystemExit(main())
