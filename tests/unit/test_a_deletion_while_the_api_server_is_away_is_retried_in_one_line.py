"""A deleted run's handler stops its Jobs. When the API server is away (restarting), the real client's
request is refused: that is kopf's TemporaryError, retried with the finalizer kept and logged in one
line, not an exception kopf logs with a traceback. CI's API-server-restart fault test failed on that
traceback: a run of an earlier test, deleted with its namespace, was being stopped during the outage.
A refusal that is not transient (403 here) still raises as it is."""

import socket

import kopf
import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from enginewright.controller import handlers
from enginewright.controller.jobs import WorkerJobs

BODY = {"metadata": {"name": "r", "namespace": "n", "uid": "u"}, "status": {"targets": [{"gpuType": "h200"}]}}


class Logger:
    def __init__(self):
        self.lines = []

    def info(self, message):
        self.lines.append(message)


def closed_port() -> int:
    """A port nothing listens on, as an API server's is while it restarts."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Reconciling:
    def __init__(self, jobs):
        self.jobs = jobs


def test_a_refused_connection_is_a_temporary_error(monkeypatch):
    configuration = client.Configuration()
    configuration.host = f"https://127.0.0.1:{closed_port()}"
    configuration.verify_ssl = False
    configuration.retries = 0
    batch = client.BatchV1Api(client.ApiClient(configuration))
    monkeypatch.setattr(handlers, "_reconciler", Reconciling(WorkerJobs(handlers.SETTINGS, batch, None, None)))
    logger = Logger()
    with pytest.raises(kopf.TemporaryError) as raised:
        handlers.stop(body=BODY, logger=logger)
    assert "waiting for the API server" in str(raised.value)
    assert "Connection refused" in str(raised.value)  # the reason, not the URL of the request
    assert raised.value.delay == 5
    assert logger.lines == []  # nothing said stopped


class Forbidding:
    def list_namespaced_job(self, namespace, label_selector):
        raise ApiException(status=403, reason="Forbidden")


def test_a_refusal_that_is_not_transient_still_raises(monkeypatch):
    monkeypatch.setattr(handlers, "_reconciler", Reconciling(WorkerJobs(handlers.SETTINGS, Forbidding(), None, None)))
    with pytest.raises(ApiException):
        handlers.stop(body=BODY, logger=Logger())
