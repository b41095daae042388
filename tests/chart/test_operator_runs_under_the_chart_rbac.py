"""The chart's RBAC is sufficient and no wider than needed, proven on the real API server: the
operator runs as a host process authenticated as the chart's ServiceAccount (a TokenRequest token),
with the chart's Role/ClusterRoles, and takes a TuningRun to Ready; without one of its rules a
documented step fails (and resumes when the rule is back); and the ServiceAccount can neither read
Secrets outside the namespace it watches (nor other Secrets inside it) nor create Pods."""

from __future__ import annotations

import json
import re
import sys
import uuid
from pathlib import Path

import pytest

from tests.chart.chart import by_kind, render, service_account_kubeconfig
from tests.cluster.harness import S3_ACCESS_KEY, S3_SECRET_KEY, wait_for
from tests.cluster.operator_process import start_operator
from tests.operator.conftest import MODELS_BUCKET, RUNS_BUCKET, apply, jobs, manifest, wait_condition

RELEASE = "ew"
SERVICE_ACCOUNT = "ew-enginewright"


@pytest.fixture(scope="module")
def example(s3, tmp_path_factory):
    sys.path.insert(0, str(Path("examples").resolve()))
    from make_example import write_example

    folder = tmp_path_factory.mktemp("example")
    write_example(folder)
    for bucket in (MODELS_BUCKET, RUNS_BUCKET):
        if not s3.bucket_exists(bucket):
            s3.make_bucket(bucket)
    for name in ("mlp.onnx", "inputs-0.npz", "inputs-1.npz", "references-0.npz", "references-1.npz"):
        s3.fput_object(MODELS_BUCKET, f"example/{name}", str(folder / name))
    return folder


@pytest.fixture(scope="module")
def installed(cluster, crd_installed):
    """The chart's ServiceAccount and RBAC in a release namespace, watching one run namespace (the
    Deployment is left out: the operator runs as a host process under that identity)."""
    suffix = uuid.uuid4().hex[:6]
    release_ns, run_ns, other_ns = f"ew-{suffix}", f"runs-{suffix}", f"other-{suffix}"
    for ns in (release_ns, run_ns, other_ns):
        cluster.kubectl("create", "namespace", ns)
    for ns in (run_ns, other_ns):
        cluster.kubectl(
            "create",
            "secret",
            "generic",
            "enginewright-store",
            "-n",
            ns,
            f"--from-literal=AWS_ACCESS_KEY_ID={S3_ACCESS_KEY}",
            f"--from-literal=AWS_SECRET_ACCESS_KEY={S3_SECRET_KEY}",
        )
        cluster.kubectl("create", "secret", "generic", "unrelated", "-n", ns, "--from-literal=password=hunter2")
    objects = [
        o
        for o in render(cluster, RELEASE, release_ns, {"store.endpoint": "127.0.0.1:9000", "watchNamespaces": [run_ns]})
        if o["kind"] in ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")
    ]
    cluster.kubectl("apply", "-f", "-", input="\n---\n".join(json.dumps(o) for o in objects))
    yield {"release": release_ns, "run": run_ns, "other": other_ns, "objects": objects}
    cluster.kubectl("delete", "-f", "-", "--ignore-not-found", input="\n---\n".join(json.dumps(o) for o in objects))
    for ns in (release_ns, run_ns, other_ns):
        cluster.kubectl("delete", "namespace", ns, "--wait=false")


def can_i(cluster, installed, verb: str, resource: str, namespace: str, subresource: str | None = None) -> bool:
    """The API server's own answer (SubjectAccessReview through impersonation). A subresource goes in
    `subresource`: `resource/x` names an object x of the resource, not its subresource x."""
    result = cluster.kubectl(
        "auth",
        "can-i",
        verb,
        resource,
        "-n",
        namespace,
        f"--as=system:serviceaccount:{installed['release']}:{SERVICE_ACCOUNT}",
        *([f"--subresource={subresource}"] if subresource else []),
        check=False,
    )
    return result.stdout.strip() == "yes"


