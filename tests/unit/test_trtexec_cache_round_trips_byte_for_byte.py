"""trtexec's tuning caches, as NVIDIA's own writer functions write them, come back byte for byte from
`enginewright cache import` then `cache export`; a damaged line is skipped with a warning naming it
and the rest is kept; a tuner version or compiler that does not fit is refused unless `--force`,
and then kept apart.

The caches in tests/trtexec_writer/ were written by `writer_main.cpp` with TensorRT 11.1's
`writeTuningCacheHeader` / `writeTuningCacheIteration` compiled unchanged against nlohmann/json
(`build.py` cuts them out of a TensorRT checkout; that code is not kept here). With
ENGINEWRIGHT_TENSORRT_SOURCE pointing at a checkout, the first test builds and runs the writer again
and checks that it still writes exactly these files.
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from enginewright.api.cache import Outcome
from enginewright.api.routes import Route, route_id
from enginewright.trtexec.format import TrtexecCache
from enginewright.trtexec.imports import imports_under

WRITTEN = Path(__file__).resolve().parents[1] / "trtexec_writer"
CACHES = ["fast.jsonl", "mixed.jsonl", "odd-values.jsonl", "header-only.jsonl"]


def enginewright(*args) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "enginewright", *map(str, args)], capture_output=True, text=True, timeout=300
    )


def round_trip(source: Path, work: Path, *extra) -> bytes:
    imported = enginewright("cache", "import", source, "--out", work / "cache", *extra)
    assert imported.returncode == 0, imported.stderr
    exported = enginewright("cache", "export", work / "cache", "--out", work / "export.jsonl")
    assert exported.returncode == 0, exported.stderr
    return (work / "export.jsonl").read_bytes()


def test_the_checked_in_caches_are_what_nvidias_writer_writes(tmp_path):
    tensorrt = os.environ.get("ENGINEWRIGHT_TENSORRT_SOURCE")
    if not tensorrt or not shutil.which("g++") or not Path("/usr/include/nlohmann/json.hpp").exists():
        pytest.skip(
            "set ENGINEWRIGHT_TENSORRT_SOURCE to a TensorRT 11.1 checkout (with g++ and nlohmann-json3-dev) "
            "to rebuild the writer"
        )
    subprocess.run([sys.executable, WRITTEN / "build.py", tensorrt, "--out", tmp_path], check=True)
    for name in CACHES:
        assert (tmp_path / name).read_bytes() == (WRITTEN / name).read_bytes(), name


@pytest.mark.parametrize("name", CACHES)
def test_import_then_export_gives_back_every_byte(name, tmp_path):
    source = WRITTEN / name
    first = round_trip(source, tmp_path / "1")
    assert first == source.read_bytes()
    (tmp_path / "again.jsonl").write_bytes(first)
    assert round_trip(tmp_path / "again.jsonl", tmp_path / "2") == first  # and again: stable


def test_what_the_import_reads_is_what_trtexec_wrote():
    with open(WRITTEN / "fast.jsonl", "rb") as lines:
        cache = TrtexecCache(lines)
    assert cache.compiler == "tensorrt-tuner-2.19.15" and cache.lines == 4 and not cache.damaged
    baseline, splitk2, crashed, nan = cache.entries
    # The fixed knob is part of every route trtexec ran (-pad_channels=0 is not its default, 1).
    assert baseline.route == "-pad_channels=0" and splitk2.knobs == {"gemm_splitk": "2", "pad_channels": "0"}
    assert baseline.median_ms == 1.2345678 and splitk2.median_ms == 1.100000023841858
    assert splitk2.outcome is Outcome.ok  # both losses below epsilon (0.001f, widened: 0.0010000000474974513)
    assert crashed.outcome is Outcome.crash and crashed.timing is None and crashed.loss is None
    assert crashed.error == 'Error[2]: [optimizer.cpp::compute::42] "tile" too large — ünicöde\x01\tend'
    assert nan.outcome is Outcome.accuracy_rejected and nan.loss == {"probs": 0.0, "logits": None}
    assert nan.error is None  # nothing invented
    for entry in cache.entries:
        assert "Infinity" not in entry.to_json() and "NaN" not in entry.to_json()

    with open(WRITTEN / "odd-values.jsonl", "rb") as lines:
        odd = TrtexecCache(lines)
    # gpu_time 0.0 or null without a crash: no time, and not a crash either.
    zero, no_time = odd.entries[1], odd.entries[2]
    assert zero.timing is None and zero.outcome is Outcome.accuracy_rejected and zero.error is None
    assert no_time.timing is None and no_time.outcome is Outcome.ok and no_time.error is None


def test_a_mixed_search_keeps_its_second_phase(tmp_path):
    with open(WRITTEN / "mixed.jsonl", "rb") as lines:
        cache = TrtexecCache(lines)
    rows = [json.loads(line) for line in (WRITTEN / "mixed.jsonl").read_text().splitlines()[1:]]
    assert [r["iter"] for r in rows] == list(range(10)) + list(range(9))
    assert cache.lines == 19 and cache.repeats == 6 and len(cache.entries) == 13
    both = Route.of({"tile:m": "128", "gemm_splitk": "2", "pad_channels": "0"}).id
    assert both in {e.route_id for e in cache.entries}  # a phase-2 combination
    exported = round_trip(WRITTEN / "mixed.jsonl", tmp_path)
    assert len(exported.splitlines()) == 20


def test_a_truncated_line_is_skipped_with_a_warning_and_the_rest_imported(tmp_path):
    lines = (WRITTEN / "mixed.jsonl").read_bytes().splitlines(keepends=True)
    damaged = tmp_path / "killed.jsonl"
    middle = lines[4].replace(b'"crash":', b'"crash":x')
    damaged.write_bytes(b"".join(lines[:4] + [middle] + lines[5:-1]) + lines[-1][:40])  # killed mid-write
    result = enginewright("cache", "import", damaged, "--out", tmp_path / "cache")
    assert result.returncode == 0, result.stderr
    assert "line 5 skipped" in result.stderr and f"line {len(lines)} skipped" in result.stderr
    assert "truncated" in result.stderr
    (imported,) = imports_under(tmp_path / "cache")
    assert imported.meta["lines"] == 19 and [n for n, _ in imported.meta["damaged"]] == [5, len(lines)]
    assert len(imported.entries()) == 11  # the 13 routes but the two damaged lines' (neither is repeated)
    exported = enginewright("cache", "export", tmp_path / "cache", "--out", tmp_path / "out.jsonl")
    assert exported.returncode == 0 and "line 5" in exported.stdout
    # Written back as imported: trtexec --continue counts an unreadable line as a crashed iteration.
    assert (tmp_path / "out.jsonl").read_bytes() == damaged.read_bytes() + b"\n"


def test_a_nan_that_trtexec_cannot_write_is_refused_as_a_damaged_line(tmp_path):
    lines = (WRITTEN / "fast.jsonl").read_text().splitlines()
    lines[1] = lines[1].replace('"gpu_time":1.2345678', '"gpu_time":NaN')
    (tmp_path / "nan.jsonl").write_text("\n".join(lines) + "\n")
    result = enginewright("cache", "import", tmp_path / "nan.jsonl", "--out", tmp_path / "cache")
    assert result.returncode == 0 and "line 2 skipped (NaN is not JSON" in result.stderr
    (imported,) = imports_under(tmp_path / "cache")
    assert route_id("-pad_channels=0") not in {e.route_id for e in imported.entries()}


def test_a_header_only_file_imports_nothing_and_exports_its_header(tmp_path):
    result = enginewright("cache", "import", WRITTEN / "header-only.jsonl", "--out", tmp_path / "cache")
    assert result.returncode == 0 and "no iteration lines" in result.stdout and "0 routes" in result.stdout
    assert round_trip(WRITTEN / "header-only.jsonl", tmp_path) == (WRITTEN / "header-only.jsonl").read_bytes()


def other_version(tmp_path: Path) -> Path:
    newer = tmp_path / "newer.jsonl"
    newer.write_text(
        (WRITTEN / "fast.jsonl").read_text().replace('"tuner_version":"2.19.15"', '"tuner_version":"2.20.1"', 1)
    )
    return newer


def test_another_tuner_version_is_refused_unless_forced_and_then_kept_apart(tmp_path):
    cache = tmp_path / "cache"
    assert enginewright("cache", "import", WRITTEN / "fast.jsonl", "--out", cache).returncode == 0
    again = enginewright("cache", "import", WRITTEN / "fast.jsonl", "--out", cache)
    assert again.returncode == 0 and "imported before" in again.stdout
    stricter = enginewright("cache", "import", WRITTEN / "fast.jsonl", "--out", cache, "--threshold", "3e-4")
    assert stricter.returncode == 0 and "1 ok" in stricter.stdout  # the same file, read with the new threshold
    (imported,) = imports_under(cache)
    assert imported.meta["threshold"] == 3e-4 and sum(e.passed for e in imported.entries()) == 1
    refused = enginewright("cache", "import", other_version(tmp_path), "--out", cache)
    assert refused.returncode == 2
    assert "tensorrt-tuner-2.19.15" in refused.stderr and "tensorrt-tuner-2.20.1" in refused.stderr
    assert "--force" in refused.stderr and "Traceback" not in refused.stderr
    assert [i.compiler for i in imports_under(cache)] == ["tensorrt-tuner-2.19.15"]

    forced = enginewright("cache", "import", other_version(tmp_path), "--out", cache, "--force")
    assert forced.returncode == 0, forced.stderr
    assert sorted(i.compiler for i in imports_under(cache)) == ["tensorrt-tuner-2.19.15", "tensorrt-tuner-2.20.1"]
    ambiguous = enginewright("cache", "export", cache, "--out", tmp_path / "out.jsonl")
    assert ambiguous.returncode == 2 and "--compiler" in ambiguous.stderr
    for compiler, source in (
        ("tensorrt-tuner-2.19.15", WRITTEN / "fast.jsonl"),
        ("tensorrt-tuner-2.20.1", other_version(tmp_path)),
    ):
        exported = enginewright("cache", "export", cache, "--out", tmp_path / "out.jsonl", "--compiler", compiler)
        assert exported.returncode == 0, exported.stderr
        assert (tmp_path / "out.jsonl").read_bytes() == source.read_bytes()  # each header with its own results


def test_a_knob_list_of_another_tuner_version_is_refused(tmp_path):
    knobs = tmp_path / "knobs.json"
    knobs.write_text(
        json.dumps(
            {
                "tuner_version": "2.20.1",
                "tuner_options": [
                    {"option": "-tile:m", "allowed_values": "-tile:m=[64|128]", "default_value": "64", "help": ""}
                ],
            }
        )
    )
    refused = enginewright("cache", "import", WRITTEN / "fast.jsonl", "--out", tmp_path / "c", "--knobs", knobs)
    assert refused.returncode == 2 and "2.20.1" in refused.stderr and "2.19.15" in refused.stderr


def test_a_file_of_another_compiler_than_the_entries_there_is_refused(tmp_path):
    from enginewright.api.cache import CacheEntry, TimingStats, Versions

    cache = tmp_path / "cache"
    entry = CacheEntry(
        target="local",
        route_id=route_id(""),
        route="",
        outcome=Outcome.ok,
        timing=TimingStats(median_ms=1, mean_ms=1, p90_ms=1, min_ms=1, n=1),
        versions=Versions(compiler="onnxruntime-1.23.2"),
    )
    (cache / "runs/local/entries").mkdir(parents=True)
    (cache / "runs/local/entries" / f"{entry.route_id}.json").write_text(entry.to_json())
    refused = enginewright("cache", "import", WRITTEN / "fast.jsonl", "--out", cache)
    assert refused.returncode == 2 and "onnxruntime" in refused.stderr and "tensorrt-tuner-2.19.15" in refused.stderr
    assert enginewright("cache", "import", WRITTEN / "fast.jsonl", "--out", cache, "--force").returncode == 0


def test_a_file_without_a_readable_header_is_refused(tmp_path):
    lines = (WRITTEN / "fast.jsonl").read_text().splitlines()
    for name, text in (
        ("cut.jsonl", lines[0][:60] + "\n" + "\n".join(lines[1:])),
        ("empty.jsonl", ""),
        ("no-header.jsonl", "\n".join(lines[1:])),
    ):
        (tmp_path / name).write_text(text)
        result = enginewright("cache", "import", tmp_path / name, "--out", tmp_path / "cache")
        assert result.returncode == 2 and "Traceback" not in result.stderr, name
        assert "header" in result.stderr, name
    assert not (tmp_path / "cache").exists() or not imports_under(tmp_path / "cache")
