"""A node agent for tests and the demo: it stands in for the kubelet and the container runtime only.

It registers Node objects (labels, taints, cpu/memory/pods/nvidia.com/gpu capacity), keeps them
Ready through node leases and status heartbeats, and runs the containers of pods that the real
kube-scheduler binds to its nodes, in one of two modes chosen when the agent starts:

- host-process mode (the default; what the e2e and operator tests use): command + args are run as
  local processes as given, the image is not used (a container without `command` fails with a
  clear reason), and a volume's mountPath is rewritten to its local dir (below);
- image mode (`--images DIR` or `$ENGINEWRIGHT_NODE_IMAGES`, an OCI layout from images/build.sh):
  every container runs from its image, as a kubelet would: the image is unpacked to a rootfs, the
  command (or the image's entrypoint) runs under `unshare` + overlay + `chroot` as the container's
  user (securityContext, else the image's USER), volumes bind-mounted at their mountPaths, the root
  read-only when readOnlyRootFilesystem says so, KUBERNETES_SERVICE_HOST/PORT pointing at the API
  server and the ServiceAccount token projected (tests/cluster/images.py). An image that is not in
  the store leaves the pod Pending with the container waiting in `ErrImagePull` and a message
  naming the image, re-checked every few seconds (a kubelet's image pull back-off). No fallback to
  host processes: a test that asks for images gets images or a clear failure;

in both modes env from value, secretKeyRef, configMapKeyRef, fieldRef, envFrom are resolved;
- a ConfigMap or Secret (or key) that a volume or the env needs and that is not there (yet) holds
  the pod Pending, retried until it appears, as the kubelet does: the container waits in
  `ContainerCreating` ("MountVolume.SetUp failed: ...") for a volume, in
  `CreateContainerConfigError` for the env; an `optional` one that is missing is left out;
- emptyDir volumes are per-pod temp dirs (secret, configMap and projected volumes are written
  there too); in host-process mode a volume's mountPath is rewritten to that dir wherever it
  appears in command, args, env values and workingDir (no mount namespaces needed);
- init containers run first, in order; then the containers, side by side;
- restartPolicy Never / OnFailure / Always is honoured; status (phase, conditions, container
  states with exit codes) is written to the pod's status subresource;
- deleting a pod kills its processes (SIGTERM, then SIGKILL after the grace period) and the agent
  then removes the pod object, as the kubelet does;
- each container's output goes to <workdir>/logs/<namespace>_<pod>_<container>.log; with
  `terminationMessagePolicy: FallbackToLogsOnError`, a failed container's log tail is its message.

    python -m tests.cluster.node_agent --kubeconfig K --nodes nodes.json --workdir DIR [--images OCI_DIR]
"""

from __future__ import annotations

import argparse
import base64
import ctypes
import datetime
import json
import logging
import os
import queue
import re
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path

import urllib3
from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException

from tests.cluster.images import ImageStore, container_argv, parse_user

log = logging.getLogger("node-agent")
LEASE_SECONDS = 40
# A pod's request (its status, a ConfigMap it names, its final delete) waits this long for an answer:
# past the API server's own 60 s request timeout, so only a request it accepted and will never answer
# (a stopped server, a connection lost without a reset) runs into it, and is then tried again.
REQUEST_SECONDS = 70
HEARTBEAT_SECONDS = 10


def now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def now_micro() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc)


class Spawner:
    """Starts pod processes from the main thread: PR_SET_PDEATHSIG is tied to the creating thread,
    so children made from a short-lived thread would be killed when that thread ends."""

    def __init__(self):
        self.requests: queue.Queue = queue.Queue()

    def spawn(self, **popen_kwargs) -> subprocess.Popen:
        reply: queue.Queue = queue.Queue()
        self.requests.put((popen_kwargs, reply))
        result = reply.get()
        if isinstance(result, BaseException):
            raise result
        return result

    def serve_forever(self, stop: threading.Event) -> None:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)

        def child_setup():
            os.setpgid(0, 0)  # own group: a pod's whole process tree can be signalled
            libc.prctl(1, signal.SIGKILL)  # and it dies with the agent

        while not stop.is_set():
            try:
                kwargs, reply = self.requests.get(timeout=0.5)
            except queue.Empty:
                continue
            try:
                reply.put(subprocess.Popen(preexec_fn=child_setup, **kwargs))
            except BaseException as exc:  # reported to the pod, not fatal to the agent
                reply.put(exc)