def test_the_service_account_gets_only_what_it_needs(cluster, installed):
    run, other = installed["run"], installed["other"]
    assert can_i(cluster, installed, "get", "secrets/enginewright-store", run)
    assert not can_i(cluster, installed, "get", "secrets/unrelated", run)  # one Secret name only
    assert not can_i(cluster, installed, "list", "secrets", run)
    assert not can_i(cluster, installed, "get", "secrets/enginewright-store", other)  # not watched
    assert not can_i(cluster, installed, "get", "secrets/enginewright-store", installed["release"])
    for namespace in (run, other):
        assert not can_i(cluster, installed, "create", "pods", namespace)  # only Jobs, never Pods
    assert can_i(cluster, installed, "create", "jobs.batch", run)
    assert not can_i(cluster, installed, "create", "jobs.batch", other)
    assert not can_i(cluster, installed, "patch", "tuningruns.tuning.enginewright.io", other)
    assert not can_i(cluster, installed, "delete", "configmaps", run)
    assert can_i(cluster, installed, "list", "pods", run)  # reads the scheduler's verdict on its pods
    assert can_i(cluster, installed, "get", "nodes", "default")  # the measuring node's labels
    assert can_i(cluster, installed, "list", "nodes", "default")  # a policy's check reads its GPU type's drivers
    assert not can_i(cluster, installed, "watch", "nodes", "default")  # a timer checks: no watch of every node
    assert not can_i(cluster, installed, "patch", "nodes", "default")
    for verb in ("create", "get"):  # a policy's runs, in the watched namespace only
        assert can_i(cluster, installed, verb, "tuningruns.tuning.enginewright.io", run)
        assert not can_i(cluster, installed, verb, "tuningruns.tuning.enginewright.io", other)
    assert can_i(cluster, installed, "patch", "tuningpolicies.tuning.enginewright.io", run, "status")
    assert not can_i(cluster, installed, "update", "tuningpolicies.tuning.enginewright.io", run, "status")
    assert not can_i(cluster, installed, "update", "tuningpolicies.tuning.enginewright.io", run)
    assert not can_i(cluster, installed, "list", "tuningpolicies.tuning.enginewright.io", other)
    for owner in ("tuningruns", "tuningpolicies"):  # blockOwnerDeletion on the children it creates
        assert can_i(cluster, installed, "update", f"{owner}.tuning.enginewright.io", run, "finalizers")
        assert not can_i(cluster, installed, "update", f"{owner}.tuning.enginewright.io", other, "finalizers")
    assert not can_i(cluster, installed, "update", "tuningruns.tuning.enginewright.io", run)  # nor the run itself


def test_namespace_users_bound_to_edit_or_view_get_tuningruns(cluster, installed):
    """The chart's ClusterRoles aggregate into edit/view: a RoleBinding to `edit` lets a user create
    runs in that namespace, one to `view` only read them (the API server's aggregation, then can-i)."""
    run = installed["run"]
    for user, role in (("alice", "edit"), ("bob", "view")):
        cluster.kubectl("create", "rolebinding", f"{user}-{role}", f"--clusterrole={role}", f"--user={user}", "-n", run)

    def can(user: str, verb: str) -> bool:
        done = cluster.kubectl(
            "auth", "can-i", verb, "tuningruns.tuning.enginewright.io", "-n", run, f"--as={user}", check=False
        )
        return done.stdout.strip() == "yes"

    wait_for(lambda: can("alice", "create") and can("bob", "list"), 30, "the aggregated roles", 0.5)
    assert can("alice", "delete") and not can("bob", "create") and not can("bob", "delete")
    assert can("alice", "list")
    for verb, alice, bob in (("create", True, False), ("list", True, True)):  # policies the same way
        for user, allowed in (("alice", alice), ("bob", bob)):
            done = cluster.kubectl(
                "auth", "can-i", verb, "tuningpolicies.tuning.enginewright.io", "-n", run, f"--as={user}", check=False
            )
            assert (done.stdout.strip() == "yes") is allowed, (user, verb, done.stdout)
    other = cluster.kubectl(
        "auth",
        "can-i",
        "create",
        "tuningruns.tuning.enginewright.io",
        "-n",
        installed["other"],
        "--as=alice",
        check=False,
    )
    assert other.stdout.strip() == "no"  # a RoleBinding is one namespace


def operator_as_service_account(cluster, installed, tmp_path: Path, **extra_env: str):
    kubeconfig = service_account_kubeconfig(cluster, installed["release"], SERVICE_ACCOUNT, tmp_path / "sa.kubeconfig")
    return start_operator(
        cluster,
        tmp_path / "operator.log",
        RUNS_BUCKET,
        KUBECONFIG=str(kubeconfig),
        ENGINEWRIGHT_NAMESPACES=installed["run"],
        **extra_env,
    )


def forbidden_lines(text: str) -> list[str]:
    """Log lines that report a refusal: 'forbidden', or an HTTP 403 (not the 403 milliseconds of a
    log line's own timestamp, `00:49:35,403`, which once failed this test)."""
    return [
        line for line in text.splitlines() if "forbidden" in line.lower() or re.search(r"(?<![\d,.:])403(?!\d)", line)
    ]


def test_a_run_reaches_ready_under_the_chart_service_account(cluster, installed, example, s3, tmp_path):
    operator = operator_as_service_account(cluster, installed, tmp_path)
    try:
        run = installed["run"]
        apply(cluster, run, manifest("mlp-as-sa", knobs=[{"name": "graph_optimization_level", "values": ["all"]}]))
        status = wait_condition(cluster, run, "mlp-as-sa", "Ready", 300)
        assert status["phase"] == "Succeeded"
        (target,) = status["targets"]
        key = target["engineUri"].removeprefix(f"s3://{RUNS_BUCKET}/")
        assert s3.stat_object(RUNS_BUCKET, key).size > 0  # published by the operator under this identity
        events = json.loads(cluster.kubectl("get", "events", "-n", run, "-o", "json").stdout)["items"]
        assert any(e["reason"] == "Published" for e in events)  # events: create was enough
    finally:
        operator.stop()
    log = operator.log_text()
    assert not forbidden_lines(log), "\n".join(forbidden_lines(log))
    assert "Traceback" not in log, log[-4000:]


