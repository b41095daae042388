"""bench/reconfirm.py decides committed confirmation rounds again with today's rule, counting A/A
false winners and verified power trials then and now, and naming every trial decided differently."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from enginewright.measure.paired import load_key  # noqa: E402
from reconfirm import reconfirm  # noqa: E402


def rounds(scale: float) -> dict[str, list[float]]:
    times = {}
    for i, offset in enumerate((0.0, 0.004, -0.004, 0.002, -0.002)):
        times[load_key("d", i)] = [0.30 * (1 + offset) * (1 + 0.001 * r) for r in range(5)]
        times[load_key("r", i)] = [0.30 * scale * (1 - offset) * (1 + 0.001 * r) for r in range(5)]
    return times


def trial(kind: str, scale: float, named_then: bool, candidate: bool = True, verified: bool = True) -> dict:
    return {
        "kind": kind,
        "candidate": candidate,
        "confirm": {"named": named_then},
        "after": candidate and named_then,
        "verified": verified,
        "rounds": rounds(scale),
    }


def test_the_rule_is_applied_again_and_differences_are_named():
    run = {
        "path": "made-up.json",
        "margin": 0.03,
        "trials": [
            trial("aa", 1.0, named_then=False),
            trial("aa", 1.0, named_then=True),  # then named: today's rule does not
            trial("aa", 0.9, named_then=False, candidate=False),  # named now, but stage 1 had not flagged it
            trial("power", 0.95, named_then=True),
            trial("power", 0.95, named_then=True, candidate=False),  # stage 1 missed it: not found
            trial("power", 0.95, named_then=False, verified=False),  # injection not verified: not counted
        ],
    }
    result = reconfirm([run])
    assert result["aa"] | {"upper95_now": 0, "named_share_upper95": 0} == {
        "trials": 3,
        "false_winners_then": 1,
        "false_winners_now": 0,
        "confirmations": 3,
        "named_now": 1,
        "upper95_now": 0,
        "named_share_upper95": 0,
    }
    assert result["power"]["trials"] == 2 and result["power"]["found_then"] == 1 and result["power"]["found_now"] == 1
    assert [(c["trial"], c["then"], c["now"]) for c in result["changed"]] == [
        (1, True, False),
        (2, False, True),
        (5, False, True),
    ]
    widths = result["interval"]
    assert widths["confirmations"] == 6
    assert widths["width_now_over_loads_alone"]["median"] >= 1.0  # the moments never narrow an interval


def test_the_grid_replays_smaller_confirmations_and_the_early_stop_on_the_same_rounds():
    from reconfirm import cut, grid, replayed

    slow = rounds(1.10)  # a candidate 10% slower: settled after 3 of 5 rounds
    assert cut(slow, 2, 3) == {key: values[:3] for key, values in slow.items() if key in ("d", "r", "d@2", "r@2")}
    assert replayed(slow, 5, 5, 0.03, stop=False) == (False, 5)
    assert replayed(slow, 5, 5, 0.03, stop=True) == (False, 3)
    assert replayed(rounds(0.95), 5, 5, 0.03, stop=True) == (True, 5)  # a clear 5% winner: not stopped early

    run = {
        "margin": 0.03,
        "trials": [
            trial("aa", 1.10, named_then=False),
            trial("power", 0.95, named_then=True),
            trial("power", 0.95, named_then=True, verified=False),
        ],
    }
    rows = {(r["loads"], r["rounds"], r["early_stop"]): r for r in grid([run], loads=(5, 2), counts=(5, 3))}
    assert set(rows) == {(5, 5, False), (5, 5, True), (5, 3, False), (5, 3, True), (2, 5, False), (2, 5, True)} | {
        (2, 3, False),
        (2, 3, True),
    }
    full, stopped = rows[(5, 5, False)], rows[(5, 5, True)]
    assert full["load_rounds_per_confirmation"] == 25 and full["stopped_early"] == 0
    assert stopped["stopped_early"] == 1 and stopped["load_rounds_per_confirmation"] == (15 + 25 + 25) / 3
    assert stopped["power"] == full["power"] | {"lower95": stopped["power"]["lower95"]}
    assert stopped["decisions_changed_by_the_stop"] == 0 and full["decisions_changed_by_the_stop"] is None
    assert full["power"]["trials"] == 1 and full["power"]["found"] == 1 and full["aa"]["named"] == 0
    assert rows[(2, 3, False)]["load_rounds_per_confirmation"] == 6


def test_the_stage1_replay_counts_early_stops_and_the_candidates_they_would_lose():
    from reconfirm import stage1_early

    run = {
        "margin": 0.03,
        "trials": [
            trial("aa", 1.10, named_then=False),  # wholly above the line from round 3: stops there
            trial("aa", 1.0, named_then=False),
            trial("power", 0.95, named_then=True),  # a candidate: never stopped
            trial("power", 1.10, named_then=False, verified=False),  # not verified: left out
        ],
    }
    result = stage1_early([run])
    assert result["aa"]["comparisons"] == 4 and result["aa"]["rounds"] == 20
    assert result["aa"]["stopped_early"] == 4 and result["aa"]["rounds_saved"] == 8
    assert result["power"] == {"comparisons": 2, "stopped_early": 0, "candidates_lost": 0}


def test_a_power_comparison_slow_in_its_first_rounds_is_counted_as_a_lost_candidate():
    from reconfirm import stage1_early

    late = trial("power", 1.0, named_then=True)
    late["rounds"] = {
        key: [v * (1.10 if r < 3 else 0.70) if key.startswith("r") else v for r, v in enumerate(values)]
        for key, values in late["rounds"].items()
    }
    result = stage1_early([{"margin": 0.03, "trials": [late]}])
    assert result["power"] == {"comparisons": 2, "stopped_early": 2, "candidates_lost": 2}
