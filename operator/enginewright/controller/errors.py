"""What a reconcile pass raises, and how the answers of the API server and the store are told apart.

`Problem` is the user's to fix (the run is Stalled with its reason); `StoreUnavailable` is the store
being away (the pass is retried); `Waiting` is something the cluster clears by itself (the run stays
Reconciling with its reason, the pass is retried); `PublishError` and `PublishRefused` (`catalog.writer`) are
what publishing says before it becomes a Problem; anything else the store or the API server answered passes through.
"""

from __future__ import annotations

import json
from contextlib import contextmanager

from enginewright.catalog.writer import PublishError, PublishRefused
from enginewright.store.objects import MissingObject


class Problem(Exception):
    """Something the user must fix; `reason` becomes the Stalled condition's reason."""

    def __init__(self, reason: str, message: str):
        super().__init__(message)
        self.reason, self.message = reason, message


class Waiting(Exception):
    """Something the cluster clears by itself, not the user's to fix: the run stays Reconciling with
    `reason`, and a later pass tries again."""

    def __init__(self, reason: str, message: str):
        super().__init__(message)
        self.reason, self.message = reason, message


class StoreUnavailable(Exception):
    """The object store did not answer; the pass is retried."""


def api_exception():
    """kubernetes' ApiException (imported when first needed: the pure modules do not need kubernetes)."""
    from kubernetes.client.exceptions import ApiException

    return ApiException


def api_reason(exc) -> str:
    """The API server's message of an ApiException."""
    try:
        return json.loads(exc.body).get("message") or str(exc.reason)
    except (TypeError, ValueError):
        return str(exc.reason)


@contextmanager
def store_errors():
    """Connection refused, timeouts, broken responses: the store is away, the pass is retried
    (StoreUnavailable). What the store itself answered (S3Error, a missing object, a digest that
    does not match, a publication refused) passes through to the caller."""
    try:
        yield
    except (MissingObject, PublishError, PublishRefused):
        raise
    except Exception as exc:
        if type(exc).__name__ == "S3Error":
            raise
        raise StoreUnavailable(f"{type(exc).__name__}: {exc}") from None
