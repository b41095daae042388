"""The node agent resolves what a pod's container is given: configMapKeyRef, envFrom, fieldRef,
$(VAR) expansion, emptyDir volumes (mount path rewritten to a per-pod dir) and workingDir; and, as
the kubelet does, waits for a ConfigMap or key that a volume or the env names and that is not there
yet, instead of failing the pod."""

import json

from tests.conftest import get_json, wait_for


def apply_pod(cluster, namespace: str, name: str, script: str, container: dict, volumes=(), labels=None) -> None:
    """A pod of one container that runs SCRIPT with python3 on the cpu node (host-process mode: no image
    is run), CONTAINER's other fields (env, mounts, workingDir) and VOLUMES as given."""
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
        "spec": {
            "restartPolicy": "Never",
            "nodeSelector": {"nvidia.com/gpu.product": "cpu"},
            "volumes": list(volumes),
            "containers": [{"name": "main", "image": "none", "command": ["python3", "-c", script], **container}],
        },
    }
    cluster.kubectl("apply", "-f", "-", input=json.dumps(pod))


def test_env_sources_volumes_and_working_dir(cluster, namespace, tmp_path):
    out = tmp_path / "env.json"
    cluster.kubectl(
        "create", "configmap", "settings", "-n", namespace, "--from-literal=mode=fast", "--from-literal=LEVEL=3"
    )
    script = (
        "import json, os, pathlib; "
        "pathlib.Path(os.environ['SCRATCH'], 'x').write_text('ok'); "
        f"json.dump({{'env': dict(os.environ), 'cwd': os.getcwd(), "
        f"'scratch': pathlib.Path(os.environ['SCRATCH'], 'x').read_text()}}, open('{out}', 'w'))"
    )
    apply_pod(
        cluster,
        namespace,
        "env",
        script,
        {
            "workingDir": "/scratch/work",
            "volumeMounts": [{"name": "scratch", "mountPath": "/scratch"}],
            "envFrom": [{"configMapRef": {"name": "settings"}, "prefix": "CFG_"}],
            "env": [
                {"name": "MODE", "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "mode"}}},
                {"name": "APP", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['app']"}}},
                {"name": "NS", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
                {"name": "SCRATCH", "value": "/scratch"},
                {"name": "COMBINED", "value": "$(MODE)-$(APP)"},
            ],
        },
        volumes=[{"name": "scratch", "emptyDir": {}}],
        labels={"app": "x"},
    )
    status = _finished(cluster, namespace, "env")
    assert status["phase"] == "Succeeded", status
    seen = json.loads(out.read_text())
    env = seen["env"]
    assert env["MODE"] == "fast" and env["CFG_LEVEL"] == "3" and env["CFG_mode"] == "fast"
    assert env["APP"] == "x" and env["NS"] == namespace and env["COMBINED"] == "fast-x"
    assert env["SCRATCH"] != "/scratch" and env["SCRATCH"].endswith("volumes/scratch")
    assert seen["cwd"] == env["SCRATCH"] + "/work"
    assert seen["scratch"] == "ok"


def _finished(cluster, namespace: str, name: str, timeout: float = 60) -> dict:
    """The pod's status once it has Succeeded or Failed."""
    return wait_for(
        lambda: (
            (status := get_json(cluster, "pod", name, "-n", namespace)["status"]).get("phase")
            in ("Succeeded", "Failed")
            and status
        ),
        timeout,
        f"pod {name} to finish",
        0.3,
    )


def _waiting(cluster, namespace: str, name: str, reason: str, saying: str) -> dict:
    """The pod's status once its container waits with REASON and a message that says SAYING; fails at
    once if the pod ends instead."""

    def seen():
        status = get_json(cluster, "pod", name, "-n", namespace)["status"]
        assert status.get("phase") not in ("Succeeded", "Failed"), f"the pod ended instead of waiting: {status}"
        waiting = [c["state"].get("waiting") or {} for c in status.get("containerStatuses") or []]
        return any(w.get("reason") == reason and saying in w.get("message", "") for w in waiting) and status

    return wait_for(seen, 60, f"pod {name}'s container to wait in {reason} saying {saying!r}", 0.3)


def test_a_pod_whose_volumes_name_a_config_map_not_there_yet_waits_for_it(cluster, namespace, tmp_path):
    """As the kubelet does (FailedMount, retried), a configMap volume or projected source naming a
    ConfigMap that is not there yet holds the pod Pending until it is created. Before, the agent
    failed the pod for good (StartError): a pod created in a fresh namespace before the
    controller-manager had published its `kube-root-ca.crt` (projected into every pod's service
    account volume) would fail so (CI once saw the test above fail with its pod Failed, cause not
    printed: possibly this)."""
    out = tmp_path / "files.json"
    script = (
        "import json, os; "
        f"json.dump({{'plain': open(os.environ['V'] + '/mode').read(), "
        f"'projected': open(os.environ['P'] + '/m').read()}}, open('{out}', 'w'))"
    )
    apply_pod(
        cluster,
        namespace,
        "mounts",
        script,
        {
            "volumeMounts": [
                {"name": "plain", "mountPath": "/plain"},
                {"name": "projected", "mountPath": "/projected"},
            ],
            "env": [{"name": "V", "value": "/plain"}, {"name": "P", "value": "/projected"}],
        },
        volumes=[
            {"name": "plain", "configMap": {"name": "later"}},
            {
                "name": "projected",
                "projected": {"sources": [{"configMap": {"name": "later", "items": [{"key": "mode", "path": "m"}]}}]},
            },
        ],
    )
    status = _waiting(cluster, namespace, "mounts", "ContainerCreating", 'configmap "later" not found')
    assert status["phase"] == "Pending", status
    cluster.kubectl("create", "configmap", "later", "-n", namespace, "--from-literal=mode=slow")
    status = _finished(cluster, namespace, "mounts")
    assert status["phase"] == "Succeeded", status
    assert json.loads(out.read_text()) == {"plain": "slow", "projected": "slow"}


def test_a_container_whose_env_names_a_key_not_there_yet_waits_for_it(cluster, namespace, tmp_path):
    """As the kubelet does, a configMapKeyRef (or envFrom) naming a ConfigMap or key that is not
    there yet leaves the container waiting in CreateContainerConfigError, retried, not the pod
    Failed; an optional one that is missing is left out."""
    out = tmp_path / "env.json"
    script = f"import json, os; json.dump(dict(os.environ), open('{out}', 'w'))"
    apply_pod(
        cluster,
        namespace,
        "config",
        script,
        {
            "envFrom": [
                {"configMapRef": {"name": "absent", "optional": True}, "prefix": "ABSENT_"},
                {"configMapRef": {"name": "later"}, "prefix": "ALL_"},
            ],
            "env": [
                {"name": "MODE", "valueFrom": {"configMapKeyRef": {"name": "later", "key": "mode"}}},
                {"name": "GONE", "valueFrom": {"configMapKeyRef": {"name": "later", "key": "gone", "optional": True}}},
            ],
        },
    )
    status = _waiting(cluster, namespace, "config", "CreateContainerConfigError", 'configmap "later" not found')
    assert status["phase"] == "Pending", status
    cluster.kubectl("create", "configmap", "later", "-n", namespace, "--from-literal=other=1")
    status = _waiting(cluster, namespace, "config", "CreateContainerConfigError", "couldn't find key mode")
    assert status["phase"] == "Pending", status
    cluster.kubectl("patch", "configmap", "later", "-n", namespace, "-p", '{"data": {"mode": "fast"}}')
    status = _finished(cluster, namespace, "config")
    assert status["phase"] == "Succeeded", status
    env = json.loads(out.read_text())
    assert env["MODE"] == "fast" and env["ALL_other"] == "1" and env["ALL_mode"] == "fast"
    assert "GONE" not in env and not any(k.startswith("ABSENT_") for k in env)
