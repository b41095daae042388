"""A TuningPolicy's decisions, pure: from the stack observed for each target of its template and the
stack its current run was started for, whether to start a new TuningRun (and its deterministic name
and manifest), only record what was learned, wait, or do nothing; and the policy's status after.

The shell (`controller.policy_runs`) reads nodes and settings into these inputs, creates the run and
writes what these return. A decision depends only on what is observed now and what the status says,
so a check that runs twice, or after a restart, decides the same and names the same run."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

from enginewright.api.models import Target, TuningRunSpec
from enginewright.api.names import (
    API_VERSION,
    DRIVER_MAJOR_LABEL,
    GROUP,
    KIND,
    LABEL_MANAGED_BY,
    LABEL_POLICY,
    MANAGED_BY,
    POLICY_KIND,
)
from enginewright.api.policy import RUNS_KEPT, PolicyTargetStatus, Stack, Triggers
from enginewright.controller.children import child_name, controller_reference, label_value
from enginewright.controller.status import conditions

ANNOTATION_STACK = f"{GROUP}/stack"  # on a started run: the stack (JSON) it was started for
ANNOTATION_TRIGGER = f"{GROUP}/trigger"  # on a started run: why the policy started it

# Stack part -> (trigger field, the reason word when it changed).
PARTS = {
    "driver_major": ("driver_major", "DriverMajorChanged"),
    "compiler_image": ("compiler_version", "CompilerVersionChanged"),
    "model_digest": ("model_digest", "ModelDigestChanged"),
}


@dataclass(frozen=True)
class DriverReading:
    """What the nodes of one GPU type say about their driver: the major they all report (None when no
    node reports one: none exists yet, as in a pool scaled to zero, or GPU feature discovery has not
    labelled it), or, during a rolling driver upgrade, the majors that disagree."""

    major: str | None
    disagreeing: tuple[str, ...] = ()


def driver_reading(node_labels: Iterable[Mapping[str, str]]) -> DriverReading:
    """The driver major of a GPU type from its nodes' labels; nodes without the label are not counted."""
    majors = sorted({labels[DRIVER_MAJOR_LABEL] for labels in node_labels if labels.get(DRIVER_MAJOR_LABEL)})
    if len(majors) > 1:
        return DriverReading(None, tuple(majors))
    return DriverReading(majors[0] if majors else None)


def observed_stack(template: TuningRunSpec, driver: DriverReading, image: str) -> Stack:
    """The stack a run started now would measure on. `image` is the worker image the operator would give
    the template's compiler (Settings.image): a new image is how a new compiler version arrives."""
    return Stack(driver_major=driver.major, compiler_image=image, model_digest=template.model.sha256)


def stack_digest(stack: Stack) -> str:
    """8 hex characters that name a stack (its parts, canonical JSON)."""
    text = json.dumps(stack.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:8]


def run_name(policy: str, gpu_type: str, stack: Stack) -> str:
    """`<policy>-<gpu-type>-<stack digest>`, a DNS label of at most 63 characters (cut and hashed when
    longer): the same policy, target and stack always name the same run, so a check that is repeated
    after a crash finds the run it created instead of starting another."""
    return child_name(policy, gpu_type, stack_digest(stack))


Action = Literal["none", "start", "record", "wait"]


@dataclass(frozen=True)
class Decision:
    """What to do for one target: `start` a run named `run` for `stack`; `record` `stack` without a run
    (the driver major learned after a run started with no node to read it from); `wait` (nodes
    disagree); or `none`. `reason` is CamelCase, `message` says what changed."""

    action: Action
    stack: Stack | None
    reason: str
    message: str
    run: str | None = None


