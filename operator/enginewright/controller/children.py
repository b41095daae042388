"""A run's child objects (its Jobs, its cache and plan ConfigMaps): the run they belong to, their
deterministic names and labels, and whether one found under a name is the run's to adopt. Pure.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from enginewright.api.names import (
    API_VERSION,
    KIND,
    LABEL_BATCH,
    LABEL_COMPONENT,
    LABEL_MANAGED_BY,
    LABEL_RUN,
    LABEL_STAGE,
    LABEL_TARGET,
    MANAGED_BY,
)


@dataclass(frozen=True)
class RunRef:
    """The TuningRun a child object belongs to."""

    name: str
    namespace: str
    uid: str

    def owner_reference(self) -> dict:
        return controller_reference(KIND, self.name, self.uid)


def controller_reference(kind: str, name: str, uid: str) -> dict:
    """The ownerReference that makes an object of this group (`kind`, `name`, `uid`) the controlling
    owner of a child: the garbage collector removes the child after it."""
    return {
        "apiVersion": API_VERSION,
        "kind": kind,
        "name": name,
        "uid": uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def slug(text: str) -> str:
    """Lower-case DNS-label characters: NVIDIA-H200 -> nvidia-h200."""
    return re.sub(r"-+", "-", re.sub(r"[^a-z0-9-]", "-", text.lower())).strip("-") or "x"


def child_name(*parts: str, limit: int = 63) -> str:
    """`part-part-...` as a DNS label of at most `limit` characters; too long -> cut + 8-hex hash."""
    name = "-".join(slug(p) for p in parts)
    if len(name) <= limit:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:8]
    return f"{name[: limit - 9].rstrip('-')}-{digest}"


def label_value(text: str) -> str:
    return text if len(text) <= 63 else child_name(text)


def labels(
    run: RunRef,
    target: str | None = None,
    stage: str | None = None,
    batch: str | None = None,
    component: str = "worker",
) -> dict[str, str]:
    out = {LABEL_RUN: label_value(run.name), LABEL_COMPONENT: component, LABEL_MANAGED_BY: MANAGED_BY}
    if target is not None:
        out[LABEL_TARGET] = slug(target)
    if stage is not None:
        out[LABEL_STAGE] = stage
    if batch is not None:
        out[LABEL_BATCH] = label_value(batch)
    return out


def selector(run: RunRef, target: str | None = None, component: str = "worker") -> str:
    """Label selector of a run's children (of one target when given), from the labels they carry."""
    wanted = labels(run, target, component=component)
    wanted.pop(LABEL_MANAGED_BY)
    return ",".join(f"{k}={v}" for k, v in wanted.items())


def is_ours(metadata: dict, run: RunRef, wanted_labels: dict[str, str]) -> bool:
    """Whether a child object (plain-dict metadata) is this run's to adopt: it names the run as its
    controlling owner (by uid) and carries the labels the operator gives it. Anything else of the same
    name is someone else's and is never replaced."""
    owned = any(o.get("uid") == run.uid and o.get("controller") for o in metadata.get("ownerReferences") or [])
    have = metadata.get("labels") or {}
    return owned and all(have.get(k) == v for k, v in wanted_labels.items())


def owner_uid(metadata: dict) -> str | None:
    """The uid of a child object's controlling owner."""
    return next((o.get("uid") for o in metadata.get("ownerReferences") or [] if o.get("controller")), None)


def left_by_a_deleted_run(metadata: dict, run: RunRef, wanted_labels: dict[str, str]) -> bool:
    """Whether a child object (plain-dict metadata) of this run's name is the child of an earlier
    TuningRun of the same name, since deleted (GitOps deletes a run and applies it again): its
    controlling owner is a TuningRun of this name with another uid, and it carries the labels the
    operator gives this run's child. Names are unique in a namespace, so that owner is gone and the
    garbage collector removes the object on its own (after `kubectl delete`'s default background
    propagation, up to tens of seconds after the owner): instead of stalling, the run adopts such a
    ConfigMap and waits for such a Job (a Job cannot be adopted: its batch request is the old run's)."""
    have = metadata.get("labels") or {}
    return any(
        o.get("controller")
        and o.get("apiVersion") == API_VERSION
        and o.get("kind") == KIND
        and o.get("name") == run.name
        and o.get("uid") != run.uid
        for o in metadata.get("ownerReferences") or []
    ) and all(have.get(k) == v for k, v in wanted_labels.items())
