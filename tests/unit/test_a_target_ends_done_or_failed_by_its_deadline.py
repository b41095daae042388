"""How a target ends (pure, `controller.status`): the run's deadline from its creation, a done target
and a failed one keep no Job running, a failed one keeps its reason, and a decided one says its
winner and where it was published (or that publishing is off)."""

from enginewright.api.models import TargetStatus, TuningRunSpec
from enginewright.controller.status import published, run_deadline, target_done, target_failed, unpublished
from enginewright.measure.paired import load_key
from enginewright.search.flow import Decided
from enginewright.search.winner import confirm
from tests.unit.entries import measured


def spec(**search) -> TuningRunSpec:
    return TuningRunSpec.model_validate(
        {
            "model": {"uri": "s3://models/m.onnx"},
            "compiler": {"name": "onnxruntime"},
            "accuracy": {"disabled": True, "reason": "test"},
            "search": search,
            "targets": [{"gpuType": "cpu", "gpusPerJob": 0}],
        }
    )


def test_the_deadline_counts_from_the_runs_creation_and_is_none_without_one():
    meta = {"creationTimestamp": "2026-01-01T00:00:00Z"}
    assert run_deadline(spec(deadlineSeconds=600), meta) == 1767225600 + 600
    assert run_deadline(spec(), meta) is None


def test_a_finished_target_runs_no_job_and_a_failed_one_keeps_its_reason():
    running = TargetStatus(gpu_type="cpu", stage="stage1", active_jobs=3)
    done = target_done(running, "winner x=1")
    assert (done.stage, done.message, done.active_jobs) == ("done", "winner x=1", 0)
    failed = target_failed(running, "ProbeFailed", "the probe Job ended")
    assert (failed.stage, failed.reason, failed.active_jobs) == ("failed", "ProbeFailed", 0)
    assert failed.message == "ProbeFailed: the probe Job ended"
    assert running.stage == "stage1" and running.active_jobs == 3  # the input is not changed


def entry(knobs, median):
    return measured(knobs, median, baseline_ms=120.0, engine_sha256="ab" * 32)


def decided(winner_ms: float) -> Decided:
    default, winner = entry({}, 120.0), entry({"intra_op_num_threads": "2"}, winner_ms)
    rounds = {}
    for i in range(5):
        rounds[load_key(default.route_id, i)] = [120.0 * (1 + 0.004 * i) * (1 + 0.01 * r) for r in range(5)]
        rounds[load_key(winner.route_id, i)] = [winner_ms * (1 - 0.004 * i) * (1 + 0.01 * r) for r in range(5)]
    return Decided(confirm(rounds, default.route_id, spec().search.noise_margin), default, (default, winner), planned=2)


def test_a_decided_target_says_its_winner_and_where_it_was_published():
    step = decided(90.0)
    assert not step.decision.default_won
    done = published(TargetStatus(gpu_type="cpu", stage="confirming", active_jobs=1), step, "s3://catalog/e.onnx")
    assert (done.stage, done.active_jobs, done.engine_uri, done.engine_sha256) == (
        "done",
        0,
        "s3://catalog/e.onnx",
        "ab" * 32,
    )
    assert done.message == f"winner {step.winner.route}: {step.headline_text()}; published s3://catalog/e.onnx"
    off = unpublished(TargetStatus(gpu_type="cpu", stage="confirming"), step)
    assert off.stage == "done" and off.engine_uri is None
    assert off.message == f"winner {step.winner.route}; {step.decision.reason} (publishing disabled)"


def test_a_target_that_kept_the_default_says_why():
    step = decided(119.9)
    assert step.decision.default_won
    done = published(TargetStatus(gpu_type="cpu", stage="confirming"), step, "s3://catalog/e.onnx")
    assert done.message == f"kept the default route ({step.decision.reason}); published s3://catalog/e.onnx"