def test_without_the_jobs_create_rule_no_job_starts_and_the_run_resumes_when_it_is_back(
    cluster, installed, example, tmp_path
):
    """README/chart: `create` on jobs is for the probe, batch and confirmation Jobs."""
    run = installed["run"]
    (role,) = [o for o in by_kind(installed["objects"], "Role") if o["metadata"]["namespace"] == run]
    crippled = json.loads(json.dumps(role))
    jobs_rule = next(r for r in crippled["rules"] if r["resources"] == ["jobs"])
    jobs_rule["verbs"].remove("create")
    cluster.kubectl("apply", "-f", "-", input=json.dumps(crippled))
    operator = operator_as_service_account(cluster, installed, tmp_path)
    try:
        apply(cluster, run, manifest("mlp-no-jobs"))
        wait_for(
            lambda: any("jobs" in line and "create" in line for line in forbidden_lines(operator.log_text())),
            120,
            "the operator's log to show that creating the probe Job was forbidden",
            0.5,
        )
        assert not [j for j in jobs(cluster, run) if j["metadata"]["name"].startswith("mlp-no-jobs")]

        def stalled_forbidden():  # the run says why, as a condition a user sees
            status = json.loads(cluster.kubectl("get", "trun", "mlp-no-jobs", "-n", run, "-o", "json").stdout)
            return any(
                c["type"] == "Stalled"
                and c["status"] == "True"
                and c["reason"] == "Forbidden"
                and "jobs" in c["message"]
                for c in (status.get("status") or {}).get("conditions") or []
            )

        wait_for(stalled_forbidden, 60, "the run to be Stalled with reason Forbidden", 0.5)
        assert "Traceback" not in operator.log_text()
        cluster.kubectl("apply", "-f", "-", input=json.dumps(role))  # the rule is back
        wait_for(
            lambda: [j for j in jobs(cluster, run) if j["metadata"]["name"].startswith("mlp-no-jobs")],
            120,
            "the probe Job once the rule is back",
            0.5,
        )
    finally:
        cluster.kubectl("apply", "-f", "-", input=json.dumps(role))
        cluster.kubectl("delete", "trun", "mlp-no-jobs", "-n", run, "--wait=false", check=False)
        operator.stop()


def test_a_policy_starts_its_run_under_the_chart_service_account(cluster, installed, example, tmp_path):
    """The policy's check lists the nodes of its GPU type, creates its run, writes its status and
    posts its event with the chart's rules alone (the run stalls at its own pre-flight check: its
    model is absent, so no Job is spent on it)."""
    operator = operator_as_service_account(cluster, installed, tmp_path, ENGINEWRIGHT_POLICY_INTERVAL="0.5")
    run = installed["run"]
    template = manifest("unused")["spec"]
    template["model"]["uri"] = f"s3://{MODELS_BUCKET}/example/absent.onnx"
    policy = {
        "apiVersion": "tuning.enginewright.io/v1alpha1",
        "kind": "TuningPolicy",
        "metadata": {"name": "sa-policy"},
        "spec": {"template": template},
    }
    try:
        apply(cluster, run, policy)

        def recorded():
            status = json.loads(cluster.kubectl("get", "tpol", "sa-policy", "-n", run, "-o", "json").stdout).get(
                "status"
            )
            return ((status or {}).get("targets") or [{}])[0].get("run")

        started = wait_for(recorded, 120, "the policy to record the run it started", 0.5)
        owned = json.loads(cluster.kubectl("get", "trun", started, "-n", run, "-o", "json").stdout)
        assert owned["metadata"]["ownerReferences"][0]["kind"] == "TuningPolicy"
        events = json.loads(cluster.kubectl("get", "events", "-n", run, "-o", "json").stdout)["items"]
        assert any(e["reason"] == "RunStarted" and e["involvedObject"]["name"] == "sa-policy" for e in events)
        cluster.kubectl("delete", "tpol", "sa-policy", "-n", run, "--wait=false")
        wait_for(
            lambda: not json.loads(cluster.kubectl("get", "tpol", "-n", run, "-o", "json").stdout)["items"],
            150,
            "the deleted policy to go (kopf removes its finalizer with the chart's patch rule)",
            0.5,
        )
    finally:
        cluster.kubectl("delete", "tpol", "sa-policy", "-n", run, "--ignore-not-found", "--wait=false", check=False)
        operator.stop()
    log = operator.log_text()
    assert not forbidden_lines(log), "\n".join(forbidden_lines(log))
    assert "Traceback" not in log, log[-4000:]
