"""What the reconciler asks Jobs for (pure, `controller.jobs`): batches without a Job, only as many as
fit beside the sweep Jobs still running (the probe's Job never counts), each request naming its
routes and the step's default route; and what the target then says runs (`controller.status`)."""

from enginewright.api.models import TargetStatus, TuningRunSpec
from enginewright.api.routes import Route
from enginewright.controller.jobs import batches_to_start, confirm_request, probe_request, sweep_request
from enginewright.controller.status import confirming, sweeping
from enginewright.search.flow import RunBatches, RunConfirmation
from enginewright.search.planners import Batch
from enginewright.store.layout import RunKeys
from tests.unit.entries import measured

DEFAULT = Route.of({})
STEP = RunBatches(
    stage="stage1",
    batches=tuple(
        Batch(f"stage1-b{i:03d}", "stage1", (DEFAULT, Route.of({"intra_op_num_threads": str(i + 1)}))) for i in range(4)
    ),
    default=DEFAULT,
    planned=5,
)
RUNNING = {"status": {}}
ENDED = {"status": {"conditions": [{"type": "Complete", "status": "True"}]}}


def test_only_as_many_batches_start_as_fit_beside_the_running_ones():
    jobs = {"probe": RUNNING, "stage1-b000": RUNNING}  # a probe still listed as active does not count
    start, active = batches_to_start(STEP, jobs, parallelism=2)
    assert [b.name for b in start] == ["stage1-b001"] and active == 2


def test_ended_jobs_free_their_place_and_are_not_started_again():
    jobs = {"stage1-b000": ENDED, "stage1-b001": ENDED}
    start, active = batches_to_start(STEP, jobs, parallelism=8)
    assert [b.name for b in start] == ["stage1-b002", "stage1-b003"] and active == 2


def test_more_running_than_allowed_starts_nothing():
    jobs = {f"stage1-b00{i}": RUNNING for i in range(2)}
    assert batches_to_start(STEP, jobs, parallelism=1) == ([], 2)


def test_requests_name_the_batch_its_routes_and_the_default():
    spec = TuningRunSpec.model_validate(
        {
            "model": {"uri": "s3://models/model.onnx"},
            "compiler": {"name": "onnxruntime"},
            "accuracy": {"disabled": True, "reason": "test"},
            "targets": [{"gpuType": "cpu"}],
        }
    )
    target, keys = spec.targets[0], RunKeys("runs/ns/r-uid/cpu")
    probe = probe_request(spec, target, keys, "runs")
    assert (probe.mode, probe.batch, probe.prefix, probe.routes) == ("probe", "probe", keys.prefix, [])
    sweep = sweep_request(spec, target, keys, "runs", STEP.batches[1], STEP, 123.0)
    assert (sweep.mode, sweep.stage, sweep.batch) == ("sweep", "stage1", "stage1-b001")
    assert sweep.routes == ["", "-intra_op_num_threads=2"] and sweep.default_route == "" and sweep.deadline == 123.0
    default, candidate = entry({}), entry({"intra_op_num_threads": "2"})
    step = RunConfirmation(name="confirm-1a2b", candidates=(candidate,), default=default, rounds=3, planned=5)
    confirm = confirm_request(spec, target, keys, "runs", step, None)
    assert (confirm.mode, confirm.stage, confirm.batch) == ("confirm", "confirm", "confirm-1a2b")
    assert confirm.routes == [candidate.route] and confirm.default_route == "" and confirm.deadline is None


def entry(knobs):
    return measured(knobs)


def test_the_target_says_what_runs():
    status = TargetStatus(gpu_type="cpu", stage="probing")
    sweeping_now = sweeping(status, STEP, 3)
    assert (sweeping_now.stage, sweeping_now.active_jobs, sweeping_now.message) == ("stage1", 3, STEP.note)
    step = RunConfirmation(
        name="c", candidates=(entry({"x": "1"}), entry({"x": "2"})), default=entry({}), rounds=4, planned=5
    )
    now = confirming(status, step)
    assert (now.stage, now.active_jobs) == ("confirming", 1)
    assert now.message == "confirming 2 candidate(s) against the default over at most 4 interleaved rounds"
