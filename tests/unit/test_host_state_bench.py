"""bench/host_state.py's pure parts: the rank correlation it reports, and its summary of turns (which
halves of the probe the default's time falls in), on turns made up here; and its probes time real
work on this host."""

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))

import host_state as hs  # noqa: E402  (bench/ is not a package)


def test_spearman_is_a_rank_correlation():
    assert hs.spearman([1, 2, 3, 4], [10, 20, 30, 400]) == pytest.approx(1.0)
    assert hs.spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    assert hs.spearman([1, 2], [1, 2]) is None and hs.spearman([1, 1, 1], [1, 2, 3]) is None
    # ties share their rank: a mostly-zero column says nothing about a rising one
    assert hs.ranks([0, 0, 5, 0]) == [1.0, 1.0, 3.0, 1.0]
    assert hs.spearman([0, 0, 0, 0, 1, 0], [1, 2, 3, 4, 5, 6]) == pytest.approx(
        0.393, abs=1e-3
    )  # turn-order ties: 0.943


def turn(probe_ms: float, default_ms: float, winner_ms: float = 0.15) -> dict:
    return {
        "probe_c_ms": probe_ms / 2, "probe_c_after_ms": probe_ms / 2, "probe_py_ms": probe_ms,
        "probe_py_after_ms": probe_ms, "default_ms": default_ms, "winner_ms": winner_ms,
        "default_cpu_share": 1.0, "winner_cpu_share": 0.9, "steal_ticks": 0, "cpu": 3,
    }  # fmt: skip


def test_a_default_that_follows_the_hosts_speed_is_told_from_a_route_that_does_not():
    probes, winner = [0.8, 1.6, 0.9, 1.5, 1.0, 1.4], [0.1502, 0.1503, 0.1505, 0.1500, 0.1504, 0.1501]
    turns = [turn(p, 0.25 * p, w) for p, w in zip(probes, winner)]
    summary = hs.summary(turns)
    assert summary["default"]["spearman_probe_py"] == pytest.approx(1.0)
    assert abs(summary["winner"]["spearman_probe_py"]) < 0.5
    assert summary["default_ms_when_probe_py_fast"] < summary["default_ms_when_probe_py_slow"]
    assert summary["probe_py_ms_range"] == [0.8, 1.6] and summary["cpus_seen"] == [3]


def test_the_probes_time_real_work():
    assert 0 < hs.probe_c() < 1000 and 0 < hs.probe_py() < 1000
    assert hs.current_cpu() is not None
