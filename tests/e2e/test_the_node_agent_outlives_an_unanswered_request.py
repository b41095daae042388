"""The node agent goes on when the API server accepts a request and never answers it. Its heartbeat:
each renewal is bounded, as the kubelet's heartbeat client is (before, one such request held the
heartbeat thread for good, the nodes' leases lapsed, the controller-manager tainted them not-ready
and no new pod was scheduled). A pod's requests: one left unanswered is given up and, as a request
that found the API server away, tried again until the pod is deleted (before, a deleted pod's
Failed report could wait for good, and its Job never made the next pod). The API server here is a
socket that accepts and says nothing (a real one does that when it is stopped, not killed): no
cluster is needed to show either going on."""

import logging
import socket
import threading
import types

from kubernetes import client

from tests.cluster import node_agent
from tests.cluster.harness import wait_for


class Silent:
    """A TCP listener that accepts every connection and never writes a byte, keeping them open."""

    def __init__(self):
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.accepted: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self.listener.accept()
            except OSError:  # closed
                return
            self.accepted.append(connection)

    def close(self) -> None:
        self.listener.close()
        for connection in self.accepted:
            connection.close()


def test_the_heartbeat_renews_again_after_a_request_that_was_never_answered(monkeypatch, tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="node-agent")
    monkeypatch.setattr(node_agent, "HEARTBEAT_SECONDS", 0.5)
    silent = Silent()
    configuration = client.Configuration()
    configuration.host = f"https://127.0.0.1:{silent.port}"
    configuration.verify_ssl = False
    api = client.ApiClient(configuration)
    agent = node_agent.Agent([{"name": "cpu-0"}], tmp_path)
    agent.core, agent.coordination = client.CoreV1Api(api), client.CoordinationV1Api(api)
    beating = threading.Thread(target=agent.heartbeat_forever, daemon=True)
    beating.start()
    try:
        # A beat that gave up says so and the loop goes on: two said mean the second beat was tried.
        wait_for(lambda: len(gave_up(caplog)) >= 2, 20, "two heartbeats that gave up", 0.1)
    finally:
        agent.stop.set()
        silent.close()
    beating.join(timeout=10)
    assert not beating.is_alive()
    assert "timed out" in gave_up(caplog)[0], gave_up(caplog)


def test_a_pods_request_left_unanswered_is_given_up_and_tried_again_until_the_pod_is_deleted(
    monkeypatch, tmp_path, caplog
):
    caplog.set_level(logging.WARNING, logger="node-agent")
    monkeypatch.setattr(node_agent, "REQUEST_SECONDS", 0.5, raising=False)
    silent = Silent()
    configuration = client.Configuration()
    configuration.host = f"https://127.0.0.1:{silent.port}"
    configuration.verify_ssl = False
    agent = node_agent.Agent([{"name": "cpu-0"}], tmp_path)
    deleted = threading.Event()
    runner = types.SimpleNamespace(name="pod-t/p", agent=agent)
    patient = node_agent.PatientApi(client.CoreV1Api(client.ApiClient(configuration)), runner, until=deleted)
    outcome: list[BaseException] = []

    def report():
        try:
            patient.patch_namespaced_pod_status("p", "t", {"status": {"phase": "Failed"}})
        except BaseException as exc:
            outcome.append(exc)

    reporting = threading.Thread(target=report, daemon=True)
    reporting.start()
    try:
        wait_for(lambda: len(tried_again(caplog)) >= 2, 20, "the report tried again twice", 0.1)
        deleted.set()
        reporting.join(timeout=10)
    finally:
        silent.close()
    assert not reporting.is_alive()
    assert outcome and "timed out" in str(outcome[0]), outcome


def tried_again(caplog) -> list[str]:
    return [r.getMessage() for r in list(caplog.records) if "the API server is away" in r.getMessage()]


def gave_up(caplog) -> list[str]:
    return [r.getMessage() for r in list(caplog.records) if r.getMessage().startswith("heartbeat of cpu-0")]
