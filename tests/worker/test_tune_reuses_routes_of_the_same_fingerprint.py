"""`enginewright tune --cache DIR` run twice with the same inputs: the second run builds only the
default route (measured fresh on this run's hardware) and confirms the reused candidates against it;
every other route comes from the first run's entries, untouched. A weights-only model change (same
graph, other weights: another sha256) reuses nothing."""

import json
import shutil

import onnx
import pytest
from onnx import numpy_helper

from enginewright.api.cache import CacheEntry
from enginewright.api.routes import route_id
from tests.worker.conftest import run_tune

# --save-all-engines and a tiny noise margin: every route keeps its engine. Whether a route stays a
# candidate for the confirmation round depends on what its paired rounds measured on this host (on
# CI's an `enable_mem_pattern=0` wholly slower than the default was none, and no round ran), so the
# test that needs a confirmation gives one reused entry the numbers of a clear win (`claims_a_win`).
KNOBS = [
    "--search",
    "fast",
    "--knob",
    "enable_mem_pattern=0",
    "--knob",
    "graph_optimization_level=basic",
    "--save-all-engines",
    "--noise-margin",
    "0.001",
]
DEFAULT = route_id("")
CLAIMED = "-enable_mem_pattern=0"  # the reused route given the numbers of a clear win (`claims_a_win`)


def entries(cache):
    return {p.stem: p.read_text() for p in (cache / "runs/local/entries").glob("*.json")}


def run_id(out) -> str:
    return json.loads((out / "run.json").read_text())["run_id"]


@pytest.fixture(scope="module")
def first(example, tmp_path_factory):
    """The first run into a fresh cache: (its out dir, the cache as it left it)."""
    folder = tmp_path_factory.mktemp("first")
    out, cache = folder / "out", folder / "cache"
    result = run_tune(example, out, *KNOBS, "--cache", str(cache))
    assert result.returncode == 0, result.stderr
    assert "route 2/2" in result.stdout
    return out, cache


def claims_a_win(cache, route: str) -> None:
    """Rewrite the cached entry of `route` as an earlier run that paired it with its default and found it
    twice as fast, wholly (interval 0.45-0.55): a reused number that would win the sweep on its own."""
    path = cache / "runs/local/entries" / f"{route_id(route)}.json"
    entry = CacheEntry.from_json(path.read_text())
    assert entry.paired is not None and entry.timing is not None, "the first run paired every route"
    paired = entry.paired.model_copy(update={"ratio": 0.5, "low": 0.45, "high": 0.55})
    timing = entry.timing.model_copy(update={"median_ms": paired.default_ms * 0.5})
    path.write_text(entry.model_copy(update={"paired": paired, "timing": timing}).to_json())


def test_a_second_run_builds_only_the_default_and_confirms(example, first, tmp_path):
    out1, cache1 = first
    cache = tmp_path / "cache"
    shutil.copytree(cache1, cache)
    claims_a_win(cache, CLAIMED)
    before = entries(cache)
    assert len(before) == 3 and all(CacheEntry.from_json(t).fingerprint is not None for t in before.values())

    out = tmp_path / "out"
    result = run_tune(example, out, *KNOBS, "--cache", str(cache))
    assert result.returncode == 0, result.stderr
    assert "2 routes of earlier runs with this run's fingerprint" in result.stdout
    assert "1 routes (default included)" in result.stdout and "route 1/" not in result.stdout
    after = entries(cache)
    default = CacheEntry.from_json(after[DEFAULT])
    assert default.run == run_id(out) != run_id(out1)  # measured fresh by this run
    assert {k: v for k, v in after.items() if k != DEFAULT} == {k: v for k, v in before.items() if k != DEFAULT}

    summary = json.loads((out / "summary.json").read_text())
    assert set(summary["reused"]) == set(before) - {DEFAULT}
    assert all(f"run {run_id(out1)}: " in where for where in summary["reused"].values())
    assert summary["build_seconds"] == default.build_seconds  # only the default was built
    # The reused candidates were confirmed against this run's default: a reused number alone never wins.
    confirm = json.loads((out / "confirm.json").read_text())
    timed = {key.split("@")[0] for key in confirm["rounds"]}
    claimed = route_id(CLAIMED)
    assert DEFAULT in timed and claimed in timed and timed - {DEFAULT} <= set(summary["reused"])
    assert summary["confirmed"] and (summary["winner_id"] == DEFAULT or summary["winner_reused_from"])
    # Its claimed 2x is not what decides: the confirmation's own rounds on this host do.
    assert summary["winner_id"] != claimed or summary["speedup"] < 1.5
    report = (out / "report.md").read_text()
    assert "## Reused from earlier runs" in report and "(reused)" in report


def test_a_weights_only_change_reuses_nothing(example, first, tmp_path):
    _, cache1 = first
    cache = tmp_path / "cache"
    shutil.copytree(cache1, cache)
    data = tmp_path / "data"
    shutil.copytree(example, data)
    model = onnx.load(str(data / "mlp.onnx"))
    bias = next(t for t in model.graph.initializer if t.name == "fc3_b")
    values = numpy_helper.to_array(bias).copy()
    values[0] += 1e-6  # other weights, the same graph: outputs within the threshold of the references
    bias.CopyFrom(numpy_helper.from_array(values, "fc3_b"))
    onnx.save(model, str(data / "mlp.onnx"))

    out = tmp_path / "out"
    result = run_tune(data, out, *KNOBS, "--cache", str(cache))
    assert result.returncode == 0, result.stderr
    assert "earlier runs with this run's fingerprint" not in result.stdout and "route 2/2" in result.stdout
    summary = json.loads((out / "summary.json").read_text())
    assert summary["reused"] is None and summary["winner_reused_from"] is None
    after = {k: CacheEntry.from_json(v) for k, v in entries(cache).items()}
    assert {e.run for e in after.values()} == {run_id(out)}
    old_sha = CacheEntry.from_json(entries(cache1)[DEFAULT]).fingerprint.model_sha256
    assert all(e.fingerprint.model_sha256 != old_sha for e in after.values())


def test_reuse_none_measures_every_route_again(example, first, tmp_path):
    _, cache1 = first
    cache = tmp_path / "cache"
    shutil.copytree(cache1, cache)
    out = tmp_path / "out"
    result = run_tune(example, out, *KNOBS, "--cache", str(cache), "--reuse", "none")
    assert result.returncode == 0, result.stderr
    assert "route 2/2" in result.stdout and json.loads((out / "summary.json").read_text())["reused"] is None
    assert {CacheEntry.from_json(v).run for v in entries(cache).values()} == {run_id(out)}
