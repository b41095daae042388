"""Bring the local cluster up or down from a shell.

    python -m tests.cluster up [--state FILE] [--keep]   start everything, print exports, keep running
                                                          (Ctrl-C or `down` stops it)
    python -m tests.cluster down [--state FILE]          stop a cluster started by `up`

Stopping removes the cluster's work directory (its private keys, etcd data, S3 objects, logs) unless
`up --keep` was given; then `up` and `down` print where it is kept.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
from pathlib import Path

from tests.cluster.harness import LocalCluster, wait_for

DEFAULT_STATE = Path(os.environ.get("ENGINEWRIGHT_CACHE", Path.home() / ".cache/enginewright")) / "cluster.json"


def up(state: Path, keep: bool = False) -> int:
    cluster = LocalCluster(die_with_parent=True)
    stopping = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopping.set())
    signal.signal(signal.SIGINT, lambda *_: stopping.set())
    cluster.start()
    state.parent.mkdir(parents=True, exist_ok=True)
    state.write_text(json.dumps({**cluster.state(), "pid": os.getpid(), "keep": keep}, indent=2))
    env = cluster.env
    print(
        f"# local cluster up in {cluster.timings['up_seconds']:.1f}s; workdir {cluster.workdir}"
        + (" (kept after `down`: --keep)" if keep else " (removed by `down`)")
    )
    for key in ("KUBECONFIG", "ENGINEWRIGHT_S3_ENDPOINT", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        print(f"export {key}={env[key]}")
    print(f"export PATH={cluster.binaries}:$PATH")
    print("# stop with: python -m tests.cluster down", flush=True)
    try:
        while not stopping.wait(1):
            dead = [p.name for p in cluster.processes if p.popen.poll() is not None]
            if dead:
                print(f"# {', '.join(dead)} exited; the end of its log:", file=sys.stderr)
                for name in dead:
                    print(_tail(cluster.log_path(name)), file=sys.stderr)
                return 1
    finally:
        cluster.stop()
        if keep:
            print(f"# stopped; work directory kept (it holds private keys): {cluster.workdir}", flush=True)
        else:
            cluster.remove()
        state.unlink(missing_ok=True)
    return 0


def _tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except FileNotFoundError:
        return f"(no log at {path})"


def down(state: Path) -> int:
    if not state.exists():
        print(f"no cluster state at {state}", file=sys.stderr)
        return 1
    recorded = json.loads(state.read_text())
    workdir, keep = Path(recorded["workdir"]), recorded.get("keep", False)
    try:
        os.kill(recorded["pid"], signal.SIGTERM)
    except ProcessLookupError:  # `up` is gone without cleaning up (killed): do it here
        state.unlink(missing_ok=True)
    else:
        try:
            wait_for(lambda: not state.exists(), 30, f"`up` (pid {recorded['pid']}) to stop", 0.2)
        except TimeoutError as exc:
            print(exc, file=sys.stderr)
            return 1
    if keep:
        print(f"work directory kept (up --keep; it holds private keys): {workdir}")
    elif workdir.exists():
        LocalCluster(workdir=workdir).remove()
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.cluster")
    parser.add_argument("action", choices=["up", "down"])
    parser.add_argument("--state", type=Path, default=DEFAULT_STATE)
    parser.add_argument(
        "--keep", action="store_true", help="up: keep the work directory (private keys, data, logs) when stopped"
    )
    args = parser.parse_args()
    return up(args.state, args.keep) if args.action == "up" else down(args.state)


if __name__ == "__main__":
    sys.exit(main())
