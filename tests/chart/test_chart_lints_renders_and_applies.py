"""The chart is what a platform team reviews: `helm lint --strict` is clean, its CRDs are exactly
the generated ones, the values schema refuses bad values, the Deployment is hardened, every RBAC
verb carries its reason, and what it renders is accepted by the real API server (server-side dry
run) in both RBAC modes."""

from __future__ import annotations

import filecmp
import json
import re

import pytest

from tests.chart.chart import CHART, by_kind, helm, render
from tests.cluster.harness import REPO

STORE = {"store.endpoint": "minio.minio.svc:9000"}


def test_helm_lint_strict_is_clean(cluster):
    result = helm(cluster, "lint", "--strict", str(CHART), "--set", "store.endpoint=minio.minio.svc:9000")
    assert "1 chart(s) linted, 0 chart(s) failed" in result.stdout
    assert "[WARNING]" not in result.stdout and "[ERROR]" not in result.stdout, result.stdout


def test_chart_crds_are_the_generated_crds():
    generated = sorted(p.name for p in (REPO / "crds").glob("*.yaml"))
    assert generated and generated == sorted(p.name for p in (CHART / "crds").glob("*.yaml"))
    match, mismatch, errors = filecmp.cmpfiles(REPO / "crds", CHART / "crds", generated, shallow=False)
    assert not mismatch and not errors, f"run `enginewright crds --also charts/enginewright/crds`: {mismatch}"


@pytest.mark.parametrize(
    "values,complaint",
    [
        ({}, "store.endpoint is required"),
        ({"store.endpoint": "http://minio:9000"}, "/store/endpoint"),
        ({**STORE, "store.accessKey": "AKIA"}, "additional properties 'accessKey' not allowed"),
        ({**STORE, "metrics.port": 0}, "/metrics/port"),
        ({**STORE, "watchNamespaces": ["Not_A_Namespace"]}, "/watchNamespaces/0"),
        ({**STORE, "workerImages": {"tvm": "x"}}, "additional properties 'tvm' not allowed"),
        ({**STORE, "tenancy": {"publishBuckets": ["Not A Bucket"]}}, "/tenancy/publishBuckets/0"),
        ({**STORE, "tenancy": {"modelOwners": {"shared-*": []}}}, "/tenancy/modelOwners/shared-*"),
    ],
)
def test_values_are_checked_before_anything_is_rendered(cluster, values, complaint):
    args = [f"--set-json={k}={json.dumps(v)}" for k, v in values.items()]
    result = helm(cluster, "template", "r", str(CHART), *args, check=False)
    assert result.returncode != 0 and complaint in result.stderr, result.stderr


def test_tenancy_values_reach_the_operator(cluster):
    """The defaults allow only the chart's worker images and catalog bucket (empty lists, first-come
    model ownership); set values reach the operator's environment as its settings read them."""
    from enginewright.controller.settings import Settings

    def settings(values):
        (deployment,) = by_kind(render(cluster, "ew", "enginewright", {**STORE, **values}), "Deployment")
        env = {e["name"]: e.get("value", "") for e in deployment["spec"]["template"]["spec"]["containers"][0]["env"]}
        return Settings.from_env({k: v for k, v in env.items() if k.startswith("ENGINEWRIGHT_")})

    default = settings({})
    assert default.allowed_images == () and default.publish_buckets == () and default.model_owners == {}
    tenancy = {
        "allowedImages": ["reg.example.com/ew/*"],
        "publishBuckets": ["team-catalog", "shared"],
        "modelOwners": {"shared-*": ["ml-platform", "team-*"]},
    }
    chosen = settings({"tenancy": tenancy})
    assert chosen.allowed_images == ("reg.example.com/ew/*",)
    assert chosen.publish_buckets == ("team-catalog", "shared")
    assert chosen.model_owners == {"shared-*": ("ml-platform", "team-*")}


