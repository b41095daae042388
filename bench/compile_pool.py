"""How many processes a process's first `torch.compile` leaves beside it: Inductor's compile pool
(a sidecar that imports torch and forks a worker per core), started where Triton is installed.

    python bench/compile_pool.py [--device cuda] [--compile-threads N]

Prints the first call's seconds and the processes found beside this one (its children, and any
`compile_worker` process), measured 3 s after the call; with `--compile-threads 1` Inductor compiles
in this process and should leave none. Issue 19, ask 7: every forked build on the H200 starts a pool.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--compile-threads", type=int, default=None)
    args = parser.parse_args()
    import torch

    if args.compile_threads is not None:
        import torch._inductor.config as config

        config.compile_threads = args.compile_threads
    compiled = torch.compile(lambda x: torch.nn.functional.gelu(x @ x) + 1)
    x = torch.randn(256, 256, device=args.device)
    start = time.perf_counter()
    compiled(x)
    if args.device == "cuda":
        torch.cuda.synchronize()
    first = time.perf_counter() - start
    time.sleep(3)  # the pool starts in the background: counted after a fixed while, not a state to wait for
    table = subprocess.run(["ps", "-e", "-o", "pid,ppid,pcpu,cputime,args"], capture_output=True, text=True).stdout
    me = str(os.getpid())
    rows = [line for line in table.splitlines()[1:] if line.split()[4:5] != ["ps"]]  # not the ps that lists them
    beside = [line for line in rows if line.split()[1] == me or "compile_worker" in line]
    threads = "default" if args.compile_threads is None else args.compile_threads
    print(f"compile_threads={threads} first_call_s={first:.2f} processes_beside={len(beside)}")
    for line in beside[:5]:
        print("  ", line[:160])


if __name__ == "__main__":
    main()
