"""Start and stop the real local control plane, the S3 server and the GPU node agent.

Everything binds to 127.0.0.1 on free ports, lives under one work directory, and runs in its own
process group; with `die_with_parent` (the default for tests) every child also gets a parent-death
signal, so no process outlives the harness even when pytest is killed.
"""

from __future__ import annotations

import ctypes
import json
import os
import random
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
S3_ACCESS_KEY = "enginewright"
S3_SECRET_KEY = "enginewright-secret-key"

# Nodes of the test/demo cluster: two GPU types and CPU nodes for CPU-only compilers.
DEFAULT_NODES = [
    {"name": "gpu-h200-0", "labels": {"nvidia.com/gpu.product": "NVIDIA-H200"}, "gpus": 8},
    {"name": "gpu-l40s-0", "labels": {"nvidia.com/gpu.product": "NVIDIA-L40S"}, "gpus": 4},
    {"name": "cpu-0", "labels": {"nvidia.com/gpu.product": "cpu"}, "gpus": 0},
]


def free_port() -> int:
    """A port to listen on that nothing listens on now, chosen below the kernel's ephemeral range:
    a port the kernel hands out (bind to 0) can be taken, before the component that is to listen on
    it starts, as the local port of some process's outgoing connection (a CI run lost the
    controller manager's port to one: "bind: address already in use")."""
    try:
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    for _ in range(200):
        port = random.randrange(10000, max(10001, low))
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def bin_dir() -> Path:
    """The cached binaries (tests/cluster/build.sh builds them when missing)."""
    explicit = os.environ.get("ENGINEWRIGHT_BIN")
    if explicit:
        return Path(explicit)
    out = subprocess.run(
        ["bash", str(REPO / "tests/cluster/build.sh")], check=True, text=True, stdout=subprocess.PIPE
    ).stdout
    return Path(out.strip().splitlines()[-1])


def _die_with_parent() -> None:
    os.setsid()
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def wait_for(predicate, timeout: float, what: str, interval: float = 0.1, detail=None):
    """Poll `predicate` until it returns a truthy value (returned) or `timeout` seconds pass: the one
    bounded wait of the tests. An exception from `predicate` means "not yet" (the thing polled is not
    up yet), except an AssertionError: a test's own verdict (a pod that failed, a run that stalled)
    ends the wait at once. On timeout the error names `what`, the last exception, and `detail()`
    when given (the state to show: a run's status, the Jobs)."""
    deadline = time.monotonic() + timeout
    last_error = None
    while True:
        try:
            value = predicate()
            if value:
                return value
        except AssertionError:
            raise
        except Exception as exc:  # the thing polled is not up yet
            last_error = exc
        if time.monotonic() >= deadline:
            break
        time.sleep(interval)
    shown = ""
    if detail:
        try:
            shown = f"\n{detail()}"
        except Exception as exc:  # often why the wait timed out (the API server is down): keep the timeout
            shown = f"\n(the state could not be read: {exc})"
    raise TimeoutError(
        f"timed out after {timeout:.0f}s waiting for {what}" + (f": {last_error}" if last_error else "") + shown
    )


@dataclass
class Process:
    name: str
    popen: subprocess.Popen
    log: Path
    argv: list[str] = field(default_factory=list)
    env: dict | None = None


