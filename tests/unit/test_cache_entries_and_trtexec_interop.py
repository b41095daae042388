"""Cache entries round-trip through JSON; trtexec's JSON Lines tuning cache imports and exports."""

import json

from hypothesis import given, strategies as st

from enginewright.api.cache import CacheEntry, Outcome, TimingStats, Versions, export_trtexec, import_trtexec
from enginewright.search.routes import Route

TRTEXEC_CACHE = "\n".join([
    json.dumps({"tuner_version": "2.19.15", "accuracy_algorithm": "cos",
                "accuracy_parameter": {"atol": 1e-5, "rtol": 1e-5, "epsilon": 0}, "searching_algorithm": "fast",
                "command_line": "trtexec --onnx=m.onnx --tuneBuildRoutes=...", "default_build_route": "",
                "tuning_expr": "-conv_use_long_w=[on|off]", "files": {}, "argv": []}),
    json.dumps({"iter": 0, "build_route": "", "crash": False, "error_message": "",
                "accuracy_loss": {"out": 0.0}, "gpu_time": 1.25}),
    json.dumps({"iter": 1, "build_route": "-kgen:codegen:cuda_tile=2 -conv_use_long_w=off", "crash": False,
                "error_message": "", "accuracy_loss": {"out": 0.002}, "gpu_time": 1.05}),
    json.dumps({"iter": 2, "build_route": "-conv_use_long_w=off", "crash": True,
                "error_message": "Segmentation fault", "accuracy_loss": None, "gpu_time": None}),
])

ms = st.floats(0.001, 1e4)
timings = st.tuples(ms, ms, ms, ms, st.integers(1, 10000)).map(
    lambda t: TimingStats(median_ms=t[0], mean_ms=t[1], p90_ms=t[2], min_ms=t[3], n=t[4]))


@given(st.dictionaries(st.from_regex(r"[a-z_]{1,8}", fullmatch=True), st.from_regex(r"[a-z0-9]{1,4}", fullmatch=True),
                       max_size=4),
       st.sampled_from(list(Outcome)), st.none() | timings,
       st.none() | st.dictionaries(st.from_regex(r"[a-z]{1,5}", fullmatch=True), st.floats(0, 10), max_size=3))
def test_cache_entry_json_round_trip(knobs, outcome, timing, loss):
    route = Route.of(knobs)
    entry = CacheEntry(target="NVIDIA-H200", route_id=route.id, route=route.canonical, knobs=knobs, outcome=outcome,
                       timing=timing, loss=loss, versions=Versions(compiler="onnxruntime-1.20", gpu_name="H200"))
    assert CacheEntry.from_json(entry.to_json()) == entry


def test_import_trtexec_cache_canonicalizes_routes_and_marks_outcomes():
    header, entries = import_trtexec(TRTEXEC_CACHE, target="NVIDIA-H200", threshold=0.001)
    assert header["tuner_version"] == "2.19.15"
    assert [e.route for e in entries] == ["", "-conv_use_long_w=off -kgen:codegen:cuda_tile=2",
                                          "-conv_use_long_w=off"]
    assert [e.outcome for e in entries] == [Outcome.ok, Outcome.accuracy_rejected, Outcome.crash]
    assert entries[0].median_ms == 1.25 and entries[2].timing is None
    assert entries[1].route_id == Route.of({"kgen:codegen:cuda_tile": "2", "conv_use_long_w": "off"}).id


def test_export_then_import_keeps_routes_times_losses_and_crashes():
    _, entries = import_trtexec(TRTEXEC_CACHE, target="t", threshold=None)
    text = export_trtexec(entries, metric="cosine", atol=1e-5, rtol=1e-5, search_mode="fast")
    lines = [json.loads(line) for line in text.splitlines()]
    assert lines[0]["accuracy_algorithm"] == "cos"
    assert [line["iter"] for line in lines[1:]] == [0, 1, 2]
    _, again = import_trtexec(text, target="t", threshold=None)
    assert [(e.route, e.outcome, e.median_ms, e.loss) for e in again] == \
        [(e.route, e.outcome, e.median_ms, e.loss) for e in entries]
