"""Cache entries round-trip through JSON; trtexec's JSON Lines tuning cache imports and exports as
TensorRT 11.1's trtexec writes it (samples/common/sampleUtils.cpp: writeTuningCacheHeader,
writeTuningCacheIteration; samples/common/sampleTuning.cpp: buildDefaultPath, getPathAtIndex)."""

import json
import math

from hypothesis import given, strategies as st

from enginewright.api.cache import CacheEntry, Outcome, TimingStats, Versions
from enginewright.api.routes import Route, parse_tensorrt_knobs, route_id
from enginewright.trtexec.format import export_trtexec, import_trtexec, parse_trtexec_route, trtexec_files

KNOB_JSON = json.dumps(
    {
        "tuner_version": "2.19.15",
        "tuner_options": [
            {
                "option": "-conv_use_long_w",
                "allowed_values": "-conv_use_long_w=[on|off]",
                "default_value": "on",
                "help": "",
            },
            {
                "option": "-kgen:codegen:cuda_tile",
                "allowed_values": "-kgen:codegen:cuda_tile=[0|1|2|3]",
                "default_value": "1",
                "help": "",
            },
            {"option": "-reshape_ppg", "allowed_values": "-reshape_ppg=[on|off]", "default_value": "on", "help": ""},
        ],
    }
)
TUNER_VERSION, KNOBS = parse_tensorrt_knobs(KNOB_JSON)


def trtexec_line(obj) -> str:
    """A line as nlohmann's ordered_json dump() writes it."""
    return json.dumps(obj, separators=(",", ":"))


# What `trtexec --tuneBuildRoutes="-conv_use_long_w=[on|off] -kgen:codegen:cuda_tile=[1|2]" --tuningSearch=fast
# --accuracyAlgorithm=cos --accuracyThreshold=0.001 ...` writes: every tuned knob in every route, defaults
# included; the default route lists every knob of the database.
TRTEXEC_CACHE = "\n".join(
    [
        trtexec_line(
            {
                "tuner_version": "2.19.15",
                "accuracy_algorithm": "Cosine",
                "accuracy_parameter": {"atol": 1e-5, "rtol": 1e-5, "epsilon": 0.001},
                "searching_algorithm": "fast",
                "command_line": "trtexec --onnx=m.onnx '--tuneBuildRoutes=-conv_use_long_w=[on|off] "
                "-kgen:codegen:cuda_tile=[1|2]'",
                "default_build_route": "-conv_use_long_w=on -kgen:codegen:cuda_tile=1 -reshape_ppg=on",
                "tuning_expr": "-conv_use_long_w=[on|off] -kgen:codegen:cuda_tile=[1|2]",
                "files": {"onnx": "/w/m.onnx", "inputs": {"x": "/w/x.bin"}, "ref_outputs": {"out": "/w/out.bin"}},
                "argv": ["trtexec", "--onnx=/w/m.onnx"],
            }
        ),
        trtexec_line(
            {
                "iter": 0,
                "build_route": "-conv_use_long_w=on -kgen:codegen:cuda_tile=1",
                "crash": False,
                "error_message": "",
                "accuracy_loss": {"out": 0.0},
                "gpu_time": 1.25,
            }
        ),
        trtexec_line(
            {
                "iter": 1,
                "build_route": "-conv_use_long_w=on -kgen:codegen:cuda_tile=2",
                "crash": False,
                "error_message": "",
                "accuracy_loss": {"out": 0.002},
                "gpu_time": 1.05,
            }
        ),
        trtexec_line(
            {
                "iter": 2,
                "build_route": "-conv_use_long_w=off -kgen:codegen:cuda_tile=1",
                "crash": True,
                "error_message": "Segmentation fault",
                "accuracy_loss": None,
                "gpu_time": None,
            }
        ),
    ]
)

ms = st.floats(0.001, 1e4)
timings = st.tuples(ms, ms, ms, ms, st.integers(1, 10000)).map(
    lambda t: TimingStats(median_ms=t[0], mean_ms=t[1], p90_ms=t[2], min_ms=t[3], n=t[4])
)


@given(
    st.dictionaries(
        st.from_regex(r"[a-z_]{1,8}", fullmatch=True), st.from_regex(r"[a-z0-9]{1,4}", fullmatch=True), max_size=4
    ),
    st.sampled_from(list(Outcome)),
    st.none() | timings,
    st.none() | st.dictionaries(st.from_regex(r"[a-z]{1,5}", fullmatch=True), st.floats(0, 10), max_size=3),
)
def test_cache_entry_json_round_trip(knobs, outcome, timing, loss):
    route = Route.of(knobs)
    entry = CacheEntry(
        target="NVIDIA-H200",
        route_id=route.id,
        route=route.canonical,
        knobs=knobs,
        outcome=outcome,
        timing=timing,
        loss=loss,
        versions=Versions(compiler="onnxruntime-1.20", gpu_name="H200"),
    )
    assert CacheEntry.from_json(entry.to_json()) == entry


