"""bench/reapplied_run.py's pure parts: builds are counted from the batch lines the worker prints (the
default included where a batch built it, left out where it loaded the engine an earlier batch kept),
and the table shows every repetition's value."""

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))

import reapplied_run as rr  # noqa: E402  (bench/ is not a package)
from enginewright.worker.batch import KEPT_DEFAULT, Progress  # noqa: E402


def test_the_batch_line_the_worker_prints_is_the_one_counted():
    said: list[str] = []

    class Context:
        def say(self, message: str) -> None:
            said.append(message)

    # The worker's own line, so a change of its wording fails here rather than counting zero builds.
    progress = Progress(Context(), "stage1-1", 1)  # type: ignore[arg-type]
    progress.say("2 routes (default included), built 1 at a time, each timed against the default")
    progress = Progress(Context(), "stage2-1", 1)  # type: ignore[arg-type]
    progress.say(f"1 routes and {KEPT_DEFAULT}, built 1 at a time, each timed against the default")
    text = "\n".join(["[probe] 12 knobs", *said, "[stage1-1] all 2 routes already measured; nothing to do"])
    assert rr.builds_in_log(text) == {"stage1-1": 2, "stage2-1": 1}


def test_the_worker_still_says_how_many_routes_it_builds():
    source = (REPO / "operator/enginewright/worker/batch.py").read_text()
    assert 'f"{len(todo) + 1} routes (default included), {timed_against}"' in source
    assert 'f"{len(todo)} routes and {KEPT_DEFAULT}, {timed_against}"' in source


def test_the_table_lists_each_repetition_per_kind_of_run():
    def run(kind: str, builds: int, wall: float) -> dict:
        figures = {"builds": builds, "routes_measured": builds, "routes_reused": 0, "jobs": 3, "wall_s": wall}
        return {"kind": kind, **figures, "jobs_by_stage": {}, "status": {"winner": ""}}

    reps = [[run("first", 9, 60.0), run("reapplied", 1, 20.0), run("reuse-none", 9, 61.0)]] * 2
    summary = rr.summarize(reps)
    assert summary["reapplied"]["builds"] == {"values": [1, 1], "median": 1}
    text = rr.table(summary)
    assert "| engine builds (worker pod lines) | 9 / 9 | 1 / 1 | 9 / 9 |" in text
    assert "| wall time, apply to Ready (s) | 60 / 60 | 20 / 20 | 61 / 61 |" in text