class NotThereYet(Exception):
    """A ConfigMap or Secret (or a key of one) that a pod needs and that is not there (yet). The
    kubelet keeps such a pod waiting and tries again until it appears or the pod is deleted:
    FailedMount (the container `ContainerCreating`) for a volume, `CreateContainerConfigError` for
    the environment. Before, the agent failed the pod for good: a pod created in a fresh namespace
    before the controller-manager had published its `kube-root-ca.crt`, which the ServiceAccount
    admission projects into every pod, would fail so. CI once saw test_node_agent_pod_environment's
    pod Failed without its cause printed; this is one way that can happen, not shown to be it."""


def api_server_away(exc: Exception) -> bool:
    """The API server did not answer (refused, reset, timed out) or is not ready yet (429, 5xx): it is
    restarting, and the same request can succeed later."""
    if isinstance(exc, ApiException):
        return exc.status in (0, 429) or exc.status >= 500
    return isinstance(exc, (urllib3.exceptions.HTTPError, OSError))


class PatientApi:
    """The agent's CoreV1Api as one pod's runner uses it: a request that finds the API server away is
    retried (back-off up to 5 s) until it is answered, the pod is deleted or the agent stops, as the
    kubelet retries its pod syncs and status updates. A request left unanswered for REQUEST_SECONDS
    counts as away (the kubelet's HTTP/2 connections are health-checked; these are not). Before, the
    first such request raised out of the runner's thread: a pod being started (its Pending report, its
    secretKeyRef reads) or ending (its Succeeded/Failed report) while kube-apiserver restarted was never
    run or never reported, and its Job stayed active for good
    (tests/faults/test_api_server_restart_mid_run.py, 300 s at 0/3)."""

    def __init__(self, api, runner: "PodRunner", until: threading.Event | None = None):
        """`until`: the event that ends the retries (besides the agent's stop), the pod's deletion by
        default. The requests that end a deleted pod (its Failed report, its final delete) pass the
        agent's stop, so they are retried after the deletion too, as the kubelet's are: before, a
        deleted pod whose Failed report found the API server away stayed Running with its deletion
        pending, and a Job (whose pod failure policy replaces a pod only once it is Failed) never made
        its next pod. One way CI's test_deleted_worker_pod_resumes can have waited 300 s at 2 of 6
        routes with its Job active (not shown to be it: CI kept no pod states then; tests/conftest.py
        prints them now)."""
        self._api, self._runner = api, runner
        self._until = runner.deleted if until is None else until

    def __getattr__(self, name: str):
        call = getattr(self._api, name)

        def patient(*args, **kwargs):
            kwargs.setdefault("_request_timeout", REQUEST_SECONDS)
            delay = 0.5
            while True:
                try:
                    return call(*args, **kwargs)
                except Exception as exc:
                    runner = self._runner
                    if not api_server_away(exc) or self._until.is_set() or runner.agent.stop.is_set():
                        raise
                    log.warning(
                        "%s for %s: the API server is away (%s); again in %.1fs",
                        name,
                        runner.name,
                        type(exc).__name__,
                        delay,
                    )
                    self._until.wait(delay)
                    delay = min(2 * delay, 5.0)

        return patient