def test_import_drops_knobs_at_their_default_so_trtexecs_baseline_is_our_default_route():
    header, entries = import_trtexec(TRTEXEC_CACHE, target="NVIDIA-H200")
    assert header["tuner_version"] == "2.19.15"
    assert [e.route for e in entries] == ["", "-kgen:codegen:cuda_tile=2", "-conv_use_long_w=off"]
    assert entries[0].route_id == route_id("") == "e3b0c44298fc"
    assert entries[1].route_id == Route.of({"kgen:codegen:cuda_tile": "2"}).id
    # The knob list gives the same answer as the header's default_build_route.
    _, with_knobs = import_trtexec(TRTEXEC_CACHE, target="t", knobs=KNOBS)
    assert [e.route_id for e in with_knobs] == [e.route_id for e in entries]


def test_import_takes_the_threshold_from_the_header_and_marks_outcomes():
    _, entries = import_trtexec(TRTEXEC_CACHE, target="t")  # epsilon 0.001 in the header
    assert [e.outcome for e in entries] == [Outcome.ok, Outcome.accuracy_rejected, Outcome.crash]
    assert entries[0].median_ms == 1.25 and entries[2].timing is None
    assert all(e.baseline_ms == 1.25 for e in entries)  # the default route of the same sweep
    _, loose = import_trtexec(TRTEXEC_CACHE, target="t", threshold=0.01)
    assert loose[1].outcome is Outcome.ok


def test_null_loss_from_nlohmanns_nan_imports_as_a_failed_loss():
    nan_row = trtexec_line(
        {
            "iter": 3,
            "build_route": "-conv_use_long_w=off -kgen:codegen:cuda_tile=2",
            "crash": False,
            "error_message": "",
            "accuracy_loss": {"out": None},
            "gpu_time": 0.9,
        }
    )
    for threshold in (None, 0.5):
        header_only = TRTEXEC_CACHE.splitlines()[0].replace('"epsilon":0.001', '"epsilon":0')
        _, entries = import_trtexec("\n".join([header_only, nan_row]), target="t", threshold=threshold)
        assert entries[0].outcome is Outcome.accuracy_rejected and not entries[0].passed
        # Stored as trtexec wrote it (null, strict JSON), no message invented: trtexec wrote none.
        assert entries[0].loss == {"out": None} and math.isinf(entries[0].max_loss) and entries[0].error is None
        assert "Infinity" not in entries[0].to_json() and "NaN" not in entries[0].to_json()


def test_export_header_is_trtexecs_field_for_field():
    entry = CacheEntry(
        target="t",
        route_id=route_id(""),
        route="",
        outcome=Outcome.ok,
        loss={"out": 0.0},
        timing=TimingStats(median_ms=1.0, mean_ms=1.1, p90_ms=1.2, min_ms=0.9, n=10),
    )
    for metric, name in {"l0": "L0", "abs": "L1", "squared": "L2", "max": "LInf", "cosine": "Cosine"}.items():
        text = export_trtexec(
            [entry],
            metric=metric,
            atol=1e-5,
            rtol=1e-4,
            search_mode="fast",
            threshold=0.002,
            knobs=KNOBS,
            files={"onnx": "/w/m.onnx", "save_engine": None, "inputs": {"x": "/w/x.npz"}},
        )
        first = text.splitlines()[0]
        header = json.loads(first)
        assert list(header) == [
            "tuner_version",
            "accuracy_algorithm",
            "accuracy_parameter",
            "searching_algorithm",
            "command_line",
            "default_build_route",
            "tuning_expr",
            "files",
            "argv",
        ]
        assert header["accuracy_algorithm"] == name
        assert header["accuracy_parameter"] == {"atol": 1e-5, "rtol": 1e-4, "epsilon": 0.002}
        assert header["default_build_route"] == "-conv_use_long_w=on -kgen:codegen:cuda_tile=1 -reshape_ppg=on"
        assert header["files"] == {"onnx": "/w/m.onnx", "inputs": {"x": "/w/x.npz"}}  # only the keys that are set
        assert ", " not in first and '": ' not in first  # nlohmann's compact dump()


