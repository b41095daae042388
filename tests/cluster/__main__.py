"""Bring the local cluster up or down from a shell.

    python -m tests.cluster up [--state FILE]    start everything, print exports, keep running
                                                  (Ctrl-C or `down` stops it)
    python -m tests.cluster down [--state FILE]  stop a cluster started by `up`
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
from pathlib import Path

from tests.cluster.harness import LocalCluster

DEFAULT_STATE = Path(os.environ.get("ENGINEWRIGHT_CACHE", Path.home() / ".cache/enginewright")) / "cluster.json"


def up(state: Path) -> int:
    cluster = LocalCluster(die_with_parent=True)
    stopping = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopping.set())
    signal.signal(signal.SIGINT, lambda *_: stopping.set())
    cluster.start()
    state.parent.mkdir(parents=True, exist_ok=True)
    state.write_text(json.dumps({**cluster.state(), "pid": os.getpid()}, indent=2))
    env = cluster.env
    print(f"# local cluster up in {cluster.timings['up_seconds']:.1f}s; workdir {cluster.workdir}")
    for key in ("KUBECONFIG", "ENGINEWRIGHT_S3_ENDPOINT", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        print(f"export {key}={env[key]}")
    print(f"export PATH={cluster.binaries}:$PATH")
    print("# stop with: python -m tests.cluster down", flush=True)
    try:
        while not stopping.wait(1):
            dead = [p.name for p in cluster.processes if p.popen.poll() is not None]
            if dead:
                print(f"# {', '.join(dead)} exited; logs in {cluster.workdir}/logs", file=sys.stderr)
                return 1
    finally:
        cluster.stop()
        state.unlink(missing_ok=True)
    return 0


def down(state: Path) -> int:
    if not state.exists():
        print(f"no cluster state at {state}", file=sys.stderr)
        return 1
    pid = json.loads(state.read_text())["pid"]
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        state.unlink(missing_ok=True)
        return 0
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and state.exists():
        time.sleep(0.2)
    return 0 if not state.exists() else 1


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.cluster")
    parser.add_argument("action", choices=["up", "down"])
    parser.add_argument("--state", type=Path, default=DEFAULT_STATE)
    args = parser.parse_args()
    return up(args.state) if args.action == "up" else down(args.state)


if __name__ == "__main__":
    sys.exit(main())