class PodRunner(threading.Thread):
    """Runs one pod's containers and reports its status until it ends or is deleted."""

    def __init__(self, agent: "Agent", pod):
        super().__init__(daemon=True, name=f"pod-{pod.metadata.namespace}/{pod.metadata.name}")
        self.agent, self.pod = agent, pod
        self.deleted = threading.Event()
        self.core = PatientApi(agent.core, self)
        self.current: subprocess.Popen | None = None
        self.processes: list[subprocess.Popen] = []
        self.lock = threading.Lock()
        self.statuses: dict[str, dict] = {}
        self.init_statuses: dict[str, dict] = {}
        self.started_at = now()
        self.image_ids: dict[str, str] = {}
        self.dir = agent.workdir / f"{pod.metadata.namespace}_{pod.metadata.name}_{pod.metadata.uid[:8]}"

    # ---------------------------------------------------------------- env and volumes
    def _volumes(self) -> dict[str, Path]:
        paths = {}
        for volume in self.pod.spec.volumes or []:
            path = self.dir / "volumes" / volume.name
            path.mkdir(parents=True, exist_ok=True)
            if volume.secret or volume.config_map:
                kind, ref = ("secret", volume.secret) if volume.secret else ("configmap", volume.config_map)
                name = ref.secret_name if kind == "secret" else ref.name
                data = self._source(kind, name, bool(ref.optional)) or {}
                self._write_items(data, ref.items, path, kind, name, bool(ref.optional))
            elif volume.projected:
                self._projected(volume.projected, path)
            if self.agent.images is not None:
                # The container runs as its own (non-root) user: as the kubelet does, emptyDirs are
                # world-writable and projected files world-readable on this test node.
                path.chmod(0o777 if volume.empty_dir is not None else 0o755)
                for child in path.rglob("*"):
                    child.chmod(0o755 if child.is_dir() else 0o644)
            paths[volume.name] = path
        return paths

    def _projected(self, projected, path: Path) -> None:
        """The sources the ServiceAccount admission plugin puts into kube-api-access-*: a bound token
        (TokenRequest), the cluster CA from a ConfigMap, the namespace from the downward API."""
        ns = self.pod.metadata.namespace
        for source in projected.sources or []:
            if source.service_account_token:
                token = source.service_account_token
                body = {
                    "spec": {
                        "audiences": [token.audience] if token.audience else None,
                        "expirationSeconds": token.expiration_seconds or 3607,
                        "boundObjectRef": {
                            "kind": "Pod",
                            "apiVersion": "v1",
                            "name": self.pod.metadata.name,
                            "uid": self.pod.metadata.uid,
                        },
                    }
                }
                issued = self.core.create_namespaced_service_account_token(
                    self.pod.spec.service_account_name or "default", ns, body
                )
                (path / token.path).write_text(issued.status.token)
            for kind, ref in (("configmap", source.config_map), ("secret", source.secret)):
                if ref is None:
                    continue
                data = self._source(kind, ref.name, bool(ref.optional)) or {}
                self._write_items(data, ref.items, path, kind, ref.name, bool(ref.optional))
            if source.downward_api:
                for item in source.downward_api.items or []:
                    if item.field_ref:
                        (path / item.path).write_text(self._field(item.field_ref.field_path))

    def _field(self, path: str) -> str:
        meta = self.pod.metadata
        simple = {
            "metadata.name": meta.name,
            "metadata.namespace": meta.namespace,
            "metadata.uid": meta.uid,
            "spec.nodeName": self.pod.spec.node_name,
            "spec.serviceAccountName": self.pod.spec.service_account_name,
            "status.podIP": "127.0.0.1",
            "status.hostIP": "127.0.0.1",
        }
        if path in simple:
            return simple[path] or ""
        match = re.fullmatch(r"metadata\.(labels|annotations)\['(.+)'\]", path)
        if match:
            return ((meta.labels if match.group(1) == "labels" else meta.annotations) or {}).get(match.group(2), "")
        raise ValueError(f"unsupported fieldRef {path!r}")

    def _source(self, kind: str, name: str, optional: bool) -> dict[str, bytes] | None:
        """The data of ConfigMap or Secret NAME in the pod's namespace, as bytes; None where it is not
        there and OPTIONAL; NotThereYet where it is not there and needed."""
        ns = self.pod.metadata.namespace
        try:
            if kind == "secret":
                data = self.core.read_namespaced_secret(name, ns).data or {}
                return {k: base64.b64decode(v) for k, v in data.items()}
            return {k: v.encode() for k, v in (self.core.read_namespaced_config_map(name, ns).data or {}).items()}
        except ApiException as exc:
            if exc.status != 404:
                raise ValueError(f"{kind} {ns}/{name} not readable: {exc.reason}") from exc
            if optional:
                return None
            raise NotThereYet(f'{kind} "{name}" not found') from exc

    def _key_ref(self, kind: str, name: str, key: str, optional: bool) -> str | None:
        data = self._source(kind, name, optional)
        if data is not None and key in data:
            return data[key].decode()
        if optional:
            return None
        raise NotThereYet(f"couldn't find key {key} in {kind} {self.pod.metadata.namespace}/{name}")

    def _write_items(self, data: dict[str, bytes], items, path: Path, kind: str, name: str, optional: bool) -> None:
        """A configMap or secret volume (or projected source): every key as a file, or the ITEMS named
        (key -> path); a named key that is not there is NotThereYet unless the source is optional."""
        for item in items or [client.V1KeyToPath(key=k, path=k) for k in data]:
            if item.key not in data:
                if optional:
                    continue
                raise NotThereYet(f"{kind} {name}: configured to use key {item.key} that is not there")
            (path / item.path).parent.mkdir(parents=True, exist_ok=True)
            (path / item.path).write_bytes(data[item.key])

    def _env(self, container, rewrite, image=None) -> dict[str, str]:
        if image is None:
            env = {
                "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                "HOME": str(self.dir),
                "HOSTNAME": self.pod.metadata.name,
                "PYTHONUNBUFFERED": "1",
            }
        else:  # what a container runtime starts from: the image's Env, then the kubelet's additions
            env = {
                "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                "HOME": "/",
                **image.env,
                "HOSTNAME": self.pod.metadata.name,
                "KUBERNETES_SERVICE_HOST": self.agent.api_host,
                "KUBERNETES_SERVICE_PORT": self.agent.api_port,
            }
        for source in container.env_from or []:
            for kind, ref in (("secret", source.secret_ref), ("configmap", source.config_map_ref)):
                if ref is not None:
                    data = self._source(kind, ref.name, bool(ref.optional)) or {}
                    env.update({(source.prefix or "") + k: v.decode() for k, v in data.items()})
        for var in container.env or []:
            value = var.value
            ref = var.value_from
            if ref is not None:
                if ref.secret_key_ref:
                    r = ref.secret_key_ref
                    value = self._key_ref("secret", r.name, r.key, bool(r.optional))
                elif ref.config_map_key_ref:
                    r = ref.config_map_key_ref
                    value = self._key_ref("configmap", r.name, r.key, bool(r.optional))
                elif ref.field_ref:
                    value = self._field(ref.field_ref.field_path)
                elif ref.resource_field_ref:
                    value = "0"
            if value is not None:
                env[var.name] = rewrite(_expand(value, env))
        return env

    # ---------------------------------------------------------------- running
    def _container_state(
        self, name: str, *, running=False, exit_code=None, reason=None, restarts=0, message=None, init=False
    ) -> None:
        if running:
            state = {"running": {"startedAt": now()}}
        elif exit_code is not None:
            state = {
                "terminated": {
                    "exitCode": exit_code,
                    "reason": reason or ("Completed" if exit_code == 0 else "Error"),
                    "finishedAt": now(),
                    "startedAt": self.started_at,
                    **({"message": message} if message else {}),
                }
            }
        else:
            state = {"waiting": {"reason": reason or "ContainerCreating", **({"message": message} if message else {})}}
        image = (
            next(
                (
                    c.image
                    for c in (self.pod.spec.init_containers if init else self.pod.spec.containers) or []
                    if c.name == name
                ),
                "",
            )
            or "local-process"
        )
        target = self.init_statuses if init else self.statuses
        target[name] = {
            "name": name,
            "state": state,
            "ready": running,
            "restartCount": restarts,
            "image": image,
            "imageID": self.image_ids.get(name, ""),
            "started": running,
        }

    def _report(self, phase: str, reason: str | None = None, message: str | None = None, core=None) -> None:
        running = phase == "Running"
        all_ready = running and all(s["ready"] for s in self.statuses.values())
        conditions = [
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": self.started_at},
            {"type": "Initialized", "status": "True" if phase != "Pending" else "False", "lastTransitionTime": now()},
            {"type": "ContainersReady", "status": "True" if all_ready else "False", "lastTransitionTime": now()},
            {"type": "Ready", "status": "True" if all_ready else "False", "lastTransitionTime": now()},
        ]
        status = {
            "phase": phase,
            "conditions": conditions,
            "hostIP": "127.0.0.1",
            "podIP": "127.0.0.1",
            "podIPs": [{"ip": "127.0.0.1"}],
            "hostIPs": [{"ip": "127.0.0.1"}],
            "startTime": self.started_at,
            "containerStatuses": list(self.statuses.values()),
            "initContainerStatuses": list(self.init_statuses.values()),
        }
        if reason:
            status["reason"] = reason
        if message:
            status["message"] = message
        try:
            (core or self.core).patch_namespaced_pod_status(
                self.pod.metadata.name, self.pod.metadata.namespace, {"status": status}
            )
        except ApiException as exc:
            if exc.status != 404:
                log.warning("status of %s: %s", self.name, exc.reason)

    def _until_there(self, attempt, waiting):
        """ATTEMPT's result, tried again (back-off 0.5 s doubling to 5 s) while it raises NotThereYet,
        after WAITING(message) has said so in the pod's status; None when the pod is deleted first."""
        delay = 0.5
        while not self.deleted.is_set():
            try:
                return attempt()
            except NotThereYet as exc:
                waiting(str(exc))
                self.deleted.wait(delay)
                delay = min(2 * delay, 5.0)
        return None

    def _prepare(self, container, mounts: dict[str, Path]) -> tuple[list[str], dict[str, str], Path]:
        """argv, env and host cwd that run CONTAINER (NotThereYet while what its env names is not there)."""
        if self.agent.images is not None:
            return self._in_image(container, mounts)

        def rewrite(text: str) -> str:
            for mount_path, local in sorted(mounts.items(), key=lambda kv: -len(kv[0])):
                text = text.replace(mount_path, str(local))
            return text

        argv = [rewrite(a) for a in (container.command or []) + (container.args or [])]
        if not container.command:
            raise ValueError(
                f"container {container.name!r} has no command: this node agent runs commands "
                f"as local processes and cannot run image entrypoints (start it with --images "
                f"to run images)"
            )
        env = self._env(container, rewrite)
        argv = [_expand(a, env) for a in argv]
        cwd = Path(rewrite(container.working_dir)) if container.working_dir else self.dir / "work" / container.name
        cwd.mkdir(parents=True, exist_ok=True)
        return argv, env, cwd

    def _run_container(self, container, volumes, init: bool) -> int:
        """CONTAINER's exit code once it has ended for good (128 + SIGKILL where the pod was deleted
        while it waited for what its env names)."""
        mounts = {m.mount_path: volumes[m.name] for m in container.volume_mounts or [] if m.name in volumes}

        def config_error(message: str) -> None:
            self._container_state(container.name, reason="CreateContainerConfigError", message=message, init=init)
            running = any("running" in s["state"] for s in self.statuses.values())
            self._report("Running" if running else "Pending")

        prepared = self._until_there(lambda: self._prepare(container, mounts), config_error)
        if prepared is None:
            return 128 + signal.SIGKILL
        argv, env, cwd = prepared
        logfile = (
            self.agent.workdir / "logs" / f"{self.pod.metadata.namespace}_{self.pod.metadata.name}_{container.name}.log"
        )
        logfile.parent.mkdir(parents=True, exist_ok=True)
        restarts = 0
        policy = self.pod.spec.restart_policy or "Always"
        while True:
            with open(logfile, "ab") as out:
                logged_from = out.tell()
                proc = self.agent.spawner.spawn(
                    args=argv, env=env, cwd=str(cwd), stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
                )
            with self.lock:
                self.processes.append(proc)
            self._container_state(container.name, running=True, restarts=restarts, init=init)
            if not init:
                self._report("Running")
            code = proc.wait()
            with self.lock:
                self.processes.remove(proc)
            if self.deleted.is_set():
                return code
            self._container_state(
                container.name,
                exit_code=code,
                restarts=restarts,
                init=init,
                message=fallback_message(container, logfile, logged_from, code),
            )
            # An init container that succeeded is done, whatever the pod's policy (as the kubelet does);
            # a failed one is retried unless the policy is Never.
            retry = (
                (code != 0 and policy != "Never")
                if init
                else (policy == "Always") or (policy == "OnFailure" and code != 0)
            )
            if not retry:
                return code
            restarts += 1
            time.sleep(min(10, 0.5 * 2 ** min(restarts, 5)))  # crash-loop back-off, like the kubelet

    def _in_image(self, container, mounts: dict[str, Path]) -> tuple[list[str], dict[str, str], Path]:
        """argv (unshare + overlay + chroot), env and host cwd that run `container` from its image."""
        image = self.agent.images.image(container.image)
        self.image_ids[container.name] = image.digest
        # Kubernetes: command replaces the ENTRYPOINT, args the CMD; args alone keep the ENTRYPOINT.
        command = container.command or image.config.get("Entrypoint") or []
        args = container.args if (container.args or container.command) else (image.config.get("Cmd") or [])
        env = self._env(container, lambda text: text, image)
        argv = [_expand(a, env) for a in [*command, *(args or [])]]
        if not argv:
            raise ValueError(f"container {container.name!r}: neither it nor image {container.image} has a command")
        pod_sc, sc = self.pod.spec.security_context, container.security_context
        image_uid, image_gid = parse_user(image.user)
        uid = next((v for v in (sc and sc.run_as_user, pod_sc and pod_sc.run_as_user) if v is not None), image_uid)
        gid = next((v for v in (sc and sc.run_as_group, pod_sc and pod_sc.run_as_group) if v is not None), image_gid)
        non_root = next(
            (v for v in (sc and sc.run_as_non_root, pod_sc and pod_sc.run_as_non_root) if v is not None), False
        )
        if non_root and uid == 0:
            raise ValueError(
                f"container {container.name!r} has runAsNonRoot and image {container.image} will run "
                f"as root (CreateContainerConfigError)"
            )
        working_dir = container.working_dir or image.config.get("WorkingDir") or "/"
        read_only = bool(sc and sc.read_only_root_filesystem)
        box = self.dir / "containers" / container.name
        return (container_argv(image, box, argv, mounts, uid, gid, working_dir, read_only), env, box)

    def _wait_for_images(self) -> bool:
        """Image mode: hold the pod Pending with ErrImagePull until every image is in the store (as a
        kubelet retries a pull); False when the pod was deleted meanwhile."""
        containers = [*(self.pod.spec.init_containers or []), *self.pod.spec.containers]
        while not self.deleted.is_set():
            missing = [c for c in containers if not self.agent.images.has(c.image)]
            if not missing:
                return True
            for c in missing:
                message = (
                    f"image {c.image!r} is not in this node's local image store {self.agent.images.layout} "
                    f"(build it with `make images`)"
                )
                self._container_state(
                    c.name, reason="ErrImagePull", message=message, init=c in (self.pod.spec.init_containers or [])
                )
            self._report("Pending")
            self.deleted.wait(5)
        return False

    def run(self) -> None:
        self._report("Pending")
        try:
            if self.agent.images is not None and not self._wait_for_images():
                return
            inits = self.pod.spec.init_containers or []

            def mount_failed(message: str) -> None:
                for c in [*inits, *self.pod.spec.containers]:
                    self._container_state(
                        c.name,
                        reason="ContainerCreating",
                        message=f"MountVolume.SetUp failed: {message}",
                        init=c in inits,
                    )
                self._report("Pending")

            volumes = self._until_there(self._volumes, mount_failed)
            if volumes is None:
                return
            for container in inits:
                code = self._run_container(container, volumes, init=True)
                if self.deleted.is_set():
                    return
                if code != 0:
                    self._report("Failed", "InitContainerFailed", f"init container {container.name} exited {code}")
                    return
            for container in self.pod.spec.containers:
                self._container_state(container.name)
            results: dict[str, int] = {}
            errors: list[str] = []

            def run_one(c):
                try:
                    results[c.name] = self._run_container(c, volumes, init=False)
                except Exception as exc:
                    errors.append(str(exc))
                    self._container_state(c.name, exit_code=128, reason="StartError", message=str(exc))
                    results[c.name] = 128

            threads = [threading.Thread(target=run_one, args=(c,), daemon=True) for c in self.pod.spec.containers]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            if self.deleted.is_set():
                return
            failed = any(code != 0 for code in results.values())
            self._report(
                "Failed" if failed else "Succeeded", "Error" if failed else None, "; ".join(errors) if errors else None
            )
        except Exception as exc:
            log.exception("pod %s failed to start", self.name)
            for container in self.pod.spec.containers:
                self._container_state(container.name, exit_code=128, reason="StartError", message=str(exc))
            self._report("Failed", "StartError", str(exc))

    def kill(self, grace: float) -> None:
        """SIGTERM every process of the pod, SIGKILL what is left after `grace` seconds."""
        self.deleted.set()
        with self.lock:
            procs = list(self.processes)
        for proc in procs:
            _signal_group(proc, signal.SIGTERM)
        deadline = time.monotonic() + grace
        for proc in procs:
            try:
                proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
            _signal_group(proc, signal.SIGKILL)


