"""dryRun plans and stops; a deadline stops launching and decides from what was measured, saying
so; deleting a run stops its Jobs and leaves published engines in the catalog."""

from enginewright.api.names import LABEL_STAGE
from tests.cluster.harness import wait_for
from tests.conftest import get_json
from tests.operator.conftest import RUNS_BUCKET, apply, condition, jobs, manifest, run_status, wait_condition

KNOBS = [
    {"name": "graph_optimization_level", "values": ["basic", "extended", "all"]},
    {"name": "enable_mem_pattern", "values": ["0"]},
    {"name": "session.intra_op.allow_spinning", "values": ["0"]},
    {"name": "enable_cpu_mem_arena", "values": ["0"]},
]


def test_a_dry_run_lists_candidates_and_builds_nothing(cluster, operator, run_namespace):
    doc = manifest("dry", knobs=KNOBS)
    doc["spec"]["search"]["dryRun"] = True
    apply(cluster, run_namespace, doc)
    status = wait_condition(cluster, run_namespace, "dry", "Ready", 120)
    assert condition(status, "Ready")["reason"] == "DryRun"
    (target,) = status["targets"]
    assert target["candidates"][0] == "(default)" and len(target["candidates"]) == target["planned"] == 6
    plan = get_json(cluster, "configmap", "dry-plan-cpu", "-n", run_namespace)["data"]["routes.txt"]
    assert len(plan.splitlines()) == 6 and "-enable_cpu_mem_arena=0" in plan
    assert [j["metadata"]["labels"][LABEL_STAGE] for j in jobs(cluster, run_namespace)] == ["probe"]
    operator.assert_clean()


def test_a_deadline_cuts_the_run_and_the_status_says_so(cluster, operator, run_namespace):
    slow = {"warmupIterations": 2, "roundSeconds": 0.4, "minRounds": 5, "maxRounds": 5}
    doc = manifest("late", mode="full", knobs=KNOBS, timing=slow)
    doc["spec"]["search"].update(deadlineSeconds=60, maxRoutes=32, routesPerJob=32)
    apply(cluster, run_namespace, doc)
    status = wait_condition(cluster, run_namespace, "late", "Ready", 180)
    (target,) = status["targets"]
    assert target["planned"] == 24 and target["done"] < 24
    assert "deadline" in target["cutShort"] and "planned routes have no measurement" in target["cutShort"]
    assert target["engineUri"]  # decided from what was measured, and published
    assert all(j["status"].get("active", 0) == 0 for j in jobs(cluster, run_namespace))
    operator.assert_clean()


def test_deleting_a_run_stops_its_jobs_and_keeps_published_engines(cluster, operator, run_namespace, s3):
    apply(cluster, run_namespace, manifest("kept", knobs=[{"name": "enable_mem_pattern", "values": ["0"]}]))
    engine = wait_condition(cluster, run_namespace, "kept", "Ready", 300)["targets"][0]["engineUri"]
    slow = {"warmupIterations": 2, "roundSeconds": 0.5, "minRounds": 5, "maxRounds": 5}
    apply(cluster, run_namespace, manifest("busy", mode="full", knobs=KNOBS, timing=slow))
    wait_for(
        lambda: any(j["metadata"]["labels"][LABEL_STAGE] == "stage1" for j in jobs(cluster, run_namespace)),
        120,
        "a stage-1 Job",
        interval=0.5,
        detail=lambda: run_status(cluster, run_namespace, "busy"),
    )
    cluster.kubectl("delete", "trun", "busy", "kept", "-n", run_namespace, "--wait=true", "--timeout=60s")
    wait_for(
        lambda: not jobs(cluster, run_namespace),
        60,
        "the deleted runs' Jobs to go",
        interval=0.5,
        detail=lambda: [j["metadata"]["name"] for j in jobs(cluster, run_namespace)],
    )
    key = engine.removeprefix(f"s3://{RUNS_BUCKET}/")
    assert s3.stat_object(RUNS_BUCKET, key).size > 0
    assert s3.stat_object(RUNS_BUCKET, key.rsplit("/", 1)[0] + "/provenance.json").size > 0
    operator.assert_clean()
