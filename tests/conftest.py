"""Shared fixtures: the real local cluster (started once per session, only when a test asks for it),
a namespace per test, Kubernetes API clients, and an S3 client. Under CI=true, property tests run
derandomized (the same examples every run), so CI cannot flip on a newly drawn example."""

from __future__ import annotations

import json
import os
import uuid

import pytest
from hypothesis import settings

from tests.cluster.harness import S3_ACCESS_KEY, S3_SECRET_KEY, LocalCluster, wait_for

settings.register_profile("ci", derandomize=True, database=None, print_blob=True)
if os.environ.get("CI") == "true":
    settings.load_profile("ci")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """A failed test that used the local cluster shows its namespaces' pods, Jobs and container logs
    (`cluster_state`), and one that used an operator process what that operator logged: the lines
    about the test's namespace and the log's tail (CI keeps only pytest's output, not the log files)."""
    report = yield
    if report.failed and call.when == "call":
        funcargs = getattr(item, "funcargs", {})
        local = funcargs.get("cluster")
        if isinstance(local, LocalCluster):
            try:
                state = cluster_state(local, funcargs)
            except Exception as exc:  # the report of a failure must not fail pytest itself
                state = f"(could not be gathered: {type(exc).__name__}: {exc})"
            report.sections.append(("pods, Jobs, events and nodes of the test's namespaces", state))
        for name, value in funcargs.items():
            if callable(getattr(value, "log_text", None)):
                report.sections.append((f"operator log ({name})", operator_log_excerpt(value.log_text(), funcargs)))
    return report


def namespaces_of(funcargs: dict) -> list[str]:
    return [v for k, v in funcargs.items() if "namespace" in k and isinstance(v, str)]


def cluster_state(local: LocalCluster, funcargs: dict, tail: int = 25) -> str:
    """What ran in the test's namespaces when it failed: each pod (phase, deletion, why it is not
    scheduled where it is not, its containers' states) and Job (counts, conditions) in one line, the
    namespace's events (the Job controller's pod creations, the scheduler's refusals) and the
    controller-manager's and scheduler's log lines naming it, the end of each pod's container log as
    the node agent wrote it, and each node (Ready, its status's and its lease's last posting, taints).
    CI keeps only pytest's output: a wait that timed out on a run's status alone cannot say whether
    its pod never started, was never scheduled, hung or was never replaced."""
    lines: list[str] = []
    for namespace in namespaces_of(funcargs):
        listed = _listed(local, lines, namespace, "pods,jobs,events", "-n", namespace)
        for obj in listed:
            meta, status = obj["metadata"], obj.get("status") or {}
            if obj["kind"] == "Pod":
                states = [_container_state(c) for c in status.get("containerStatuses") or []]
                waiting = [
                    f"{c['type']}={c['status']}({c.get('reason', '')}: {c.get('message', '')})"
                    for c in status.get("conditions") or []
                    if c.get("status") != "True" and c["type"] == "PodScheduled"
                ]
                lines.append(
                    f"pod {meta['name']}: {status.get('phase')} on {obj['spec'].get('nodeName')}, "
                    f"created {meta.get('creationTimestamp')}, deleted {meta.get('deletionTimestamp')}, "
                    f"finalizers {meta.get('finalizers')}; {' '.join(states) or 'no containers started'}"
                    + "".join(f"; {w}" for w in waiting)
                )
            elif obj["kind"] == "Event":
                continue
            else:
                conditions = [
                    f"{c['type']}={c['status']}({c.get('reason', '')})" for c in status.get("conditions") or []
                ]
                lines.append(
                    f"job {meta['name']}: active {status.get('active', 0)}, failed {status.get('failed', 0)}, "
                    f"succeeded {status.get('succeeded', 0)}, terminating {status.get('terminating', 0)}, "
                    f"uncounted {status.get('uncountedTerminatedPods')}; {' '.join(conditions) or 'no conditions'}"
                )
        events = sorted(
            (e for e in listed if e["kind"] == "Event"),
            key=lambda e: (e.get("lastTimestamp") or e.get("eventTime") or "", int(e["metadata"]["resourceVersion"])),
        )
        lines += [f"-- events: the last {min(tail, len(events))} of {len(events)}"]
        lines += [_event_line(e) for e in events[-tail:]]
        for component in ("kube-controller-manager", "kube-scheduler"):
            said = [line for line in _read(local.log_path(component)).splitlines() if namespace in line]
            lines += [f"-- {component}: the last {min(tail, len(said))} of its {len(said)} lines naming {namespace}"]
            lines += [line[:300] for line in said[-tail:]]
        for log_file in sorted(local.pod_logs.glob(f"{namespace}_*.log")):
            text = log_file.read_text(errors="replace").splitlines()
            lines += [f"-- {log_file.name}: the last {min(tail, len(text))} of {len(text)} lines"]
            lines += [line[:300] for line in text[-tail:]]
    agent = [line for line in _read(local.log_path("node-agent")).splitlines() if "registered node" not in line]
    lines += [f"-- node agent: the last {min(tail, len(agent))} of {len(agent)} lines", *agent[-tail:]]
    leases = {
        lease["metadata"]["name"]: (lease.get("spec") or {}).get("renewTime")
        for lease in _listed(local, lines, "node leases", "leases", "-n", "kube-node-lease")
    }
    lines.append("-- nodes")
    for node in _listed(local, lines, "nodes", "nodes"):
        name, spec = node["metadata"]["name"], node.get("spec") or {}
        ready = next((c for c in node.get("status", {}).get("conditions") or [] if c["type"] == "Ready"), {})
        taints = [f"{t['key']}:{t['effect']}" for t in spec.get("taints") or []]
        lines.append(
            f"node {name}: Ready={ready.get('status')}({ready.get('reason', '')}), status posted "
            f"{ready.get('lastHeartbeatTime')}, taints {taints}, unschedulable {bool(spec.get('unschedulable'))}, "
            f"lease renewed {leases.get(name)}"
        )
    return "\n".join(lines)


