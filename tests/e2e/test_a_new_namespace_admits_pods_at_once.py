"""A namespace the tests create admits a pod as soon as `create_namespace` returns. The API server's
ServiceAccount admission refuses a pod until the controller-manager has created the namespace's
`default` ServiceAccount; CI failed once that way (test_node_agent_pod_environment: `pods "env" is
forbidden: error looking up service account t-0c2777aa/default`), when the fixtures created the
namespace and went on at once."""

import json
import uuid


def admission(cluster, namespace: str):
    """kubectl's result for a pod created in `namespace` by a server-side dry run: admission runs, and
    nothing is stored or run."""
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "admitted"},
        "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "none"}]},
    }
    return cluster.kubectl("create", "--dry-run=server", "-n", namespace, "-f", "-", input=json.dumps(pod), check=False)


def test_a_pod_is_admitted_in_a_namespace_as_soon_as_it_is_created(cluster):
    names = [f"sa-{uuid.uuid4().hex[:8]}" for _ in range(5)]
    try:
        for name in names:
            cluster.create_namespace(name)
            admitted = admission(cluster, name)
            assert admitted.returncode == 0, admitted.stderr
    finally:
        for name in names:
            cluster.kubectl("delete", "namespace", name, "--wait=false", check=False)