def decide(
    policy: str, gpu_type: str, triggers: Triggers, observed: Stack, driver: DriverReading, recorded: Stack | None
) -> Decision:
    """The decision for one target, from the stack observed now and the one its current run was started
    for (None: the policy has started no run for this target yet).

    A driver major no node reports is not a change: a pool scaled to zero still has the driver it had.
    Nodes that disagree (a rolling upgrade) are waited for: a run started then could measure on either.
    The first major seen after a run started without one is that run's (its Jobs brought the node up),
    so it is recorded, not re-tuned. Parts whose trigger is off never start a run."""
    if driver.disagreeing:
        majors = ", ".join(driver.disagreeing)
        message = f"nodes of {gpu_type} report driver majors {majors}: waiting until they agree"
        return Decision("wait", recorded, "DriversDisagree", message)
    if recorded is None:
        return Decision("start", observed, "Initial", "first run of this target", run_name(policy, gpu_type, observed))
    now = observed
    if now.driver_major is None:
        now = now.model_copy(update={"driver_major": recorded.driver_major})
    base = recorded
    if recorded.driver_major is None:  # learned, not changed
        base = recorded.model_copy(update={"driver_major": now.driver_major})
    changed = [
        part
        for part, (trigger, _) in PARTS.items()
        if getattr(triggers, trigger) and getattr(now, part) != getattr(base, part)
    ]
    if changed:
        reason = ",".join(PARTS[part][1] for part in changed)
        message = "; ".join(f"{part}: {getattr(base, part)} -> {getattr(now, part)}" for part in changed)
        return Decision("start", now, reason, message, run_name(policy, gpu_type, now))
    if base != recorded:
        return Decision("record", base, "DriverMajorLearned", f"driver_major: none -> {now.driver_major}")
    return Decision("none", recorded, "Unchanged", "")


def run_manifest(
    policy: str, namespace: str, uid: str, template: TuningRunSpec, target: Target, decision: Decision
) -> dict:
    """The TuningRun a `start` decision creates: the template for one target, in the policy's own
    namespace (a policy never names another), owned by the policy (deleting it deletes its runs; their
    published engines stay in the catalog), publishing to the catalog model named after the policy
    unless the template names one."""
    assert decision.run is not None and decision.stack is not None
    spec = template.model_copy(deep=True, update={"targets": [target]})
    if spec.publish.model_name is None:
        spec.publish.model_name = policy
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {
            "name": decision.run,
            "namespace": namespace,
            "labels": {LABEL_POLICY: label_value(policy), LABEL_MANAGED_BY: MANAGED_BY},
            "annotations": {
                ANNOTATION_STACK: json.dumps(decision.stack.wire(), sort_keys=True),
                ANNOTATION_TRIGGER: decision.reason,
            },
            "ownerReferences": [controller_reference(POLICY_KIND, policy, uid)],
        },
        "spec": spec.wire(),
    }


def owned_by(run: Mapping, uid: str) -> bool:
    """Whether a run (as read back) is this policy's: a run of that name that someone else made is
    never adopted."""
    return any(
        o.get("uid") == uid and o.get("kind") == POLICY_KIND for o in run["metadata"].get("ownerReferences") or []
    )


def target_status(
    previous: PolicyTargetStatus | None, gpu_type: str, decision: Decision, observed: Stack, started: bool, when: str
) -> PolicyTargetStatus:
    """A target's status after a check. `started`: the decision's run now exists (created or found);
    a `start` that could not be carried out leaves the recorded stack and run as they were."""
    out = (previous or PolicyTargetStatus(gpu_type=gpu_type)).model_copy(update={"observed": observed})
    if decision.action == "start" and started:
        runs = [r for r in out.runs if r != decision.run] + [decision.run or ""]
        return out.model_copy(
            update={
                "stack": decision.stack,
                "run": decision.run,
                "reason": decision.reason,
                "message": decision.message,
                "started_at": when,
                "runs": runs[-RUNS_KEPT:],
            }
        )
    if decision.action == "record":
        return out.model_copy(update={"stack": decision.stack, "message": decision.message})
    if decision.action == "wait":
        return out.model_copy(update={"message": decision.message})
    return out


def policy_status(
    previous: Mapping,
    generation: int,
    targets: list[PolicyTargetStatus],
    problem: tuple[str, str] | None,
    waiting: list[str],
) -> dict:
    """The status to write: targets, observedGeneration and the Ready/Stalled conditions. `problem`:
    (reason, message) of what stops the policy until something changes; `waiting`: messages of the
    targets that wait for their nodes to agree."""
    if problem is not None:
        state, reason, message = "stalled", problem[0], problem[1]
    elif waiting:
        state, reason, message = "reconciling", "Waiting", "; ".join(waiting)
    else:
        runs = ", ".join(f"{t.gpu_type}: {t.run}" for t in targets)
        state, reason, message = "ready", "UpToDate", f"each target has a run for the stack last seen ({runs})"
    return {
        **{k: v for k, v in previous.items() if k not in ("observedGeneration", "conditions", "targets", "message")},
        "observedGeneration": generation,
        "conditions": conditions(previous.get("conditions"), generation, state, reason, message),
        "targets": [t.wire() for t in targets],
        "message": message,
    }