def _listed(local: LocalCluster, lines: list[str], what: str, kinds: str, *args: str) -> list[dict]:
    """`kubectl get KINDS ARGS` as dicts; an error (often why the test failed: the API server is down)
    is a line of the report instead, in its own words."""
    try:
        return json.loads(local.kubectl("get", kinds, *args, "-o", "json", "--request-timeout=20s").stdout)["items"]
    except Exception as exc:
        lines.append(f"{what}: could not be read: {exc}")
        return []


def _event_line(event: dict) -> str:
    """`22:30:21 Job/resumed-cpu-stage1-b000 SuccessfulCreate (x1): Created pod: ...`"""
    when = event.get("lastTimestamp") or event.get("eventTime") or ""
    about = event.get("involvedObject") or {}
    return (
        f"{when[11:19]} {about.get('kind')}/{about.get('name')} {event.get('reason')} "
        f"(x{event.get('count') or 1}): {(event.get('message') or '')[:300]}"
    )


def _container_state(container: dict) -> str:
    """`worker=terminated(Error, exit 143)`, `worker=running`."""
    (kind, detail), *_ = (container.get("state") or {"unknown": {}}).items()
    said = [detail.get("reason")] if detail.get("reason") else []
    said += [f"exit {detail['exitCode']}"] if "exitCode" in detail else []
    return f"{container['name']}={kind}" + (f"({', '.join(said)})" if said else "")


def _read(path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError as exc:
        return f"({exc})"


def operator_log_excerpt(text: str, funcargs: dict, tail: int = 80, about: int = 120) -> str:
    namespaces = namespaces_of(funcargs)
    lines = text.splitlines()
    mentioned = [line for line in lines if any(n in line for n in namespaces)][-about:]
    return "\n".join(
        [
            f"-- lines naming {', '.join(namespaces) or '(no namespace)'}: {len(mentioned)}",
            *mentioned,
            f"-- the last {min(tail, len(lines))} of {len(lines)} lines",
            *lines[-tail:],
        ]
    )


@pytest.fixture(scope="session")
def cluster():
    local = LocalCluster()
    local.start()
    print(f"\nlocal cluster up in {local.timings['up_seconds']:.1f}s ({local.workdir})")
    yield local
    local.stop()
    local.remove()


@pytest.fixture(scope="session")
def api(cluster):
    from kubernetes import client, config

    return client.ApiClient(config.new_client_from_config(str(cluster.kubeconfig)).configuration)


@pytest.fixture
def namespace(cluster, api):
    from kubernetes import client

    name = f"t-{uuid.uuid4().hex[:8]}"
    cluster.create_namespace(name)
    yield name
    client.CoreV1Api(api).delete_namespace(name)


@pytest.fixture(scope="session")
def s3(cluster):
    from minio import Minio

    return Minio(cluster.s3_endpoint, access_key=S3_ACCESS_KEY, secret_key=S3_SECRET_KEY, secure=False)


@pytest.fixture(scope="session")
def crd_installed(cluster):
    """The generated TuningRun CRD, applied with kubectl and Established."""
    cluster.install_crds()
    return True


def get_json(cluster: LocalCluster, *args: str) -> dict:
    """`kubectl get ARGS -o json`: read in this process (`cluster.get`) for a kind, a name, `-n` and
    `-l`, through kubectl for anything else."""
    readable = _get_arguments(args)
    if readable:
        kind, read = readable
        return cluster.get(kind, **read)
    return json.loads(cluster.kubectl("get", *args, "-o", "json").stdout)


def _get_arguments(args: tuple[str, ...]) -> tuple[str, dict[str, str]] | None:
    """`kubectl get`'s KIND [NAME] [-n NAMESPACE] [-l SELECTOR] as `cluster.get`'s arguments; None
    for any other form (`kind/name`, several kinds, other flags)."""
    kind, *rest = args
    if "/" in kind or "," in kind:
        return None
    flags, read = {"-n": "namespace", "-l": "selector"}, {}
    while rest:
        arg = rest.pop(0)
        if arg in flags and rest:
            read[flags[arg]] = rest.pop(0)
        elif arg.startswith("-") or "name" in read:
            return None
        else:
            read["name"] = arg
    return kind, read


__all__ = ["get_json", "wait_for"]


def assert_stopped_where_settled(rounds: dict[str, list[float]], default_id: str, margin: float, planned: int) -> int:
    """Recorded confirmation rounds stopped where the worker's early stop says they should: `settled`
    (asked after every round but the last) false after each round before the last one timed, and true
    after it when fewer than `planned` were timed. Checks the wiring end to end (the default's id and
    the margin the worker used) on whatever the run measured. Returns the rounds timed."""
    from enginewright.search.winner import settled

    timed = len(next(iter(rounds.values())))
    prefix = lambda n: {key: values[:n] for key, values in rounds.items()}  # noqa: E731
    early = [n for n in range(1, timed) if settled(prefix(n), default_id, margin)]
    assert not early, f"settled after round {early[0]} but {timed} rounds were timed"
    assert timed == planned or settled(rounds, default_id, margin), f"stopped after {timed} of {planned}, not settled"
    return timed
