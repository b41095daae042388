"""bench/confirm_cost.py's summary comes from its pairs' own records: the seconds and rounds of
each confirmation with the early stop and with every round, and whether the two decided alike."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from confirm_cost import summarise  # noqa: E402


def record(seconds: float, rounds: int, winner: str = "") -> dict:
    return {"seconds": seconds, "rounds": rounds, "winner": winner, "ratios": {}}


def test_the_summary_is_computed_from_the_pairs():
    pairs = [
        {"index": 0, "stop": record(6.0, 3), "all": record(10.0, 5)},
        {"index": 1, "all": record(12.0, 5), "stop": record(12.0, 5, "-a=1")},
        {"index": 2, "stop": record(5.0, 3)},  # cut short before its second half: left out
    ]
    summary = summarise(pairs)
    assert summary["pairs"] == 2 and summary["stopped_early"] == 1 and summary["rounds_with_stop"] == [3, 5]
    assert summary["ratio_range"] == [0.6, 1.0] and summary["ratio_median"] == 0.8
    assert summary["seconds_with_stop_median"] == 9.0 and summary["seconds_all_rounds_median"] == 11.0
    assert summary["decisions_alike"] == 1
    assert summarise([]) == {"pairs": 0}


def test_calibration_counts_intervals_holding_1_and_the_mean_ratio_by_load_position():
    from confirm_cost import calibration
    from enginewright.measure.paired import load_key

    def times(scale_b: float) -> dict:
        out = {}
        for i, offset in enumerate((0.0, 0.01, -0.01)):
            for engine, scale in (("d", 1.0), ("a", 1.0), ("b", scale_b)):
                out[load_key(engine, i)] = [scale * (1 + offset) * (1 + 0.002 * r) for r in range(3)]
        return out

    twin = {"seconds": 1.0, "rounds": 3, "winner": "", "default_id": "d", "times": times(1.0)}
    slow = {**twin, "times": times(1.2)}  # candidate b 20% slower: its interval lies above 1
    result = calibration([{"stop": twin, "all": slow}, {"stop": {**twin, "times": None}, "all": twin}])
    assert result["intervals"] == 6 and result["holding_1"] == 5 and result["wholly_above_1"] == 1
    assert result["wholly_below_1"] == 0
    assert result["mean_ratio_by_load_position"]["1"] == 1.0
    assert abs(result["mean_ratio_by_load_position"]["2"] - (1 + 1.2 + 1) / 3) < 1e-9
