"""What a pass reads from the object store: an object not there yet is None, a store away is
StoreUnavailable (`errors.store_errors`), an object of the wrong shape is said as text."""

from __future__ import annotations

import json

from pydantic import ValidationError

from enginewright.controller.errors import store_errors
from enginewright.store.objects import MissingObject, S3Store


def list_keys(store: S3Store, prefix: str) -> list[str]:
    with store_errors():
        return list(store.list(prefix))


def read_json(store: S3Store, key: str) -> dict | None:
    """The JSON object at `key`; None when it is missing or not JSON."""
    with store_errors():
        try:
            return json.loads(store.get(key))
        except (MissingObject, json.JSONDecodeError):
            return None


def read_typed(store: S3Store, key: str, contract):
    """The object at `key` read as `contract` (api.contracts); None when it is not there yet, and
    the validation error as text when it is there but does not fit (a worker of another release)."""
    with store_errors():
        try:
            raw = store.get(key)
        except MissingObject:
            return None
    try:
        return contract.model_validate_json(raw)
    except ValidationError as exc:
        return f"{store.uri(key)} is not a {contract.__name__}: {str(exc).splitlines()[0:3]}"
