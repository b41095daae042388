"""A pass runs in a thread; a run deleted meanwhile answers its writes with 404 (its status patch,
a ConfigMap the garbage collector removed). That is the deletion winning a race, not a handler error:
the pass ends quietly (kopf would log a traceback for an exception). Any other refusal still raises."""

import pytest
from kubernetes.client.exceptions import ApiException

from enginewright.controller import handlers


class Refusing:
    def __init__(self, status):
        self.status = status

    def reconcile(self, body, emit):
        raise ApiException(status=self.status, reason="Not Found" if self.status == 404 else "Unprocessable")


@pytest.fixture
def reconciler(monkeypatch):
    def use(status):
        monkeypatch.setattr(handlers, "_reconciler", Refusing(status))

    return use


BODY = {"metadata": {"name": "r", "namespace": "n", "uid": "u"}, "spec": {}, "status": {"phase": "Running"}}


def test_a_404_during_the_pass_ends_it_quietly(reconciler):
    reconciler(404)
    assert handlers.reconcile_once(BODY, None, "n/r") == ({"phase": "Running"}, False)


def test_other_refusals_still_raise(reconciler):
    reconciler(422)
    with pytest.raises(ApiException):
        handlers.reconcile_once(BODY, None, "n/r")
