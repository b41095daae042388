"""The node agent's heartbeat goes on when the API server accepts a request and never answers it: each
renewal is bounded, as the kubelet's heartbeat client is. Before, one such request held the heartbeat
thread for good, the nodes' leases lapsed, the controller-manager tainted them not-ready and no new
pod was scheduled. The API server here is a socket that accepts and says nothing (a real one does
that when it is stopped, not killed): no cluster is needed to show the loop going on."""

import logging
import socket
import threading

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


def gave_up(caplog) -> list[str]:
    return [r.getMessage() for r in list(caplog.records) if r.getMessage().startswith("heartbeat of cpu-0")]
