"""A dry run's plan (pure, `controller.dry_run`): one line per route, by the Job that would build it,
in the run's `<run>-plan-<gpu-type>` ConfigMap, and the target done saying how many routes and Jobs."""

from enginewright.api.models import TargetStatus
from enginewright.api.names import LABEL_COMPONENT
from enginewright.api.routes import Route
from enginewright.controller.children import RunRef
from enginewright.controller.dry_run import SHOWN, plan_config_map, plan_lines, planned
from enginewright.search.flow import RunBatches
from enginewright.search.planners import Batch

RUN = RunRef("dry", "team-a", "uid-1")


def step(batches: int, per_batch: int) -> RunBatches:
    routes = [Route.of({})] + [Route.of({"intra_op_num_threads": str(n)}) for n in range(1, batches * per_batch)]
    return RunBatches(
        stage="stage1",
        batches=tuple(
            Batch(f"stage1-b{i:03d}", "stage1", tuple(routes[i * per_batch : (i + 1) * per_batch]))
            for i in range(batches)
        ),
        default=routes[0],
        planned=len(routes),
    )


def test_each_line_names_the_batch_the_route_id_and_the_route():
    lines = plan_lines(step(2, 2))
    assert lines == [
        f"stage1-b000 {Route.of({}).id} (default)",
        f"stage1-b000 {Route.of({'intra_op_num_threads': '1'}).id} -intra_op_num_threads=1",
        f"stage1-b001 {Route.of({'intra_op_num_threads': '2'}).id} -intra_op_num_threads=2",
        f"stage1-b001 {Route.of({'intra_op_num_threads': '3'}).id} -intra_op_num_threads=3",
    ]


def test_the_plan_config_map_is_the_runs_and_holds_every_line():
    plan = plan_config_map(RUN, "NVIDIA-H200", step(2, 2))
    meta = plan["metadata"]
    assert (meta["name"], meta["namespace"]) == ("dry-plan-nvidia-h200", "team-a")
    assert meta["ownerReferences"][0]["uid"] == "uid-1" and meta["labels"][LABEL_COMPONENT] == "plan"
    assert plan["data"]["routes.txt"] == "\n".join(plan_lines(step(2, 2))) + "\n"


def test_the_target_is_done_listing_the_first_candidates_and_counting_all():
    big = step(10, 10)
    status = planned(TargetStatus(gpu_type="cpu", stage="stage1"), big, "dry-plan-cpu")
    assert status.stage == "done" and status.planned == 100
    assert status.candidates[0] == "(default)" and len(status.candidates) == SHOWN
    assert status.message == "dry run: 100 routes in 10 Job(s) would be built (ConfigMap dry-plan-cpu)"
