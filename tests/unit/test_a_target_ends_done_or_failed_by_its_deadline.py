"""How a target ends (pure, `controller.status`): the run's deadline from its creation, a done target
and a failed one keep no Job running, and a failed one keeps its reason."""

from enginewright.api.models import TargetStatus, TuningRunSpec
from enginewright.controller.status import run_deadline, target_done, target_failed


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
