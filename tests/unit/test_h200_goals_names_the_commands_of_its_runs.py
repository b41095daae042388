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
