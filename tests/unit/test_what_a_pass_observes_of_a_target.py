"""What a pass hands the flow of one target (pure parts of `controller.observe`): the entries and
confirmation rounds it read, the batches whose Job ended (never the probe's), whether the run is out
of time; and what observing records in the target's status."""

from enginewright.api.contracts import KnobInfo, ProbeResult
from enginewright.api.models import TargetStatus
from enginewright.controller.observe import REFUSED_SHOWN, TargetObservation, given_up, previous_target
from enginewright.controller.reuse import Reused
from enginewright.controller.seed import Seeded
from enginewright.store.layout import RunKeys
from tests.unit.entries import measured

RUNNING = {"status": {}}
SUCCEEDED = {"status": {"conditions": [{"type": "Complete", "status": "True"}]}}
FAILED = {"status": {"conditions": [{"type": "Failed", "status": "True"}]}}


def entry(knobs):
    return measured(knobs)


def test_batches_whose_job_ended_are_given_up_but_not_the_probe_or_running_ones():
    jobs = {"probe": FAILED, "stage1-b000": SUCCEEDED, "stage1-b001": FAILED, "stage1-b002": RUNNING}
    assert given_up(jobs) == frozenset({"stage1-b000", "stage1-b001"})


def test_the_flow_is_told_the_knobs_entries_rounds_given_up_and_time():
    default = entry({})
    seen = TargetObservation(
        keys=RunKeys("runs/ns/r-uid/cpu"),
        jobs={"stage1-b000": SUCCEEDED, "confirm-1": RUNNING},
        deadline=100.0,
        out_of_time=True,
        probe=None,
        entries={default.route_id: default},
        confirmations={"confirm-0": {"a": [1.0]}},
    )
    probe = ProbeResult(ok=True, knobs=[KnobInfo(name="intra_op_num_threads", values=["1", "2"], default="0")])
    observed = seen.observed(probe)
    assert [k.name for k in observed.knobs] == ["intra_op_num_threads"]
    assert observed.entries == {default.route_id: default} and observed.confirmations == {"confirm-0": {"a": [1.0]}}
    assert observed.given_up == frozenset({"stage1-b000"}) and observed.out_of_time is True


def test_observing_records_shards_refused_entries_and_what_was_reused_or_seeded():
    seen = TargetObservation(
        keys=RunKeys("runs/ns/r-uid/cpu"),
        jobs={},
        deadline=None,
        out_of_time=False,
        probe=None,
        shards=["r-cache-cpu-0", "r-cache-cpu-1"],
        refused=[f"bad-{i}.json" for i in range(REFUSED_SHOWN + 5)],
        reused=Reused(routes={"a": "x", "b": "y"}, runs=["earlier-12345678"]),
        seeded=Seeded(source="s3://seeds/cache", routes={"c": "z"}),
    )
    status = seen.recorded(TargetStatus(gpu_type="cpu", stage="stage1", cache_config_maps=["old"]))
    assert status.cache_config_maps == ["r-cache-cpu-0", "r-cache-cpu-1"]
    assert status.refused == [f"bad-{i}.json" for i in range(REFUSED_SHOWN)]
    assert (status.reused, status.reused_from, status.seeded) == (2, ["earlier-12345678"], 1)
    assert status.seed == seen.seeded.note
    bare = TargetObservation(RunKeys("p"), {}, None, False, None).recorded(TargetStatus(gpu_type="cpu", stage="stage1"))
    assert (bare.reused, bare.seeded, bare.seed) == (0, 0, None)


def test_the_previous_pass_status_of_the_target_is_found_by_gpu_type():
    previous = {"targets": [{"gpuType": "a", "stage": "stage1"}, {"gpuType": "b", "stage": "done"}]}
    assert previous_target(previous, "b").stage == "done"
    assert previous_target(previous, "c") is None and previous_target({}, "a") is None
