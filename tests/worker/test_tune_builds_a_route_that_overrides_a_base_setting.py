"""`enginewright tune --setting graph_optimization_level=disable --knob graph_optimization_level=all`:
the default route is built with graph optimizations off (the base setting), and the route `all`
(ONNX Runtime's own default, but not the base) is planned, built with every optimization and
measured: its entry and its engine exist, apart from the default's."""

import io
import json
import tarfile

import onnx

from enginewright.api.cache import CacheEntry
from enginewright.api.routes import Route, route_id
from tests.worker.conftest import run_tune

ALL = Route.of({"graph_optimization_level": "all"})


def engine(out, entry: CacheEntry) -> tuple[dict, set[str]]:
    """An engine's recorded build settings and the op types of the graph ORT optimized."""
    path = out / "store/runs/local/engines" / f"{entry.route_id}.ort.tar"
    with tarfile.open(path) as tar:
        settings = json.loads(tar.extractfile("settings.json").read())["settings"]
        model = onnx.load_model(io.BytesIO(tar.extractfile("model.onnx").read()))
    return settings, {node.op_type for node in model.graph.node}


def test_the_compilers_default_value_over_a_disabling_base_is_built_and_measured(example, tmp_path):
    out = tmp_path / "out"
    result = run_tune(
        example,
        out,
        "--setting",
        "graph_optimization_level=disable",
        "--search",
        "fast",
        "--knob",
        "graph_optimization_level=all",
        "--save-all-engines",
        "--no-confirm",
    )
    assert result.returncode == 0, result.stderr
    entries = [CacheEntry.from_json(p.read_text()) for p in (out / "store/runs/local/entries").glob("*.json")]
    found = {e.route_id: e for e in entries}
    assert set(found) == {route_id(""), ALL.id}, result.stdout
    default, optimized = found[route_id("")], found[ALL.id]
    assert optimized.route == "-graph_optimization_level=all" and optimized.knobs == {"graph_optimization_level": "all"}
    assert optimized.outcome.value == "ok" and optimized.timing.n > 0 and optimized.passed
    assert optimized.fingerprint.settings["graph_optimization_level"] == "disable"  # the run's base, beside the route

    default_settings, default_ops = engine(out, default)
    optimized_settings, optimized_ops = engine(out, optimized)
    assert default_settings["graph_optimization_level"] == "disable"
    assert optimized_settings["graph_optimization_level"] == "all"
    assert {"MatMul", "Add"} <= default_ops  # unoptimized: the model's own nodes
    assert optimized_ops != default_ops, (default_ops, optimized_ops)  # ORT fused them

    # The trtexec-format cache tells the two builds apart: the default line says what it was built with.
    header, *lines = map(json.loads, (out / "trtexec-cache.jsonl").read_text().splitlines())
    assert "-graph_optimization_level=disable" in header["default_build_route"]
    assert sorted(line["build_route"] for line in lines) == [
        "-graph_optimization_level=all",
        "-graph_optimization_level=disable",
    ]
