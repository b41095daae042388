"""Issue 19: the winner rule of today's code applied again to confirmation rounds measured on the H200
and committed (bench/aa_loads.py's aa_loads.json: every trial keeps its confirmation's per-load,
per-round times), beside what the rule of the day decided, trial by trial. For a change of the rule
(here: the rounds counted as moments, `measure.paired.moment_variance`) without spending GPU time
on the A/A and power goals again: the times are the same, only the decision is redone.

    python bench/reconfirm.py --out OUT.json AA_LOADS.json [AA_LOADS.json ...]
    python bench/reconfirm.py --grid --out GRID.json AA_LOADS.json [AA_LOADS.json ...]

Counts, over every file given: A/A trials and false winners (a trial is a false winner when stage 1
made it a candidate, as recorded, and the confirmation names it); power trials whose injected
slowdown was verified and how many were found; and the confirmations that the two rules decide
differently; and how much wider each confirmation's interval is now than across loads alone (its
log width now over then). Stage 1 is not redone (its rounds are not kept): a wider stage-1 interval only makes
more trials candidates (a lower bound further below the line), so for A/A this also gives the
share of all confirmations run, candidate or not, that name a winner under today's rule: fresh
loads, independent of stage 1, so it bounds the false-winner rate whatever stage 1 flags.

`--grid`: what a cheaper confirmation would have decided on the same trials (issue 19, ask 7: the
confirmation is a fixed cost to scale). Every confirmation cut to its first L loads of each engine
and its first R rounds, with and without the early stop the worker makes (`search.winner.settled`,
checked after each round as the worker does), decided by today's rule: A/A confirmations naming a
winner and false winners, verified power trials found, and the load-rounds a confirmation timed on
average (each engine's loads x rounds: what the rounds cost; the loads' own cost is L). A subset of
what was measured is what a smaller protocol would have measured but for the round's length and
the loads' order within it (fewer loads make shorter rounds): a replay, not a new measurement.
Beside it, `stage1_early`: whether stage 1 could stop a route placed wholly above the line from round
3 instead of `minRounds` (replayed on 2-load cuts of the same rounds; not adopted).
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

from enginewright.measure.paired import by_engine, compare, load_key  # noqa: E402
from enginewright.search.winner import confirm, settled  # noqa: E402
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


def cut(rounds: dict[str, list[float]], loads: int, count: int) -> dict[str, list[float]]:
    """The first `loads` loads of each engine and their first `count` rounds."""
    return {
        load_key(engine, i): list(values[i][:count])
        for engine, values in by_engine(rounds).items()
        for i in range(min(loads, len(values)))
    }


def replayed(rounds: dict[str, list[float]], loads: int, count: int, margin: float, stop: bool) -> tuple[bool, int]:
    """Whether a confirmation of `loads` loads and at most `count` rounds names the route, and the
    rounds it timed (fewer with `stop` once `settled`, checked after each round as the worker does)."""
    timed = count
    if stop:
        timed = next((n for n in range(1, count) if settled(cut(rounds, loads, n), "d", margin)), count)
    return not confirm(cut(rounds, loads, timed), "d", margin).default_won, timed


def grid(runs: list[dict], loads=(5, 4, 3, 2), counts=(5, 4, 3)) -> list[dict]:
    """Every (loads, rounds, early stop or not) a confirmation could have had, replayed on the trials
    whose confirmation rounds were kept: counts as `reconfirm`'s, and the load-rounds timed."""
    stopped = [run.get("path", "?") for run in runs if run.get("confirm_stop")]
    if stopped:  # their confirmations hold only the rounds timed until settled: a biased subset to cut
        raise SystemExit(f"--grid replays confirmations of every round; these stopped early: {stopped}")
    rows = []
    for load_count in loads:
        for count in counts:
            every_round: list[bool] = []  # each confirmation's decision without the stop, in order
            for stop in (False, True):
                aa = {"confirmations": 0, "named": 0, "false_winners": 0}
                power = {"trials": 0, "found": 0}
                timed, stopped_early, confirmations, changed = 0, 0, 0, 0
                for run in runs:
                    for trial in run["trials"]:
                        rounds = trial.get("rounds")
                        if not rounds or len(by_engine(rounds)["d"]) < load_count:
                            continue
                        if len(next(iter(rounds.values()))) < count:
                            continue
                        named, used = replayed(rounds, load_count, count, run["margin"], stop)
                        if stop:
                            changed += named != every_round[confirmations]
                        else:
                            every_round.append(named)
                        confirmations += 1
                        timed += load_count * used
                        stopped_early += used < count
                        if trial["kind"] == "aa":
                            aa["confirmations"] += 1
                            aa["named"] += named
                            aa["false_winners"] += bool(trial["candidate"] and named)
                        elif trial["verified"]:
                            power["trials"] += 1
                            power["found"] += bool(trial["candidate"] and named)
                aa["upper95"] = upper_bound(aa["named"], aa["confirmations"]) if aa["confirmations"] else None
                power["lower95"] = lower_bound(power["found"], power["trials"]) if power["trials"] else None
                rows.append(
                    {
                        "loads": load_count,
                        "rounds": count,
                        "early_stop": stop,
                        "confirmations": confirmations,
                        "stopped_early": stopped_early,
                        "decisions_changed_by_the_stop": changed if stop else None,
                        "load_rounds_per_confirmation": timed / confirmations if confirmations else None,
                        "aa": aa,
                        "power": power,
                    }
                )
    return rows


