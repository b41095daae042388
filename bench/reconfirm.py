"""Issue 19: the winner rule of today's code applied again to confirmation rounds measured on the H200
and committed (bench/aa_loads.py's aa_loads.json: every trial keeps its confirmation's per-load,
per-round times), beside what the rule of the day decided, trial by trial. For a change of the rule
(here: the rounds counted as moments, `measure.paired.moment_variance`) without spending GPU time
on the A/A and power goals again: the times are the same, only the decision is redone.

    python bench/reconfirm.py --out OUT.json AA_LOADS.json [AA_LOADS.json ...]

Counts, over every file given: A/A trials and false winners (a trial is a false winner when stage 1
made it a candidate, as recorded, and the confirmation names it); power trials whose injected
slowdown was verified and how many were found; and the confirmations that the two rules decide
differently; and how much wider each confirmation's interval is now than across loads alone (its
log width now over then). Stage 1 is not redone (its rounds are not kept): a wider stage-1 interval only makes
more trials candidates (a lower bound further below the line), so for A/A this also gives the
share of all confirmations run, candidate or not, that name a winner under today's rule: fresh
loads, independent of stage 1, so it bounds the false-winner rate whatever stage 1 flags.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "operator"), str(REPO / "bench")]

from enginewright.measure.paired import by_engine, compare  # noqa: E402
from enginewright.search.winner import confirm  # noqa: E402
from h200_goals import lower_bound, upper_bound  # noqa: E402


def reconfirm(runs: list[dict]) -> dict:
    """Every trial with confirmation rounds decided again; counts then and now."""
    aa = {"trials": 0, "false_winners_then": 0, "false_winners_now": 0, "confirmations": 0, "named_now": 0}
    power = {"trials": 0, "found_then": 0, "found_now": 0}
    changed, widths, with_moments = [], [], 0
    for run in runs:
        margin = run["margin"]
        for index, trial in enumerate(run["trials"]):
            rounds = trial.get("rounds")
            now = None if not rounds else not confirm(rounds, "d", margin).default_won
            then = bool(trial["confirm"] and trial["confirm"]["named"])
            if rounds:  # the route's 95% interval against the default's, now and across loads alone
                engines = by_engine(rounds)
                new, old = (compare(engines["r"], engines["d"], moments=m) for m in (True, False))
                widths.append(math.log(new.high / new.low) / math.log(old.high / old.low))
                with_moments += new.moment_spread > 0
            if now is not None and now != then:
                changed.append({"run": run["path"], "trial": index, "kind": trial["kind"], "then": then, "now": now})
            if trial["kind"] == "aa":
                aa["trials"] += 1
                aa["false_winners_then"] += bool(trial["after"])
                aa["false_winners_now"] += bool(trial["candidate"] and now)
                if now is not None:
                    aa["confirmations"] += 1
                    aa["named_now"] += now
            elif trial["verified"]:
                power["trials"] += 1
                power["found_then"] += bool(trial["after"])
                power["found_now"] += bool(trial["candidate"] and now)
    aa["upper95_now"] = upper_bound(aa["false_winners_now"], aa["trials"])
    aa["named_share_upper95"] = upper_bound(aa["named_now"], aa["confirmations"]) if aa["confirmations"] else None
    power["lower95_now"] = lower_bound(power["found_now"], power["trials"]) if power["trials"] else None
    widths.sort()
    interval = {
        "confirmations": len(widths),
        "with_a_moment_term": with_moments,
        "width_now_over_loads_alone": {
            "median": statistics.median(widths) if widths else None,
            "p90": widths[int(0.9 * len(widths))] if widths else None,
            "max": widths[-1] if widths else None,
        },
    }
    return {"aa": aa, "power": power, "interval": interval, "changed": changed}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    runs = [{**json.loads(path.read_text()), "path": str(path)} for path in args.files]
    result = {"sources": [str(p) for p in args.files], **reconfirm(runs)}
    text = json.dumps(result, indent=1)
    if args.out:
        args.out.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