def test_export_writes_every_tuned_knob_and_nulls_for_non_finite_numbers():
    def entry(knobs, outcome=Outcome.ok, loss=None, mean=1.0):
        route = Route.of(knobs)
        return CacheEntry(
            target="t",
            route_id=route.id,
            route=route.canonical,
            knobs=knobs,
            outcome=outcome,
            loss=loss,
            timing=TimingStats(median_ms=mean, mean_ms=mean, p90_ms=mean, min_ms=mean, n=3),
        )

    entries = [
        entry({}, loss={"out": 0.0}),
        entry({"conv_use_long_w": "off"}, Outcome.accuracy_rejected, {"out": math.inf}, 0.8),
        entry({"kgen:codegen:cuda_tile": "3"}, Outcome.build_failed),
    ]
    lines = export_trtexec(entries, metric="cosine", atol=1e-5, rtol=1e-5, search_mode="fast", knobs=KNOBS).splitlines()
    rows = [json.loads(line) for line in lines[1:]]
    assert "Infinity" not in "".join(lines) and "NaN" not in "".join(lines)
    assert [list(r) for r in rows] == [
        ["iter", "build_route", "crash", "error_message", "accuracy_loss", "gpu_time"]
    ] * 3
    assert [r["build_route"] for r in rows] == [
        "-conv_use_long_w=on -kgen:codegen:cuda_tile=1",
        "-conv_use_long_w=off -kgen:codegen:cuda_tile=1",
        "-conv_use_long_w=on -kgen:codegen:cuda_tile=3",
    ]
    assert rows[1]["accuracy_loss"] == {"out": None} and rows[1]["crash"] is False
    assert rows[2]["crash"] is True and rows[2]["accuracy_loss"] is None and rows[2]["gpu_time"] is None
    assert json.loads(lines[0])["tuning_expr"] == "-conv_use_long_w=[on|off] -kgen:codegen:cuda_tile=[1|3]"
    # ... and reading it back gives the same route ids.
    _, again = import_trtexec("\n".join(lines), target="t")
    assert [e.route_id for e in again] == [e.route_id for e in entries]


def test_import_then_export_keeps_tuner_version_header_routes_times_losses_and_crashes():
    header, entries = import_trtexec(TRTEXEC_CACHE, target="t", threshold=None)
    text = export_trtexec(
        entries, metric="cosine", atol=1e-5, rtol=1e-5, search_mode="fast", threshold=0.001, header=header
    )
    lines = [json.loads(line) for line in text.splitlines()]
    assert lines[0]["tuner_version"] == "2.19.15"
    for key in ("command_line", "default_build_route", "tuning_expr", "files", "argv"):
        assert lines[0][key] == header[key], key
    assert [line["iter"] for line in lines[1:]] == [0, 1, 2]
    assert [parse_trtexec_route(line["build_route"]) for line in lines[1:]] == [
        [("conv_use_long_w", "on"), ("kgen:codegen:cuda_tile", "1")],
        [("conv_use_long_w", "on"), ("kgen:codegen:cuda_tile", "2")],
        [("conv_use_long_w", "off"), ("kgen:codegen:cuda_tile", "1")],
    ]
    _, again = import_trtexec(text, target="t")
    assert [(e.route_id, e.outcome, e.median_ms, e.loss) for e in again] == [
        (e.route_id, e.outcome, e.median_ms, e.loss) for e in entries
    ]
    # Without a header, the version recorded on the imported entries is still the tuner's.
    assert (
        json.loads(export_trtexec(entries, metric="l0", atol=0, rtol=0, search_mode="fast").splitlines()[0])[
            "tuner_version"
        ]
        == "2.19.15"
    )


def test_a_mixed_search_second_phase_repeating_a_route_keeps_the_first_result():
    phase2 = [
        trtexec_line(
            {
                "iter": 0,
                "build_route": "-conv_use_long_w=on -kgen:codegen:cuda_tile=1",
                "crash": False,
                "error_message": "",
                "accuracy_loss": {"out": 0.0},
                "gpu_time": 9.0,
            }
        )
    ]
    _, entries = import_trtexec(TRTEXEC_CACHE + "\n" + phase2[0], target="t")
    assert len(entries) == 3 and entries[0].median_ms == 1.25


def test_export_restarts_iter_for_stage_two_as_trtexecs_second_phase_does():
    def entry(knobs, stage):
        route = Route.of(knobs)
        return CacheEntry(
            target="t",
            route_id=route.id,
            route=route.canonical,
            knobs=knobs,
            stage=stage,
            outcome=Outcome.ok,
            timing=TimingStats(median_ms=1, mean_ms=1, p90_ms=1, min_ms=1, n=1),
        )

    text = export_trtexec(
        [entry({}, "stage1"), entry({"a": "1"}, "stage1"), entry({"a": "1", "b": "1"}, "stage2")],
        metric="cosine",
        atol=0,
        rtol=0,
        search_mode="mixed",
    )
    assert [json.loads(line)["iter"] for line in text.splitlines()[1:]] == [0, 1, 0]


def test_files_name_each_tensor_of_the_first_pair_and_only_what_is_set(tmp_path):
    import numpy as np

    np.savez(tmp_path / "in.npz", x=np.zeros(2), mask=np.ones(2))
    np.savez(tmp_path / "ref.npz", out=np.zeros(2))
    (tmp_path / "m.onnx").write_bytes(b"")
    files = trtexec_files(tmp_path / "m.onnx", tmp_path / "in.npz", tmp_path / "ref.npz")
    assert files == {
        "onnx": str(tmp_path / "m.onnx"),
        "inputs": {"x": str(tmp_path / "in.npz"), "mask": str(tmp_path / "in.npz")},
        "ref_outputs": {"out": str(tmp_path / "ref.npz")},
    }
    assert trtexec_files(tmp_path / "m.pt2") == {}
