"""After the test cluster's API server is restarted, `start_process` hands the cluster back only once
the controller-manager acts again. Its informers come back as their reflectors' backoff allows: a
namespace created at once after a restart got its default ServiceAccount 4.8 s later on a fresh
cluster, 47-84 s later after a few restarts, and until then every pod a test creates there is
refused ("error looking up service account"): CI failed so, the test after a restart test waiting 60 s
for a ServiceAccount that a healthy controller-manager creates in ~10 ms. Without the wait this test
failed 3 times in 3 runs (10 s outages; a run with 8 s outages passed, the lag is the backoff's
draw); with it, 3 of 3 passed, each ServiceAccount there within 0.01 s."""

import time
import uuid

from tests.cluster.harness import wait_for
from tests.e2e.test_a_new_namespace_admits_pods_at_once import admission


def test_namespaces_created_after_api_server_restarts_admit_a_pod_at_once(cluster):
    # Two restarts: the reflectors' backoff grows over the first, so without the wait the second
    # leaves the controllers away for tens of seconds (47 s measured), not a few.
    for restart in range(2):
        cluster.stop_process("kube-apiserver")
        time.sleep(10)  # the outage itself, not a wait for a condition
        cluster.start_process("kube-apiserver")
        name = f"after-{uuid.uuid4().hex[:8]}"
        cluster.kubectl("create", "namespace", name)  # not create_namespace: it would wait
        try:
            began = time.monotonic()
            # ~10 ms from a controller-manager that acts; 1 s leaves room for a busy CI machine
            wait_for(lambda: cluster.get("serviceaccount", "default", name), 1, "the default ServiceAccount at once")
            print(f"restart {restart}: the ServiceAccount came {time.monotonic() - began:.2f} s after the namespace")
            admitted = admission(cluster, name)
            assert admitted.returncode == 0, admitted.stderr
        finally:
            cluster.kubectl("delete", "namespace", name, "--wait=false", check=False)
