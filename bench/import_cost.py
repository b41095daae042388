"""Where a fresh process's start goes before it loads an engine (issue 19, ask 7): on the H100's host
a serving process's start with its first load took 15.2 s (session 27), and the build process's
imports 10.5-12.7 s (session 25). Times each import the serving and build processes make
(`child.PRELOADED["inductor"]`), then CUDA's start, in this one fresh process, and prints one JSON line:

    python bench/import_cost.py [--cuda]        # run it twice: the second sees a warm page cache

Add `-X importtime` to python's arguments for the per-module account (stderr)."""

from __future__ import annotations

import argparse
import importlib
import json
import os
import time

STARTED = time.monotonic()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cuda", action="store_true", help="also time CUDA's start and a first kernel")
    args = p.parse_args()
    from enginewright.worker.child import PRELOADED

    seconds: dict[str, float] = {}
    for module in PRELOADED["inductor"]:
        began = time.monotonic()
        importlib.import_module(module)
        seconds[f"import {module}"] = round(time.monotonic() - began, 3)
    if args.cuda:
        import torch

        began = time.monotonic()
        torch.cuda.init()
        seconds["torch.cuda.init()"] = round(time.monotonic() - began, 3)
        began = time.monotonic()
        torch.ones(1, device="cuda").add_(1).item()
        seconds["a first kernel"] = round(time.monotonic() - began, 3)
    seconds["total since this script started"] = round(time.monotonic() - STARTED, 3)
    print(json.dumps({"pid": os.getpid(), "cpus": len(os.sched_getaffinity(0)), "seconds": seconds}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