def test_the_operator_deployment_is_hardened(cluster):
    objects = render(cluster, "ew", "enginewright", {**STORE, "workerImages": {"onnxruntime": "reg/w:1"}})
    (deployment,) = by_kind(objects, "Deployment")
    spec = deployment["spec"]
    assert spec["replicas"] == 1 and spec["strategy"] == {"type": "Recreate"}  # one active instance
    pod = spec["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] != 0
    (container,) = pod["containers"]
    assert container["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "privileged": False,
        "capabilities": {"drop": ["ALL"]},
    }
    for probe in ("livenessProbe", "readinessProbe"):
        assert container[probe]["httpGet"] == {"path": "/healthz", "port": "health"}
    assert container["resources"]["requests"]["cpu"] and container["resources"]["limits"]["memory"]
    env = {e["name"]: e for e in container["env"]}
    assert env["ENGINEWRIGHT_WORKER_IMAGE_ONNXRUNTIME"]["value"] == "reg/w:1"
    assert env["ENGINEWRIGHT_S3_SECURE"]["value"] == "true"
    # Credentials come from a Secret by name; the chart renders no credential anywhere.
    assert env["AWS_SECRET_ACCESS_KEY"]["valueFrom"]["secretKeyRef"]["name"] == "enginewright-operator-store"
    assert not by_kind(objects, "Secret")
    assert by_kind(objects, "Service") and not by_kind(objects, "ServiceMonitor")
    monitored = render(cluster, "ew", "enginewright", {**STORE, "metrics": {"serviceMonitor": {"enabled": True}}})
    assert by_kind(monitored, "ServiceMonitor")[0]["spec"]["endpoints"][0]["port"] == "metrics"


def test_every_rbac_verb_says_why():
    """Each `verbs:` line in the chart is preceded by a comment giving its reason."""
    for path in (CHART / "templates" / "_helpers.tpl", CHART / "templates" / "rbac.yaml"):
        lines = path.read_text().splitlines()
        for i, line in enumerate(lines):
            if re.match(r"\s*verbs:", line):
                above = [
                    ln
                    for ln in lines[max(0, i - 6) : i]
                    if not re.match(r"\s*(resources|resourceNames|apiGroups):", ln)
                ]
                assert above and above[-1].strip().startswith("#"), f"{path.name}:{i + 1} has no reason: {line}"


def test_rbac_is_namespaced_when_namespaces_are_given(cluster):
    objects = render(cluster, "ew", "enginewright", {**STORE, "watchNamespaces": ["team-a", "team-b"]})
    roles = by_kind(objects, "Role")
    assert sorted(r["metadata"]["namespace"] for r in roles) == ["team-a", "team-b"]
    (cluster_role,) = [
        r
        for r in by_kind(objects, "ClusterRole")  # only nodes and CRDs are cluster-wide
        if r["metadata"]["name"].endswith("-nodes")
    ]
    assert {r for rule in cluster_role["rules"] for r in rule["resources"]} == {
        "nodes",
        "customresourcedefinitions",
        "namespaces",
    }
    assert all(set(rule["verbs"]) <= {"get", "list", "watch"} for rule in cluster_role["rules"])
    secrets = next(rule for rule in roles[0]["rules"] if rule["resources"] == ["secrets"])
    assert secrets == {
        "apiGroups": [""],
        "resources": ["secrets"],
        "resourceNames": ["enginewright-store"],
        "verbs": ["get"],
    }
    # Pods: only listed (a failed probe's terminated message), never created, changed or their logs read.
    pods = [rule for role in roles for rule in role["rules"] if any(r.startswith("pods") for r in rule["resources"])]
    assert pods and all(rule["resources"] == ["pods"] and rule["verbs"] == ["list"] for rule in pods), pods
    assert not any("*" in rule["verbs"] or "*" in rule["resources"] for o in objects for rule in o.get("rules") or [])


@pytest.mark.parametrize("mode", ["all namespaces", "watched namespaces"])
def test_the_rendered_chart_applies_with_a_server_side_dry_run(cluster, crd_installed, namespace, mode):
    values = dict(STORE)
    if mode == "watched namespaces":
        values["watchNamespaces"] = [namespace]
    objects = render(cluster, "ew", namespace, values)
    assert {"Deployment", "ServiceAccount", "Service", "ClusterRole", "ClusterRoleBinding"} <= {
        o["kind"] for o in objects
    }
    result = cluster.kubectl(
        "apply", "--dry-run=server", "-n", namespace, "-f", "-", input="\n---\n".join(json.dumps(o) for o in objects)
    )
    assert result.stdout.count("(server dry run)") == len(objects), result.stdout


def test_namespace_users_get_tuningruns_through_the_default_roles(cluster):
    """edit/admin create runs, view reads them: ClusterRoles aggregated into Kubernetes' user roles."""
    objects = render(cluster, "ew", "enginewright", STORE)
    roles = {r["metadata"]["name"]: r for r in by_kind(objects, "ClusterRole")}
    edit, view = roles["ew-enginewright-edit"], roles["ew-enginewright-view"]
    assert edit["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-edit"] == "true"
    assert edit["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-admin"] == "true"
    assert view["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-view"] == "true"
    assert "create" in edit["rules"][0]["verbs"] and edit["rules"][1]["verbs"] == ["get", "list", "watch"]
    assert all(rule["verbs"] == ["get", "list", "watch"] for rule in view["rules"])
    assert all(rule["apiGroups"] == ["tuning.enginewright.io"] for r in (edit, view) for rule in r["rules"])
    off = render(cluster, "ew", "enginewright", {**STORE, "rbac.aggregateToDefaultRoles": False})
    assert {r["metadata"]["name"] for r in by_kind(off, "ClusterRole")} == {
        "ew-enginewright-nodes",
        "ew-enginewright-runs",
    }


def test_the_store_secret_name_is_annotated_for_kube_linter(cluster):
    """kube-linter's env-var-secret reads ENGINEWRIGHT_STORE_SECRET (a Secret's name) as a secret value."""
    (deployment,) = by_kind(render(cluster, "ew", "enginewright", STORE), "Deployment")
    reason = deployment["metadata"]["annotations"]["ignore-check.kube-linter.io/env-var-secret"]
    assert "ENGINEWRIGHT_STORE_SECRET" in reason and "name" in reason
    env = {e["name"]: e for e in deployment["spec"]["template"]["spec"]["containers"][0]["env"]}
    flagged = [n for n, e in env.items() if "SECRET" in n.upper() and "value" in e]
    assert flagged == ["ENGINEWRIGHT_STORE_SECRET"], flagged  # the only one; the keys come from secretKeyRef
