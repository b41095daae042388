"""bench/measure_cost.py's pure parts: the sweep's configurations and route strings match tune's,
the winner comparison, CPU pinning choices, tune's phases from its output lines; and the stand-in
text detector is deterministic and runs."""

import sys
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))

import measure_cost as mc  # noqa: E402  (bench/ is not a package)


def test_the_sweep_is_every_combination_default_first_in_tunes_route_notation():
    configs = mc.sweep_configs()
    defaults = {name: default for name, default, _ in mc.KNOBS}
    assert len(configs) == 16 and configs[0] == defaults
    routes = [mc.canonical(c, defaults) for c in configs]
    assert routes[0] == "" and len(set(routes)) == 16
    assert (
        mc.canonical({**defaults, "graph_optimization_level": "basic", "enable_mem_pattern": "0"}, defaults)
        == "-enable_mem_pattern=0 -graph_optimization_level=basic"
    )


def test_route_strings_parse_back_and_complete_with_the_defaults():
    defaults = {name: default for name, default, _ in mc.KNOBS}
    for config in mc.sweep_configs():
        route = mc.canonical(config, defaults)
        assert mc.full_config(mc.parse_route(route)) == config
    assert mc.parse_route("") == {}


def test_the_canonical_string_is_tunes():
    from enginewright.api.routes import canonical_route

    defaults = {name: default for name, default, _ in mc.KNOBS}
    config = {**defaults, "session.intra_op.allow_spinning": "0", "execution_mode": "parallel"}
    assert mc.canonical(config, defaults) == canonical_route({k: v for k, v in config.items() if defaults[k] != v})


def test_agreement_exact_within_margin_and_not():
    naive = {"": 100.0, "-a=1": 98.0, "-b=1": 120.0}
    assert mc.agreement(naive, "-a=1", 0.03)["exact"] is True
    kept_default = mc.agreement(naive, "", 0.03)  # tune kept the default: 100 is within 3% of 98
    assert kept_default["agree"] and not kept_default["exact"] and kept_default["naive_default_ms"] == 100.0
    assert not mc.agreement(naive, "-b=1", 0.03)["agree"]
    assert mc.agreement(naive, "-c=1", 0.03)["agree"] is False  # not in the sweep


def test_cpu_lists_and_one_cpu_per_physical_core():
    assert mc.parse_cpu_list("0-3,8,10-11\n") == [0, 1, 2, 3, 8, 10, 11]
    siblings = {c: {c % 4, c % 4 + 4} for c in range(8)}  # 4 cores, SMT siblings c and c+4
    assert mc.pick_cpus(list(range(8)), 2, siblings) == [0, 1]
    pairs = {0: {0, 1}, 1: {0, 1}, 2: {2, 3}, 3: {2, 3}}  # siblings numbered next to each other
    assert mc.pick_cpus([0, 1, 2, 3], 2, pairs) == [0, 2]
    assert mc.pick_cpus([0, 1], 2, {0: {0, 1}, 1: {0, 1}}) == [0, 1]  # one core: both threads
    assert mc.pick_cpus([5, 3], 4, {}) == [3, 5]


def test_phases_from_tunes_lines():
    timeline = [
        (0.5, "[      ]   0/5   mixed search: 5 routes in stage 1"),
        (3.0, "[##    ]   1/5   [stage1-b000] default route (baseline): 1 ms"),
        (20.0, "[###   ]   5/6   [stage2-b000] 2 routes"),
        (25.0, "[####  ]   6/6   [confirm] 3 candidates vs the default"),
        (31.0, ""),
        (31.0, "route table"),
    ]
    assert mc.phases(timeline, 32.0, summary_at=30.0) == {
        "stage1": 20.0,
        "stage2": 5.0,
        "confirm": 5.0,
        "report": 1.0,
        "finish": 1.0,
    }
    assert mc.phases(timeline[:2] + [(10.0, "table")], 11.0) == {"stage1": 10.0, "finish": 1.0}


def test_entries_read_in_camel_case():
    entry = mc.snake_keys(
        {
            "buildSeconds": 0.4,
            "startedAt": "2026-01-01T00:00:00Z",
            "finishedAt": "2026-01-01T00:00:07Z",
            "timing": {"meanMs": 2.0, "n": 5},
        }
    )
    assert entry["build_seconds"] == 0.4 and entry["timing"]["mean_ms"] == 2.0
    assert mc.route_seconds(entry) == 7.0


def test_the_tune_command_sweeps_the_same_knobs_with_default_timing():
    model = {"path": "m.onnx", "inputs": ["i0.npz", "i1.npz"], "references": ["r0.npz", "r1.npz"]}
    cmd = mc.tune_command("python", model, Path("out"), [])
    assert cmd[:4] == ["python", "-m", "enginewright", "tune"] and "mixed" in cmd
    assert [cmd[i + 1] for i, a in enumerate(cmd) if a == "--knob"] == [f"{n}={o}" for n, _, o in mc.KNOBS]
    assert cmd.count("--inputs") == cmd.count("--references") == 2


def test_the_text_detector_is_deterministic_and_runs():
    ort = pytest.importorskip("onnxruntime")
    from cpu_models import db_text_detector, image_like_inputs

    a, b = db_text_detector(64, width=0.5, neck=32), db_text_detector(64, width=0.5, neck=32)
    assert a.SerializeToString() == b.SerializeToString()
    session = ort.InferenceSession(a.SerializeToString(), providers=["CPUExecutionProvider"])
    (maps,) = session.run(None, image_like_inputs(64, 1)[0])
    assert maps.shape == (1, 1, 64, 64) and np.all((maps >= 0) & (maps <= 1)) and maps.std() > 0.01
    with pytest.raises(ValueError):
        db_text_detector(100)
