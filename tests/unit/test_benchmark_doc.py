"""The H200 benchmark page is generated from the raw results committed beside it, and the bench's
pure helpers (core shares, A/A verdicts) do what the page says they do."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))

import gpu_tuning  # noqa: E402  (bench/ is not a package)


def test_the_committed_benchmark_page_is_exactly_what_its_raw_results_render(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    shutil.copy(REPO / "docs/benchmarks.md", docs / "benchmarks.md")  # the notes block comes from here
    done = subprocess.run(
        [str(REPO / "bench/render_benchmarks_doc.sh"), str(docs)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHON": sys.executable},
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert (docs / "benchmarks.md").read_text() == (REPO / "docs/benchmarks.md").read_text()
    assert "mixed winner geomean 1.563x side by side" in done.stdout


def test_the_headline_false_winner_counts_follow_from_the_recorded_rounds():
    raw = REPO / "docs/benchmarks/raw"
    files = [raw / f"{w}.json" for w in ("resnet50", "encoder", "mlp", "convnet", "attention")]
    files += [raw / "resnet50-call1.json", raw / "resnet50-call3.json"]
    verdicts = [gpu_tuning.aa_verdicts(json.loads(f.read_text())["aa"]["rounds"], 5) for f in files]
    assert sum(v["trials"] for v in verdicts) == 56
    assert sum(v["rule_false_winners"] for v in verdicts) == 4
    assert sum(v["strict_false_winners"] for v in verdicts) == 36


def test_aa_verdicts_on_drift_shared_by_a_round_and_on_a_lasting_process_offset():
    drift = [1.0, 1.6, 1.0, 1.6, 1.0] * 2  # machine-wide regime changes, the same for every engine of a round
    shared = {"default": drift, "copy-a": drift, "copy-b": drift}
    v = gpu_tuning.aa_verdicts(shared, 5)
    assert v["trials"] == 2 and v["rule_false_winners"] == 0 and v["process_bias"] == {"copy-a": 1.0, "copy-b": 1.0}
    offset = {**shared, "copy-b": [t * 0.8 for t in drift]}  # one process 20% faster all along
    v = gpu_tuning.aa_verdicts(offset, 5)
    assert v["rule_false_winners"] == 2 and v["strict_false_winners"] == 2 and v["process_bias"]["copy-b"] == 0.8


def test_cores_are_split_into_contiguous_disjoint_shares():
    shares = gpu_tuning.split_cores(list(range(32)), 2)
    assert shares == [list(range(16)), list(range(16, 32))]
    assert [len(s) for s in gpu_tuning.split_cores(list(range(5)), 2)] == [3, 2]
    assert gpu_tuning.split_cores([7], 2) == [[7], [7]]  # never an empty share


def test_a_workload_whose_full_search_the_budget_cut_renders_with_mixed_alone(tmp_path):
    # On the H200 resnet50's mixed run took a whole call; full then failed for the budget and, before,
    # took the workload's result with it. Now the result keeps mixed's, with full as not run.
    result = json.loads((REPO / "docs/benchmarks/raw/mlp.json").read_text())
    result.update(
        full_not_run="the call's budget ran out before full search: ...",
        full_routes=[],
        efficiency=dict.fromkeys(result["efficiency"]),
    )
    result["modes"]["full"] = None
    path = tmp_path / "mlp.json"
    path.write_text(json.dumps(result))
    done = subprocess.run(
        [sys.executable, str(REPO / "bench/gpu_tuning.py"), "docs", str(path), "--docs", str(tmp_path / "docs")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    page = (tmp_path / "docs" / "benchmarks.md").read_text()
    row = next(line for line in page.splitlines() if line.startswith("| mlp | ") and "not run (budget)" in line)
    assert f"`{result['modes']['mixed']['winner']}`" in row
    assert any(line.startswith("| mlp | ") and "not run (budget) | — | — |" in line for line in page.splitlines())


def test_full_searchs_winner_is_its_sweeps_with_the_routes_mixed_measured_counted():
    # On the H100 (session 27) full search ran after mixed in one cache, with no confirmation round:
    # the product's decision left out cudagraphs, which mixed had measured (a reused number alone
    # never wins), and the bench named a route 5% slower side by side as full's winner.
    from tests.unit.test_planners import entry

    default = entry({}, 3.0, baseline=3.0)
    reused = entry({"triton.cudagraphs": "true"}, 1.59, baseline=3.06).model_copy(update={"reused_from": "run 862b"})
    fresh = entry({"freezing": "true", "triton.cudagraphs": "true"}, 1.68, baseline=3.22)
    assert gpu_tuning.sweep_winner([default, reused, fresh], default.route_id) == reused.route_id
    assert (
        gpu_tuning.sweep_winner([default, entry({"freezing": "true"}, 2.95, baseline=3.0)], default.route_id)
        == default.route_id
    )


def test_the_done_line_says_when_side_by_side_did_not_run():
    mixed = {"winner": "-triton.cudagraphs=true", "speedup_side_by_side": None}
    result = {"workload": "resnet50", "wall_s": 399.9, "default_ms": 2.2269, "modes": {"mixed": mixed}}
    assert gpu_tuning.done_line(result).endswith("mixed -triton.cudagraphs=true not measured side by side")
    mixed["speedup_side_by_side"] = 2.262
    assert gpu_tuning.done_line(result).endswith("mixed -triton.cudagraphs=true x2.262 side by side")
