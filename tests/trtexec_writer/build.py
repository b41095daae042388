"""Build the small program that writes tuning caches with NVIDIA's own writer functions, and run it.

NVIDIA's code is not copied into this repository: `build.py` reads a TensorRT source checkout
(release 11.1: https://github.com/NVIDIA/TensorRT, `samples/common/`), cuts out, unchanged, the
functions trtexec writes its `--tuningCacheFile` with (`writeTuningCacheHeader`,
`writeTuningCacheIteration` and the helpers they call: `buildShellQuotedCmdLine`, `resolveArgvPaths`,
`resolveAbsolutePath`, `splitToStringVec`, `getAlgorithmName`, `toString(TuningSearchAlgorithm)`,
`tuningCache::k*`), and compiles them into `writer_main.cpp` against nlohmann/json, as trtexec
is (TensorRT fetches nlohmann/json v3.11.3; Debian's nlohmann-json3-dev is 3.11.2, whose dump() is
the same). The caches `writer_main.cpp` wrote are checked in beside it (`*.jsonl`);
`tests/unit/test_trtexec_cache_round_trips_byte_for_byte.py` round-trips them, and rebuilds them
here to compare when a TensorRT checkout is given (ENGINEWRIGHT_TENSORRT_SOURCE).

    python tests/trtexec_writer/build.py /path/to/TensorRT [--out DIR] [--lines N]

writes DIR/writer (the program) and, run from DIR, the caches (`writer_main.cpp` names them);
`--lines N` also writes `full-N.jsonl`, a full search of N iterations (the 100,000-line benchmark).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

# (file under samples/common, the text a definition starts with)
TYPES = [
    ("sampleOptions.h", "enum class AccuracyValidationAlgorithm"),
    ("sampleOptions.h", "enum class TuningSearchAlgorithm"),
    ("sampleOptions.h", "inline std::string toString(TuningSearchAlgorithm algo)"),
    ("sampleUtils.h", "inline std::string getAlgorithmName(AccuracyValidationAlgorithm algorithm)"),
    ("sampleUtils.h", "namespace tuningCache"),
]
FUNCTIONS = [
    (
        "sampleUtils.cpp",
        "std::vector<std::string> splitToStringVec(std::string const& s, char separator, int64_t maxSplit)",
    ),
    ("sampleUtils.cpp", "std::string resolveAbsolutePath(std::string const& path)"),
    ("sampleUtils.cpp", "std::string buildShellQuotedCmdLine(int32_t argc, char** argv)"),
    ("sampleUtils.cpp", "std::vector<std::string> resolveArgvPaths(int32_t argc, char** argv)"),
    ("sampleUtils.cpp", "void writeTuningCacheHeader("),
    ("sampleUtils.cpp", "void writeTuningCacheIteration("),
]


def definition(text: str, start: str) -> str:
    """The definition that begins with `start`, up to its matching closing brace (and a `;` right
    after it), skipping braces inside strings, character literals and comments."""
    begin = text.index(start)
    depth, i, opened = 0, text.index("{", begin), False
    while True:
        c = text[i]
        if text.startswith("//", i):
            i = text.index("\n", i)
            continue
        if text.startswith("/*", i):
            i = text.index("*/", i) + 2
            continue
        if c in "\"'":
            j = i + 1
            while text[j] != c:
                j += 2 if text[j] == "\\" else 1
            i = j + 1
            continue
        if c == "{":
            depth, opened = depth + 1, True
        elif c == "}":
            depth -= 1
            if opened and depth == 0:
                end = i + 1
                if text[end : end + 1] == ";":
                    end += 1
                return text[begin:end]
        i += 1


def extract(tensorrt: Path, definitions: list[tuple[str, str]]) -> str:
    common = tensorrt / "samples" / "common"
    parts = [
        f"// Cut unchanged from {common}/{name} by tests/trtexec_writer/build.py\n"
        f"{definition((common / name).read_text(), start)}"
        for name, start in definitions
    ]
    return "\n\n".join(parts) + "\n"


def build(tensorrt: Path, out: Path) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    (out / "nvidia_types.inc").write_text(extract(tensorrt, TYPES))
    (out / "nvidia_writer.inc").write_text(extract(tensorrt, FUNCTIONS))
    shutil.copy(HERE / "writer_main.cpp", out / "writer_main.cpp")
    program = out / "writer"
    subprocess.run(["g++", "-std=c++17", "-O1", "-o", str(program), str(out / "writer_main.cpp")], check=True, cwd=out)
    return program


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("tensorrt", type=Path, help="a TensorRT source checkout (release 11.1)")
    parser.add_argument("--out", type=Path, default=HERE / "build")
    parser.add_argument("--lines", type=int, help="also write full-N.jsonl with N iterations")
    args = parser.parse_args(argv)
    program = build(args.tensorrt, args.out)
    subprocess.run([str(program), *([str(args.lines)] if args.lines else [])], check=True, cwd=args.out)
    print(f"built {program}; caches in {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
