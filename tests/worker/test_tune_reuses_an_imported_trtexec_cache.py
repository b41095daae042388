"""A trtexec tuning cache brought in with `enginewright cache import` seeds `enginewright tune
--cache` when it comes from the compiler the run tunes with: routes it holds are not measured again,
the others are; and the run's cache goes back out with `enginewright cache export`, the imported
lines as they were and every route with the id it had. A cache of another compiler (trtexec's own,
for an ONNX Runtime run) is not used."""

import json
import subprocess
import sys

from enginewright.api.cache import CacheEntry
from enginewright.api.routes import Route, route_id
from enginewright.backends import get_backend
from enginewright.trtexec.format import import_trtexec
from enginewright.trtexec.imports import imports_under
from tests.worker.conftest import tune_args

KNOBS = get_backend("onnxruntime").knobs()
ORT = get_backend("onnxruntime").cache_compiler()  # e.g. onnxruntime-1.23.2: what our exports write as tuner_version


def trtexec_cache(tuner_version: str = ORT) -> str:
    """As trtexec writes it: the default route lists every knob; each route every tuned knob."""
    header = {
        "tuner_version": tuner_version,
        "accuracy_algorithm": "Cosine",
        "accuracy_parameter": {"atol": 1e-5, "rtol": 1e-5, "epsilon": 1e-4},
        "searching_algorithm": "fast",
        "command_line": "trtexec ...",
        "default_build_route": " ".join(f"-{k.name}={k.default}" for k in KNOBS),
        "tuning_expr": "-graph_optimization_level=[all|basic] -enable_mem_pattern=[1|0]",
        "files": {},
        "argv": ["trtexec"],
    }
    rows = [
        {
            "iter": 0,
            "build_route": "-graph_optimization_level=all -enable_mem_pattern=1",
            "crash": False,
            "error_message": "",
            "accuracy_loss": {"output": 0.0},
            "gpu_time": 0.5,
        },
        {
            "iter": 1,
            "build_route": "-graph_optimization_level=all -enable_mem_pattern=0",
            "crash": False,
            "error_message": "",
            "accuracy_loss": {"output": 1e-7},
            "gpu_time": 0.45,
        },
    ]
    return "\n".join(json.dumps(line, separators=(",", ":")) for line in [header, *rows]) + "\n"


def enginewright(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "enginewright", *args], capture_output=True, text=True, timeout=600)


def test_imported_routes_are_not_measured_again(example, tmp_path):
    (tmp_path / "best_config.json").write_text(trtexec_cache())
    seed = tmp_path / "seed"
    imported = enginewright("cache", "import", str(tmp_path / "best_config.json"), "--out", str(seed))
    assert imported.returncode == 0, imported.stderr
    entries_dir = seed / "runs/local/entries"
    mem_pattern_off = Route.of({"enable_mem_pattern": "0"}).id
    (imported_file,) = imports_under(seed)  # one import: the file itself, not a file per route
    assert imported_file.path.read_text() == trtexec_cache() and not entries_dir.exists()
    assert [e.route_id for e in imported_file.entries()] == [route_id(""), mem_pattern_off]

    out = tmp_path / "out"
    result = subprocess.run(
        tune_args(
            example,
            out,
            "--search",
            "fast",
            "--knob",
            "graph_optimization_level=basic,all",
            "--knob",
            "enable_mem_pattern=0",
            "--cache",
            str(seed),
            "--no-confirm",
        ),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr
    found = {e.route_id: e for e in imported_file.entries()}
    found.update({p.stem: CacheEntry.from_json(p.read_text()) for p in entries_dir.glob("*.json")})
    basic = Route.of({"graph_optimization_level": "basic"}).id
    assert set(found) == {route_id(""), mem_pattern_off, basic}
    # The imported routes keep trtexec's result; only the route it lacked was measured.
    assert found[mem_pattern_off].stage == "imported" and found[mem_pattern_off].median_ms == 0.45
    assert found[route_id("")].stage == "imported"
    assert found[basic].stage == "stage1" and found[basic].versions.compiler.startswith("onnxruntime-")
    assert "enable_mem_pattern=0:" not in result.stdout and "graph_optimization_level=basic:" in result.stdout
    # The run's own trtexec-format cache: the imported file as it was, then the route it measured.
    run_cache = (out / "trtexec-cache.jsonl").read_text()
    assert run_cache.startswith(trtexec_cache()) and len(run_cache.splitlines()) == 4

    exported = enginewright("cache", "export", str(seed), "--out", str(tmp_path / "again.jsonl"))
    assert exported.returncode == 0, exported.stderr
    text = (tmp_path / "again.jsonl").read_text()
    assert text.startswith(trtexec_cache())  # the import as it was, then the route measured since
    header, again = import_trtexec(text, target="local")
    assert header["accuracy_algorithm"] == "Cosine" and header["accuracy_parameter"]["epsilon"] == 1e-4
    assert sorted(e.route_id for e in again) == sorted(found)
    assert [json.loads(line)["iter"] for line in text.splitlines()[1:]] == [0, 1, 2]


def test_a_tensorrt_cache_is_not_used_by_an_onnxruntime_run(example, tmp_path):
    (tmp_path / "best_config.json").write_text(trtexec_cache("2.19.15"))  # trtexec's own: a TensorRT tuner
    seed = tmp_path / "seed"
    imported = enginewright("cache", "import", str(tmp_path / "best_config.json"), "--out", str(seed))
    assert imported.returncode == 0, imported.stderr
    out = tmp_path / "out"
    result = subprocess.run(
        tune_args(
            example, out, "--search", "fast", "--knob", "enable_mem_pattern=0", "--cache", str(seed), "--no-confirm"
        ),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr
    assert "is from tensorrt-tuner-2.19.15; this run is onnxruntime-" in result.stdout
    summary = json.loads((out / "summary.json").read_text())
    entries = {p.stem: CacheEntry.from_json(p.read_text()) for p in (seed / "runs/local/entries").glob("*.json")}
    # Both routes measured by ONNX Runtime, the default among them: trtexec's 0.5 ms is not its default.
    assert {e.stage for e in entries.values()} == {"stage1"} and set(entries) == {
        route_id(""),
        Route.of({"enable_mem_pattern": "0"}).id,
    }
    assert summary["default_ms"] == entries[route_id("")].median_ms != 0.5


def test_a_tune_directory_exports_as_trtexec_writes_it(example, tmp_path):
    out = tmp_path / "out"
    result = subprocess.run(
        tune_args(example, out, "--search", "fast", "--knob", "enable_mem_pattern=0", "--no-confirm"),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr
    exported = enginewright("cache", "export", str(out), "--out", str(tmp_path / "run.jsonl"))
    assert exported.returncode == 0, exported.stderr
    lines = [json.loads(line) for line in (tmp_path / "run.jsonl").read_text().splitlines()]
    header, rows = lines[0], lines[1:]
    assert header["default_build_route"] == " ".join(f"-{k.name}={k.default}" for k in KNOBS)
    assert header["accuracy_algorithm"] == "Cosine" and header["accuracy_parameter"]["epsilon"] == 1e-4
    assert header["files"] == {"onnx": str((example / "mlp.onnx").resolve())}
    assert [row["build_route"] for row in rows] == ["-enable_mem_pattern=1", "-enable_mem_pattern=0"]
    _, again = import_trtexec((tmp_path / "run.jsonl").read_text(), target="local")
    assert [e.route_id for e in again] == [route_id(""), Route.of({"enable_mem_pattern": "0"}).id]