def stage1_early(runs: list[dict], first: int = 3, min_rounds: int = 5, precision: float = 0.01) -> dict:
    """Stage 1's rule with a route placed wholly above the margin line allowed to stop from round
    `first` instead of `min_rounds` (a stop the worker does not make: replayed to see whether it
    should), on 2-load comparisons cut from the committed confirmations (loads 1-2 and 3-4 of each
    engine: two a trial, as stage 1 times 2 loads of each) and their first `min_rounds` rounds.
    Counts the comparisons stopped early and the rounds that saves, and the verified power
    comparisons the early stop left no candidate where `min_rounds` rounds made one."""
    counts = {
        "aa": {"comparisons": 0, "stopped_early": 0, "rounds_saved": 0, "rounds": 0},
        "power": {"comparisons": 0, "stopped_early": 0, "candidates_lost": 0},
    }
    for run in runs:
        line = 1.0 - run["margin"]
        for trial in run["trials"]:
            rounds = trial.get("rounds")
            if not rounds or (trial["kind"] == "power" and not trial["verified"]):
                continue
            engines = by_engine(rounds)
            for pair in ((0, 1), (2, 3)):
                if len(engines["d"]) <= pair[1] or len(rounds["d"]) < min_rounds:
                    continue
                route = [engines["r"][i][:min_rounds] for i in pair]
                default = [engines["d"][i][:min_rounds] for i in pair]
                stop = next(
                    (
                        n
                        for n in range(first, min_rounds)
                        if compare([v[:n] for v in route], [v[:n] for v in default]).low > line
                    ),
                    None,
                )
                full = compare(route, default)
                kind = counts[trial["kind"]]
                kind["comparisons"] += 1
                kind["stopped_early"] += stop is not None
                if trial["kind"] == "aa":
                    kind["rounds"] += min_rounds
                    kind["rounds_saved"] += min_rounds - stop if stop else 0
                elif stop is not None and full.low < line:
                    kind["candidates_lost"] += 1
    return {"first": first, "min_rounds": min_rounds, **counts}


def grid_table(rows: list[dict]) -> str:
    """The grid as a markdown table, the load-rounds relative to the first row's."""
    base = rows[0]["load_rounds_per_confirmation"]
    lines = [
        "| loads | rounds | early stop | load-rounds / confirmation (vs first row) | stopped early | "
        "decisions the stop changed | A/A confirmations naming a winner (upper 95%) | false winners | "
        "power: found / verified (lower 95%) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        aa, power = r["aa"], r["power"]
        lines.append(
            f"| {r['loads']} | {r['rounds']} | {'yes' if r['early_stop'] else 'no'} | "
            f"{r['load_rounds_per_confirmation']:.1f} ({r['load_rounds_per_confirmation'] / base:.2f}) | "
            f"{r['stopped_early']} of {r['confirmations']} | "
            f"{'—' if r['decisions_changed_by_the_stop'] is None else r['decisions_changed_by_the_stop']} | "
            f"{aa['named']} of {aa['confirmations']} "
            f"({aa['upper95']:.1%}) | {aa['false_winners']} | {power['found']} / {power['trials']} "
            f"({power['lower95']:.1%}) |"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--out", type=Path)
    parser.add_argument(
        "--grid", action="store_true", help="replay cheaper confirmations (loads x rounds x early stop)"
    )
    args = parser.parse_args()
    runs = [{**json.loads(path.read_text()), "path": str(path)} for path in args.files]
    if args.grid:
        rows = grid(runs)
        print(grid_table(rows))
        early = stage1_early(runs)
        print(json.dumps({"stage1_early_stop": early}))
        result = {"sources": [str(p) for p in args.files], "grid": rows, "stage1_early_stop": early}
    else:
        result = {"sources": [str(p) for p in args.files], **reconfirm(runs)}
    text = json.dumps(result, indent=1)
    if args.out:
        args.out.write_text(text)
    if not args.grid:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
