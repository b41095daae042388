"""The node agent resolves what a pod's container is given: configMapKeyRef, envFrom, fieldRef,
$(VAR) expansion, emptyDir volumes (mount path rewritten to a per-pod dir) and workingDir."""

import json

from tests.conftest import get_json, wait_for


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
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "env", "namespace": namespace, "labels": {"app": "x"}},
        "spec": {
            "restartPolicy": "Never",
            "nodeSelector": {"nvidia.com/gpu.product": "cpu"},
            "volumes": [{"name": "scratch", "emptyDir": {}}],
            "containers": [
                {
                    "name": "main",
                    "image": "none",
                    "command": ["python3", "-c", script],
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
                }
            ],
        },
    }
    cluster.kubectl("apply", "-f", "-", input=json.dumps(pod))
    phase = wait_for(
        lambda: (
            get_json(cluster, "pod", "env", "-n", namespace)["status"].get("phase") in ("Succeeded", "Failed")
            and get_json(cluster, "pod", "env", "-n", namespace)["status"]["phase"]
        ),
        60,
        "the pod to finish",
        0.3,
    )
    assert phase == "Succeeded"
    seen = json.loads(out.read_text())
    env = seen["env"]
    assert env["MODE"] == "fast" and env["CFG_LEVEL"] == "3" and env["CFG_mode"] == "fast"
    assert env["APP"] == "x" and env["NS"] == namespace and env["COMBINED"] == "fast-x"
    assert env["SCRATCH"] != "/scratch" and env["SCRATCH"].endswith("volumes/scratch")
    assert seen["cwd"] == env["SCRATCH"] + "/work"
    assert seen["scratch"] == "ok"