@dataclass
class LocalCluster:
    """A real etcd + kube-apiserver + kube-controller-manager + kube-scheduler, a versitygw S3
    server, and the node agent; `start()` brings them up, `stop()` tears them down."""

    workdir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="enginewright-cluster-")))
    binaries: Path | None = None
    nodes: list[dict] = field(default_factory=lambda: [dict(n) for n in DEFAULT_NODES])
    die_with_parent: bool = True
    processes: list[Process] = field(default_factory=list)
    api_port: int = 0
    s3_port: int = 0
    timings: dict[str, float] = field(default_factory=dict)
    audit_everything: bool = False  # every request at Metadata level (the load benchmark counts them)
    _reader: dict = field(default_factory=dict, repr=False, compare=False)  # the admin TLS context, get()'s discovery

    # ------------------------------------------------------------------ paths and clients
    @property
    def kubeconfig(self) -> Path:
        return self.workdir / "admin.kubeconfig"

    @property
    def s3_endpoint(self) -> str:
        return f"127.0.0.1:{self.s3_port}"

    @property
    def env(self) -> dict[str, str]:
        """Environment for tools and the operator: kubeconfig, kubectl/helm on PATH, S3 access."""
        return {
            **os.environ,
            "KUBECONFIG": str(self.kubeconfig),
            "PATH": f"{self.binaries}{os.pathsep}{os.environ.get('PATH', '')}",
            "ENGINEWRIGHT_S3_ENDPOINT": self.s3_endpoint,
            "AWS_ACCESS_KEY_ID": S3_ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": S3_SECRET_KEY,
        }

    def kubectl(self, *args: str, check: bool = True, input: str | None = None) -> subprocess.CompletedProcess:
        result = subprocess.run(
            [str(self.binaries / "kubectl"), *args],
            env=self.env,
            text=True,
            input=input,
            capture_output=True,
            timeout=120,
        )
        if check and result.returncode != 0:
            raise RuntimeError(f"kubectl {' '.join(args)} failed ({result.returncode}): {result.stderr.strip()}")
        return result

    def create_namespace(self, name: str, timeout: float = 60) -> None:
        """Create namespace NAME and return once its `default` ServiceAccount exists. The
        controller-manager's ServiceAccount controller creates it shortly after the namespace (~10
        ms), and until then the API server's ServiceAccount admission refuses every pod there ("error
        looking up service account NAME/default"). A Job's pods are retried by the Job controller,
        but a pod a test creates itself is refused for good: CI failed so once
        (test_node_agent_pod_environment)."""
        self.kubectl("create", "namespace", name)

        def default_service_account():
            self._check_alive()
            return self.get("serviceaccount", "default", name)

        def controller_manager_log() -> str:
            (manager,) = [p for p in self.processes if p.name == "kube-controller-manager"]
            lines = manager.log.read_text(errors="replace").splitlines()
            said = [line for line in lines if "service" in line.lower() or line.startswith(("E", "W"))]
            return "the controller-manager's last words on it:\n" + "\n".join(said[-60:])

        wait_for(
            default_service_account,
            timeout,
            f"the default ServiceAccount of namespace {name}",
            interval=0.1,
            detail=controller_manager_log,
        )

    def wait_controllers_act(self, timeout: float = 180) -> None:
        """Return once the controller-manager acts on a new object again: a probe namespace gets its
        default ServiceAccount. After the API server is restarted, the controller-manager's informers
        come back only as their reflectors' backoff allows (client-go: 0.8 s doubling to 30 s, with
        up to as much again of jitter, reset after 2 minutes without a failure): measured on this
        harness, a namespace created at once after a restart got its ServiceAccount 4.8 s later on
        a fresh cluster, and 47-84 s later after two to five restarts (10-20 s outages). Until then
        its Job and ServiceAccount controllers do nothing, and a test that follows on the same
        cluster waits or fails (CI: 60 s without a ServiceAccount, after a restart test)."""
        probe = f"probe-{uuid.uuid4().hex[:8]}"
        self.create_namespace(probe, timeout)
        self.kubectl("delete", "namespace", probe, "--wait=false")

    def get(self, kind: str, name: str = "", namespace: str = "", selector: str = "") -> dict:
        """What `kubectl get KIND [NAME] [-n NAMESPACE] [-l SELECTOR] -o json` prints, read from the API
        server in this process. The tests poll the cluster thousands of times a run, and each kubectl
        process cost ~50 ms of CPU and discovery requests of its own (2,811 of them were 11% of the CPU
        of the tests run beside each other). KIND is any name kubectl takes (plural, singular, short,
        `plural.group`); a list is kubectl's `List`, its items naming their kind; a namespaced KIND
        with no namespace reads `default`, as the kubeconfig's context says. What is not there raises
        RuntimeError, as a failed kubectl does."""
        resource = self._resource(kind)
        path = resource["prefix"]
        if resource["namespaced"]:
            path += f"/namespaces/{namespace or 'default'}"
        path += f"/{resource['plural']}" + (f"/{name}" if name else "")
        if selector:
            path += "?" + urllib.parse.urlencode({"labelSelector": selector})
        read = self._read(path)
        objects = [read] if name else read["items"]
        for item in objects:  # kubectl leaves them out unless --show-managed-fields
            item.get("metadata", {}).pop("managedFields", None)
        if name:
            return read
        items = [{"apiVersion": resource["apiVersion"], "kind": resource["kind"], **item} for item in objects]
        return {"apiVersion": "v1", "kind": "List", "items": items, "metadata": {"resourceVersion": ""}}

    def _admin_tls(self) -> ssl.SSLContext:
        """The kubeconfig's CA and admin client certificate, for requests from this process."""
        if "tls" not in self._reader:
            config = json.loads(self.kubeconfig.read_text())
            user = config["users"][0]["user"]
            tls = ssl.create_default_context(cafile=config["clusters"][0]["cluster"]["certificate-authority"])
            tls.load_cert_chain(user["client-certificate"], user["client-key"])
            self._reader["tls"] = tls
        return self._reader["tls"]

    def _read(self, path: str) -> dict:
        request = urllib.request.Request(
            f"https://127.0.0.1:{self.api_port}{path}", headers={"Accept": "application/json"}
        )
        for attempt in range(1, 11):  # client-go's (kubectl's) retries of an answer that says when to ask again
            try:
                with urllib.request.urlopen(request, context=self._admin_tls(), timeout=30) as response:
                    return json.load(response)
            except urllib.error.HTTPError as error:
                said, retry_after = error.read().decode(errors="replace"), error.headers.get("Retry-After")
                if attempt == 10 or not (error.code == 429 or error.code >= 500 and retry_after):
                    try:
                        said = json.loads(said).get("message", said)
                    except ValueError:
                        pass
                    raise RuntimeError(f"GET {path} failed ({error.code}): {said}") from None
            # "storage is (re)initializing" (429): a CRD just Established whose storage is not ready yet
            time.sleep(float(retry_after or 1))
        raise AssertionError("the loop returns or raises")

    def _resource(self, kind: str) -> dict:
        """Where KIND lives, from the server's discovery: read once, and again for a kind the last
        reading lacked (a CRD applied since)."""
        if kind not in self._reader.get("resources", {}):
            self._reader["resources"] = self._discover()
        try:
            return self._reader["resources"][kind]
        except KeyError:
            raise RuntimeError(f'the server doesn\'t have a resource type "{kind}"') from None

    def _discover(self) -> dict[str, dict]:
        listings = [self._read("/api/v1")]
        for group in self._read("/apis")["groups"]:
            try:
                listings.append(self._read(f"/apis/{group['preferredVersion']['groupVersion']}"))
            except RuntimeError:  # a group its server cannot list now (an aggregated API down): kubectl skips it too
                continue
        found: dict[str, dict] = {}
        for listing in listings:  # the core group first, so `events` is v1's, as kubectl reads it
            version = listing["groupVersion"]
            group = version.rpartition("/")[0]
            for r in listing["resources"]:
                if "/" in r["name"]:  # a subresource (pods/log, .../status)
                    continue
                resource = {
                    "prefix": "/api/v1" if version == "v1" else f"/apis/{version}",
                    "plural": r["name"],
                    "namespaced": r["namespaced"],
                    "kind": r["kind"],
                    "apiVersion": version,
                }
                names = [r["name"], r.get("singularName") or r["kind"].lower()]
                names += r.get("shortNames", []) + [f"{n}.{group}" for n in names if group]
                for n in names:
                    found.setdefault(n, resource)
        return found

    def install_crds(self, folder: Path | str = REPO / "crds", timeout: float = 60) -> None:
        """Apply the CRDs in `folder` and wait until each is Established. Polled, not `kubectl wait
        --for=condition=Established`: that exits at once with ".status.conditions accessor error" when
        it reads a CRD the API server has not given conditions yet (it failed this suite's fixtures
        that way; kubernetes/kubernetes#113159, knative/operator#2338)."""
        applied = self.kubectl("apply", "--server-side", "-o", "name", "-f", str(folder)).stdout.split()
        for name in applied:
            wait_for(
                lambda: (
                    self.kubectl(
                        "get", name, "-o", 'jsonpath={.status.conditions[?(@.type=="Established")].status}', check=False
                    ).stdout.strip()
                    == "True"
                ),
                timeout,
                f"{name} Established",
                interval=0.2,
            )

    def log_path(self, name: str) -> Path:
        return self.workdir / "logs" / f"{name}.log"

    @property
    def pods_dir(self) -> Path:
        """The node agent's work directory (its --workdir): each pod's volumes and work folders."""
        return self.workdir / "pods"

    @property
    def pod_logs(self) -> Path:
        """Where the node agent writes each container's log, `<namespace>_<pod>_<container>.log`."""
        return self.pods_dir / "logs"

    # ------------------------------------------------------------------ lifecycle
    def _spawn(self, name: str, argv: list[str], env: dict | None = None) -> Process:
        log = self.log_path(name)
        log.parent.mkdir(parents=True, exist_ok=True)
        handle = open(log, "ab")
        popen = subprocess.Popen(
            argv,
            stdout=handle,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env or os.environ.copy(),
            cwd=self.workdir,
            preexec_fn=_die_with_parent if self.die_with_parent else os.setsid,
        )
        handle.close()
        proc = Process(name, popen, log, argv, env)
        self.processes.append(proc)
        return proc

    # ------------------------------------------------------------------ faults
    def stop_process(self, name: str) -> None:
        """Stop one component (e.g. `versitygw`, `kube-apiserver`) as an outage would, keeping its data."""
        proc = next(p for p in self.processes if p.name == name)
        try:
            os.killpg(proc.popen.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.popen.wait()

    def start_process(self, name: str) -> None:
        """Start a stopped component again, same command, port and data; wait until it answers, and
        after the API server or the controller-manager, until the controller-manager acts again
        (`wait_controllers_act`): the cluster is handed back as the next test expects it."""
        index, proc = next((i, p) for i, p in enumerate(self.processes) if p.name == name)
        assert proc.popen.poll() is not None, f"{name} is still running"
        self.processes.pop(index)
        self._spawn(name, proc.argv, proc.env)
        if name == "versitygw":

            def s3_up():
                with socket.create_connection(("127.0.0.1", self.s3_port), timeout=1):
                    return True

            wait_for(s3_up, 30, "versitygw")
        elif name == "kube-apiserver":
            wait_for(
                lambda: self.kubectl("get", "--raw", "/readyz", check=False).returncode == 0,
                90,
                "kube-apiserver /readyz",
                0.2,
            )
        if name in ("kube-apiserver", "kube-controller-manager"):
            self.wait_controllers_act()

    def audit_events(self) -> list[dict]:
        """The API server's audit log (Job creations and deletions are recorded at Metadata level)."""
        path = self.workdir / "audit.log"
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

    def _check_alive(self) -> None:
        for proc in self.processes:
            if proc.popen.poll() is not None:
                tail = proc.log.read_text(errors="replace")[-3000:]
                raise RuntimeError(f"{proc.name} exited with {proc.popen.returncode}; log tail:\n{tail}")

    def start(self) -> LocalCluster:
        began = time.monotonic()
        self.binaries = self.binaries or bin_dir()
        pki = self._pki()
        try:
            self._start_etcd()
            self._start_apiserver(pki)
            self._write_kubeconfig(pki)
            self._start_controllers(pki)
            self._start_s3()
            self._start_node_agent()
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        self.timings["up_seconds"] = time.monotonic() - began
        return self

    def _pki(self) -> dict[str, Path]:
        """The cluster's certificates and keys: written afresh, or copied from ENGINEWRIGHT_PKI (a folder
        `python -m tests.cluster.pki DIR` wrote) on a machine without the `cryptography` package."""
        made = os.environ.get("ENGINEWRIGHT_PKI")
        if not made:
            from tests.cluster.pki import write_pki  # needs cryptography, only for a real cluster

            return write_pki(self.workdir / "pki")
        shutil.copytree(made, self.workdir / "pki", dirs_exist_ok=True)
        return {file.name: file for file in (self.workdir / "pki").iterdir()}

    def _start_etcd(self) -> None:
        client, peer = free_port(), free_port()
        self.etcd_url = f"http://127.0.0.1:{client}"
        self._spawn(
            "etcd",
            [
                str(self.binaries / "etcd"),
                "--name",
                "default",
                "--data-dir",
                str(self.workdir / "etcd"),
                "--listen-client-urls",
                self.etcd_url,
                "--advertise-client-urls",
                self.etcd_url,
                "--listen-peer-urls",
                f"http://127.0.0.1:{peer}",
                "--initial-advertise-peer-urls",
                f"http://127.0.0.1:{peer}",
                "--initial-cluster",
                f"default=http://127.0.0.1:{peer}",
                "--unsafe-no-fsync=true",
                "--log-level",
                "warn",
            ],
        )

        def healthy():
            self._check_alive()
            with urllib.request.urlopen(f"{self.etcd_url}/health", timeout=2) as resp:
                return json.load(resp).get("health") == "true"

        wait_for(healthy, 60, "etcd health")

    def _start_apiserver(self, pki: dict[str, Path]) -> None:
        self.api_port = free_port()
        self._spawn(
            "kube-apiserver",
            [
                str(self.binaries / "kube-apiserver"),
                f"--etcd-servers={self.etcd_url}",
                f"--cert-dir={self.workdir / 'apiserver-certs'}",
                f"--secure-port={self.api_port}",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                f"--tls-cert-file={pki['apiserver.crt']}",
                f"--tls-private-key-file={pki['apiserver.key']}",
                f"--client-ca-file={pki['ca.crt']}",
                "--authorization-mode=Node,RBAC",
                # as OpenShift and hardened clusters run: setting blockOwnerDeletion on a child's
                # ownerReference needs `update` on its owner's finalizers subresource
                "--enable-admission-plugins=OwnerReferencesPermissionEnforcement",
                "--service-cluster-ip-range=10.0.0.0/24",
                "--allow-privileged=true",
                f"--service-account-issuer=https://127.0.0.1:{self.api_port}",
                f"--service-account-key-file={pki['sa.pub']}",
                f"--service-account-signing-key-file={pki['sa.key']}",
                "--endpoint-reconciler-type=none",
                f"--audit-policy-file={self._audit_policy()}",
                f"--audit-log-path={self.workdir / 'audit.log'}",
                "--audit-log-maxsize=100",
                "--v=1",
            ],
        )

    def _audit_policy(self) -> Path:
        """Record who created or deleted Jobs and Pods (tests count Job creations from it)."""
        path = self.workdir / "audit-policy.yaml"
        path.write_text(
            json.dumps(
                {
                    "apiVersion": "audit.k8s.io/v1",
                    "kind": "Policy",
                    "omitStages": ["RequestReceived"],
                    "rules": [{"level": "Metadata"}]
                    if self.audit_everything
                    else [
                        {
                            "level": "Metadata",
                            "verbs": ["create", "delete"],
                            "resources": [
                                {"group": "batch", "resources": ["jobs"]},
                                {"group": "", "resources": ["pods"]},
                            ],
                        },
                        {"level": "None"},
                    ],
                }
            )
        )
        return path

    def _write_kubeconfig(self, pki: dict[str, Path]) -> None:
        self.kubeconfig.write_text(
            json.dumps(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "clusters": [
                        {
                            "name": "local",
                            "cluster": {
                                "server": f"https://127.0.0.1:{self.api_port}",
                                "certificate-authority": str(pki["ca.crt"]),
                            },
                        }
                    ],
                    "users": [
                        {
                            "name": "admin",
                            "user": {"client-certificate": str(pki["admin.crt"]), "client-key": str(pki["admin.key"])},
                        }
                    ],
                    "contexts": [
                        {"name": "local", "context": {"cluster": "local", "user": "admin", "namespace": "default"}}
                    ],
                    "current-context": "local",
                },
                indent=2,
            )
        )
        self._reader.clear()  # a new kubeconfig: its certificates, and discovery read again

        def ready():
            self._check_alive()
            url = f"https://127.0.0.1:{self.api_port}/readyz"
            with urllib.request.urlopen(url, context=self._admin_tls(), timeout=2) as resp:
                return resp.status == 200

        wait_for(ready, 90, "kube-apiserver /readyz")

    def _start_controllers(self, pki: dict[str, Path]) -> None:
        self._spawn(
            "kube-controller-manager",
            [
                str(self.binaries / "kube-controller-manager"),
                f"--kubeconfig={self.kubeconfig}",
                "--leader-elect=false",
                f"--service-account-private-key-file={pki['sa.key']}",
                f"--root-ca-file={pki['ca.crt']}",
                "--use-service-account-credentials=true",
                "--controllers=*",
                "--bind-address=127.0.0.1",
                f"--secure-port={free_port()}",
                f"--cert-dir={self.workdir / 'kcm-certs'}",
                "--concurrent-gc-syncs=5",
                "--v=1",
            ],
        )
        self._spawn(
            "kube-scheduler",
            [
                str(self.binaries / "kube-scheduler"),
                f"--kubeconfig={self.kubeconfig}",
                "--leader-elect=false",
                "--bind-address=127.0.0.1",
                f"--secure-port={free_port()}",
                f"--cert-dir={self.workdir / 'scheduler-certs'}",
                "--v=1",
            ],
        )

    def _start_s3(self) -> None:
        self.s3_port = free_port()
        root = self.workdir / "s3"
        root.mkdir(exist_ok=True)
        self._spawn(
            "versitygw",
            [
                str(self.binaries / "versitygw"),
                "--access",
                S3_ACCESS_KEY,
                "--secret",
                S3_SECRET_KEY,
                "--port",
                f"127.0.0.1:{self.s3_port}",
                "posix",
                str(root),
            ],
        )

    def _start_node_agent(self) -> None:
        nodes = self.workdir / "nodes.json"
        nodes.write_text(json.dumps(self.nodes))
        env = self.env
        env["PYTHONPATH"] = os.pathsep.join([str(REPO), str(REPO / "operator"), env.get("PYTHONPATH", "")])
        self._spawn(
            "node-agent",
            [
                sys.executable,
                "-m",
                "tests.cluster.node_agent",
                "--kubeconfig",
                str(self.kubeconfig),
                "--nodes",
                str(nodes),
                "--workdir",
                str(self.pods_dir),
                *self.node_agent_args(),
            ],
            env=env,
        )

    def node_agent_args(self) -> list[str]:
        """Extra arguments of the node agent (an image store, for example)."""
        return []

    def _wait_ready(self) -> None:
        def nodes_ready():
            self._check_alive()
            items = self.get("nodes")["items"]
            ready = [
                n
                for n in items
                if any(
                    c["type"] == "Ready" and c["status"] == "True" for c in n.get("status", {}).get("conditions", [])
                )
            ]
            return len(ready) == len(self.nodes)

        wait_for(nodes_ready, 60, "nodes Ready", interval=0.3)

        def default_service_account():
            self._check_alive()
            return self.get("serviceaccount", "default", "default")

        wait_for(default_service_account, 60, "the default ServiceAccount (controller-manager)", interval=0.3)

        def s3_up():
            with socket.create_connection(("127.0.0.1", self.s3_port), timeout=1):
                return True

        wait_for(s3_up, 30, "versitygw")

    def stop(self) -> None:
        """Stop everything (node agent first, etcd last); kill whatever does not exit in time."""
        for proc in reversed(self.processes):
            if proc.popen.poll() is None:
                try:
                    os.killpg(proc.popen.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + 10
        for proc in reversed(self.processes):
            try:
                proc.popen.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
            try:
                os.killpg(proc.popen.pid, signal.SIGKILL)  # also reaps any pod processes left in the group
            except ProcessLookupError:
                pass
            proc.popen.wait()
        self.processes.clear()

    def remove(self) -> None:
        """Delete the work directory (private keys, etcd data, S3 objects, logs); call after stop().
        Raises when something is left, so a caller never reports a removal that did not happen."""
        shutil.rmtree(self.workdir, ignore_errors=True)
        if self.workdir.exists():
            shutil.rmtree(self.workdir)  # again, to raise the error that left something behind

    def state(self) -> dict:
        return {
            "workdir": str(self.workdir),
            "kubeconfig": str(self.kubeconfig),
            "s3_endpoint": self.s3_endpoint,
            "binaries": str(self.binaries),
            "pgids": {p.name: p.popen.pid for p in self.processes},
        }
