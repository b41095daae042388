"""docs/benchmarks/h200-goals.json names the commands its pooled runs came from: a run of A/A trials only
was made with `--power-every 0`, and the goals file must not claim the mixed command made it."""

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))

from h200_goals import AA_COMMAND, OVERHEAD_COMMAND, aa_command, goals  # noqa: E402  (bench/ is not a package)


def run(*kinds: str, command: str | None = None) -> dict:
    out: dict = {"trials": [{"kind": kind} for kind in kinds]}
    if command:
        out["command"] = command
    return out


def test_each_run_is_named_by_the_command_that_made_it():
    assert aa_command(run("aa", "power")) == AA_COMMAND
    assert aa_command(run("aa", "aa")).endswith(" --power-every 0")
    assert aa_command(run("power")).endswith(" --power-every 1")
    assert (
        aa_command(run("aa", command="python3 bench/aa_loads.py --seconds 9"))
        == "python3 bench/aa_loads.py --seconds 9"
    )


def test_the_goals_list_each_command_once():
    commands = [aa_command(r) for r in (run("aa", "power"), run("aa"), run("aa"))]
    listed = goals(None, [], "rev", [], commands)["commands"]
    assert listed == [AA_COMMAND, AA_COMMAND + " --power-every 0", OVERHEAD_COMMAND]


def test_goal_three_counts_the_runs_before_and_since_the_moments_and_needs_two_inside():
    from h200_goals import GOAL3_COMMAND, goal3

    def plain(workload: str, inside: bool, moments: bool = True) -> dict:
        head = {"speedup": 2.0, "low": 1.9, "high": 2.1}
        return {
            "decision": f"confirmed ...: 2.000x the default (95% 1.9-2.1 across loads{' and rounds' * moments}; ...)",
            "workload": workload,
            "winner_route": "-triton.cudagraphs=true",
            "headline": head,
            "plain_ratio": 2.0 if inside else 1.7,
            "plain_ratio_in_interval": inside,
        }

    before = [(plain("block", False, moments=False), "5e9f32e"), (plain("mlp", True, moments=False), "5e9f32e")]
    once = goal3([*before, (plain("block", True), "77f9a80")])
    assert once["block"] == {"moments": {"runs": 1, "inside": 1}, "loads": {"runs": 1, "inside": 0}}
    assert once["mlp"]["loads"] == {"runs": 1, "inside": 1} and not once["met"]  # one run is not yet a pattern
    assert goal3([*before, (plain("block", True), "77f9a80"), (plain("block", True), "a later one")])["met"]
    assert not goal3([(plain("block", True), "77f9a80"), (plain("block", False), "77f9a80")])["met"]
    listed = goals(None, [], "rev", [], [AA_COMMAND], before)
    assert listed["met"]["goal3"] is False and listed["commands"][-1] == GOAL3_COMMAND


def test_runs_that_stop_once_settled_are_pooled_apart_and_refused_otherwise():
    import pytest

    from h200_goals import settled

    def stopping(found: list[bool], stop: str | None = "settled") -> dict:
        trials = [{"kind": "power", "verified": True, "after": f, "verified_slowdown": 0.05} for f in found]
        return {**run(), "trials": trials, "confirm_stop": stop, "power_discarded": 1, "command": "aa --power-every 1"}

    pooled = settled([stopping([True, True]), stopping([True, False])])
    assert pooled["power"]["trials"] == 4 and pooled["power"]["found"] == 3 and pooled["power"]["discarded"] == 2
    assert pooled["aa"]["trials"] == 0 and pooled["commands"] == ["aa --power-every 1"]
    with pytest.raises(SystemExit, match="stop once settled"):
        settled([stopping([True]), stopping([True], stop=None)])