def fallback_message(container, logfile: Path, offset: int, code: int) -> str | None:
    """The kubelet's `terminationMessagePolicy: FallbackToLogsOnError`: a container that failed gets the
    end of its log (at most 80 lines, 2048 bytes) as its terminated state's message. (The message file
    at terminationMessagePath is not read: in host-process mode it would be the host's.)"""
    if code == 0 or container.termination_message_policy != "FallbackToLogsOnError":
        return None
    with open(logfile, "rb") as log_file:
        log_file.seek(offset)
        tail = b"\n".join(log_file.read().splitlines()[-80:])[-2048:]
    return tail.decode(errors="replace") or None


def _signal_group(proc: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _expand(text: str, env: dict[str, str]) -> str:
    """Kubernetes $(VAR) expansion; $$(VAR) escapes."""
    return re.sub(
        r"\$\$\(|\$\(([A-Za-z_][A-Za-z0-9_]*)\)",
        lambda m: "$(" if m.group(0) == "$$(" else env.get(m.group(1), m.group(0)),
        text,
    )


class Agent:
    def __init__(self, nodes: list[dict], workdir: Path, images: ImageStore | None = None):
        self.images = images  # None: host-process mode
        host = client.Configuration.get_default_copy().host  # https://127.0.0.1:PORT
        self.api_host, _, self.api_port = host.split("://", 1)[-1].rpartition(":")
        self.nodes = nodes
        self.names = {n["name"] for n in nodes}
        self.workdir = workdir
        self.core = client.CoreV1Api()
        self.coordination = client.CoordinationV1Api()
        self.spawner = Spawner()
        self.pods: dict[str, PodRunner] = {}
        self.stop = threading.Event()

    # ---------------------------------------------------------------- nodes
    def register(self) -> None:
        for spec in self.nodes:
            capacity = {
                "cpu": str(spec.get("cpu", 16)),
                "memory": spec.get("memory", "64Gi"),
                "pods": str(spec.get("pods", 110)),
                "ephemeral-storage": "100Gi",
            }
            if spec.get("gpus"):
                capacity["nvidia.com/gpu"] = str(spec["gpus"])
            body = {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {
                    "name": spec["name"],
                    "labels": {
                        "kubernetes.io/hostname": spec["name"],
                        "kubernetes.io/os": "linux",
                        "kubernetes.io/arch": "amd64",
                        **spec.get("labels", {}),
                    },
                },
                "spec": {"taints": spec.get("taints", [])},
            }
            try:
                self.core.create_node(body)
            except ApiException as exc:
                if exc.status != 409:
                    raise
                self.core.patch_node(
                    spec["name"], {"metadata": {"labels": body["metadata"]["labels"]}, "spec": body["spec"]}
                )
            self._node_status(spec["name"], capacity)
            log.info("registered node %s %s", spec["name"], spec.get("labels"))

    def _node_status(self, name: str, capacity: dict | None = None) -> None:
        status = {
            "conditions": [
                {
                    "type": t,
                    "status": s,
                    "reason": r,
                    "message": m,
                    "lastHeartbeatTime": now(),
                    "lastTransitionTime": now(),
                }
                for t, s, r, m in [
                    ("Ready", "True", "KubeletReady", "enginewright node agent is posting ready status"),
                    ("MemoryPressure", "False", "KubeletHasSufficientMemory", ""),
                    ("DiskPressure", "False", "KubeletHasNoDiskPressure", ""),
                    ("PIDPressure", "False", "KubeletHasSufficientPID", ""),
                ]
            ],
            "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}, {"type": "Hostname", "address": name}],
            "nodeInfo": {
                "kubeletVersion": "v1.34.4",
                "kubeProxyVersion": "",
                "containerRuntimeVersion": "local-process://1",
                "operatingSystem": "linux",
                "architecture": "amd64",
                "osImage": "enginewright node agent",
                "kernelVersion": os.uname().release,
                "machineID": name,
                "systemUUID": name,
                "bootID": name,
            },
        }
        if capacity:
            status["capacity"] = capacity
            status["allocatable"] = capacity
        self.core.patch_node_status(name, {"status": status}, _request_timeout=HEARTBEAT_SECONDS)

    def heartbeat_forever(self) -> None:
        """Renew each node's lease and post its status every HEARTBEAT_SECONDS. Each request is bounded
        by HEARTBEAT_SECONDS, as the kubelet's heartbeat client is (its timeout: the status update
        frequency or the lease duration, the lesser): before, a request the API server accepted and
        never answered held this thread for good, the nodes' leases lapsed, the controller-manager
        tainted them not-ready, and no new pod was scheduled (one way a Job's next pod can wait for
        good; tests/e2e/test_the_node_agent_outlives_an_unanswered_request.py)."""
        specs = {n["name"]: n for n in self.nodes}
        while not self.stop.wait(HEARTBEAT_SECONDS):
            for name in specs:
                try:
                    self._renew_lease(name)
                    self._node_status(name)
                except Exception as exc:
                    log.warning("heartbeat of %s: %s", name, exc)

    def _renew_lease(self, name: str) -> None:
        body = {
            "metadata": {"name": name, "namespace": "kube-node-lease"},
            "spec": {
                "holderIdentity": name,
                "leaseDurationSeconds": LEASE_SECONDS,
                "renewTime": now_micro().strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
            },
        }
        try:
            self.coordination.patch_namespaced_lease(name, "kube-node-lease", body, _request_timeout=HEARTBEAT_SECONDS)
        except ApiException as exc:
            if exc.status != 404:
                raise
            self.coordination.create_namespaced_lease("kube-node-lease", body, _request_timeout=HEARTBEAT_SECONDS)

    # ---------------------------------------------------------------- pods
    def watch_pods_forever(self) -> None:
        while not self.stop.is_set():
            try:
                stream = watch.Watch().stream(
                    self.core.list_pod_for_all_namespaces, timeout_seconds=60, _request_timeout=90
                )
                for event in stream:
                    self._on_pod(event["type"], event["object"])
            except Exception as exc:
                if not self.stop.is_set():
                    log.warning("pod watch restarted: %s", exc)
                    time.sleep(1)

    def _on_pod(self, kind: str, pod) -> None:
        if pod.spec.node_name not in self.names:
            return
        key = pod.metadata.uid
        runner = self.pods.get(key)
        if kind == "DELETED" or pod.metadata.deletion_timestamp:
            if runner and not runner.deleted.is_set():
                grace = pod.metadata.deletion_grace_period_seconds
                threading.Thread(
                    target=self._delete, args=(pod, runner, 30 if grace is None else grace), daemon=True
                ).start()
            elif runner is None and kind != "DELETED":
                self._finalize_delete(pod)
            return
        if runner is None and pod.status.phase in (None, "Pending"):
            runner = PodRunner(self, pod)
            self.pods[key] = runner
            runner.start()

    def _delete(self, pod, runner: PodRunner, grace: float) -> None:
        runner.kill(grace)
        # As the kubelet does, a pod stopped by its deletion ends in a terminal phase before it is
        # removed: the Job controller (podReplacementPolicy Failed) replaces it only then. Both
        # requests ride out an API server that is away, until the agent stops.
        final = PatientApi(self.core, runner, until=self.stop)
        try:
            for container in runner.pod.spec.containers:
                runner._container_state(
                    container.name, exit_code=143, reason="Error", message="stopped by the pod's deletion"
                )
            runner._report("Failed", "Terminated", "the pod was deleted", core=final)
        except Exception as exc:  # the pod may already be gone
            log.warning("final status of %s: %s", pod.metadata.name, exc)
        self._finalize_delete(pod, final)

    def _finalize_delete(self, pod, core=None) -> None:
        try:
            (core or self.core).delete_namespaced_pod(
                pod.metadata.name,
                pod.metadata.namespace,
                body=client.V1DeleteOptions(grace_period_seconds=0, preconditions={"uid": pod.metadata.uid}),
                _request_timeout=REQUEST_SECONDS,  # called from the pod watch too: it must not hold it
            )
        except ApiException as exc:
            if exc.status not in (404, 409):
                log.warning("final delete of %s: %s", pod.metadata.name, exc.reason)

    def shutdown(self, *_):
        self.stop.set()
        for runner in list(self.pods.values()):
            runner.kill(2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--nodes", required=True, help="JSON file: [{name, labels, gpus, taints, cpu, memory}]")
    parser.add_argument("--workdir", required=True)
    parser.add_argument(
        "--images",
        default=os.environ.get("ENGINEWRIGHT_NODE_IMAGES") or None,
        help="OCI image layout (images/build.sh's $ENGINEWRIGHT_CACHE/images/oci): run every "
        "container from its image; without it, containers run as host processes",
    )
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    config.load_kube_config(args.kubeconfig)
    workdir = Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    agent = Agent(
        json.loads(Path(args.nodes).read_text()), workdir, ImageStore(Path(args.images)) if args.images else None
    )
    log.info("running containers %s", f"from the images in {args.images}" if args.images else "as host processes")
    signal.signal(signal.SIGTERM, lambda *_: agent.stop.set())
    signal.signal(signal.SIGINT, lambda *_: agent.stop.set())
    agent.register()
    for name in agent.names:
        agent._renew_lease(name)
    threading.Thread(target=agent.heartbeat_forever, daemon=True, name="heartbeat").start()
    threading.Thread(target=agent.watch_pods_forever, daemon=True, name="pod-watch").start()
    agent.spawner.serve_forever(agent.stop)
    agent.shutdown()
    shutil.rmtree(workdir / "tmp", ignore_errors=True)


if __name__ == "__main__":
    main()
