"""Time and peak memory of `enginewright cache import` and `cache export` on a large trtexec tuning
cache, and of a run reading the import back (`trtexec.imports.usable_entries`, what `tune --cache`
does before it plans).

    python bench/trtexec_cache_size.py CACHE.jsonl [--work DIR]

CACHE.jsonl: a cache written by NVIDIA's writer functions, e.g. the 100,000-line full search of
`python tests/trtexec_writer/build.py /path/to/TensorRT --lines 100000 --out DIR` (DIR/full-100000.jsonl).
Each step runs as its own process, as a user runs it; its wall time and peak RSS (`wait4`'s
ru_maxrss) are printed as JSON, with the files the import wrote and whether the export is the input
byte for byte.
"""

from __future__ import annotations

import argparse
import filecmp
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def measured(argv: list[str]) -> dict:
    """Run `argv`; its wall seconds and peak resident memory in MB."""
    began = time.monotonic()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    out, err = proc.stdout.read().decode(), proc.stderr.read().decode()
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(argv)} failed: {err or out}")
    return {
        "seconds": round(time.monotonic() - began, 2),
        "peak_mb": round(usage.ru_maxrss / 1024, 1),
        "said": out.strip().splitlines()[-1] if out.strip() else "",
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("cache", type=Path)
    parser.add_argument("--work", type=Path, help="folder for the import and the export (default: a temporary one)")
    args = parser.parse_args(argv)
    work = args.work or Path(tempfile.mkdtemp(prefix="trtexec-cache-size-"))
    shutil.rmtree(work / "import", ignore_errors=True)
    tool = [sys.executable, "-m", "enginewright", "cache"]
    lines = sum(1 for _ in open(args.cache, "rb"))
    result = {"cache": str(args.cache), "lines": lines, "bytes": args.cache.stat().st_size}
    result["import"] = measured([*tool, "import", str(args.cache), "--out", str(work / "import")])
    files = [p for p in (work / "import").rglob("*") if p.is_file()]
    result["import"]["files"] = len(files)
    result["import"]["bytes"] = sum(p.stat().st_size for p in files)
    result["export"] = measured([*tool, "export", str(work / "import"), "--out", str(work / "export.jsonl")])
    result["export"]["byte_for_byte"] = filecmp.cmp(args.cache, work / "export.jsonl", shallow=False)
    result["read_back"] = measured(
        [
            sys.executable,
            "-c",
            (
                "import sys; from pathlib import Path; from enginewright.trtexec.imports import usable_entries; "
                "e, _ = usable_entries(Path(sys.argv[1]), 'local', sys.argv[2]); print(f'{len(e)} entries')"
            ),
            str(work / "import"),
            json.loads(open(args.cache).readline())["tuner_version"].join(["tensorrt-tuner-", ""]),
        ]
    )
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
