"""The chart as the tests use it: `helm` (the cached one tests/cluster/build.sh built) renders
charts/enginewright with values, and the rendered objects come back as dicts."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import yaml

from tests.cluster.harness import REPO

CHART = REPO / "charts" / "enginewright"


def helm(cluster, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    result = subprocess.run(
        [str(cluster.binaries / "helm"), *args], env=cluster.env, text=True, capture_output=True, timeout=300, cwd=REPO
    )
    if check and result.returncode != 0:
        raise AssertionError(f"helm {' '.join(args)} failed ({result.returncode}):\n{result.stderr}\n{result.stdout}")
    return result


def values_args(values: dict) -> list[str]:
    return [f"--set-json={key}={json.dumps(value)}" for key, value in values.items()]


def render(cluster, release: str, namespace: str, values: dict) -> list[dict]:
    text = helm(cluster, "template", release, str(CHART), "-n", namespace, *values_args(values)).stdout
    return [doc for doc in yaml.safe_load_all(text) if doc]


def by_kind(objects: list[dict], kind: str) -> list[dict]:
    return [o for o in objects if o["kind"] == kind]


def operator_settings(cluster, values: dict):
    """The operator's Settings as they would read the environment of the Deployment rendered with `values`."""
    from enginewright.controller.settings import Settings

    (deployment,) = by_kind(render(cluster, "ew", "enginewright", values), "Deployment")
    env = {e["name"]: e.get("value", "") for e in deployment["spec"]["template"]["spec"]["containers"][0]["env"]}
    return Settings.from_env({k: v for k, v in env.items() if k.startswith("ENGINEWRIGHT_")})


def service_account_kubeconfig(cluster, namespace: str, name: str, path: Path) -> Path:
    """A kubeconfig that authenticates as ServiceAccount namespace/name with a token from the
    TokenRequest API (`kubectl create token`), the same credential its pod would get."""
    token = cluster.kubectl("create", "token", name, "-n", namespace, "--duration=2h").stdout.strip()
    admin = yaml.safe_load(cluster.kubeconfig.read_text())
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": admin["clusters"],
                "users": [{"name": name, "user": {"token": token}}],
                "contexts": [
                    {
                        "name": name,
                        "context": {"cluster": admin["clusters"][0]["name"], "user": name, "namespace": namespace},
                    }
                ],
                "current-context": name,
            }
        )
    )
    return path
