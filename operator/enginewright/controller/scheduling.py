"""Whether a target's pods wait for a node, from the pods as the API server reports them (pure).

GPU pools often scale from zero: no node of the GPU type exists until a pod asks for one. So the
operator never waits for a node before creating a Job; it creates the Job, lets the scheduler and the
autoscaler work, and reads the scheduler's verdict back from the pods (`PodScheduled` False, reason
`Unschedulable`, with the scheduler's message). A target gives up only when none of its pods has a
node and one has been unschedulable for the operator's configured wait.

A pod with a node can still wait for good: its container cannot start (an image that cannot be pulled,
a name the runtime cannot parse, a Secret its environment reads that is missing). The kubelet retries
with back-off and the pod stays Pending until the Job's activeDeadlineSeconds, hours later; so such a
pod is reported at once (`not_starting`, with the kubelet's reason and message) and the target gives
up once every pod of it on a node is blocked and the operator has seen one blocked for the configured
wait (counted from its first sighting, kept on the target's status, so a slow pull is not counted).
"""

from __future__ import annotations

from dataclasses import dataclass

from enginewright.controller.status import seconds, stamp

# Container waiting reasons a kubelet keeps retrying but that clear only when someone fixes the image,
# its pull secret or what the container mounts (a plain slow pull is ContainerCreating: not listed).
CANNOT_START = frozenset(
    {
        "ErrImagePull",
        "ImagePullBackOff",
        "InvalidImageName",
        "ErrImageNeverPull",
        "ImageInspectError",
        "CreateContainerConfigError",
        "CreateContainerError",
    }
)


@dataclass(frozen=True)
class Unplaced:
    """Pods of one target the scheduler could not place."""

    pods: tuple[str, ...]  # their names, sorted
    message: str  # the scheduler's message of the pod that has waited longest
    seconds: float  # how long that pod has been unschedulable
    placed: int  # pods of the target that have a node and have not ended

    def give_up(self, wait_seconds: float) -> bool:
        """Nothing of the target runs and it has waited long enough (a wait of 0: never give up)."""
        return wait_seconds > 0 and self.placed == 0 and self.seconds >= wait_seconds

    def said(self) -> str:
        """Which pods wait and what the scheduler says of the one that has waited longest."""
        return (
            f"{len(self.pods)} pod(s) cannot be scheduled ({self.pods[0]}, unschedulable for "
            f"{self.seconds:.0f}s): {self.message}"
        )

    def waiting_for(self, wait_seconds: float) -> str:
        """The target's message while it waits for a node (a wait of 0: without a time limit)."""
        limit = (
            f"gives up after {wait_seconds:.0f}s without a node" if wait_seconds > 0 else "waits without a time limit"
        )
        return f"{self.said()}; waiting for a node (a pool scaling up, or GPUs freed): {limit}"

    def gave_up(self, wait_seconds: float) -> str:
        """The target's failure message once it gave up, with what to check."""
        return (
            f"{self.said()}; gave up after {wait_seconds:.0f}s (the operator's "
            f"scheduling.unschedulableTimeoutSeconds): check the GPU type, gpusPerJob, "
            f"nodeSelector, tolerations and resources against the cluster's node pools"
        )


def _seconds(when: str | None) -> float | None:
    return seconds(when) if when else None


def owned(pods: list[dict], job_uids: set[str]) -> list[dict]:
    """The pods among `pods` that a Job of `job_uids` owns. Pods are listed by the run's and target's
    labels, and a run deleted and applied again under its name leaves its old Jobs' pods, with the
    same labels, until the garbage collector removes them: their old times must not end the new run's
    target at its first pass."""
    return [
        pod
        for pod in pods
        if any(o.get("uid") in job_uids for o in (pod.get("metadata") or {}).get("ownerReferences") or [])
    ]


def waiting(pods: list[dict], now: float) -> Unplaced | None:
    """The unschedulable pods among `pods` (plain-dict Pod objects), or None when there are none."""
    stuck: list[tuple[float, str, str]] = []
    placed = 0
    for pod in pods:
        status, spec = pod.get("status") or {}, pod.get("spec") or {}
        if status.get("phase") in ("Succeeded", "Failed") or (pod.get("metadata") or {}).get("deletionTimestamp"):
            continue
        if spec.get("nodeName"):
            placed += 1
            continue
        for condition in status.get("conditions") or []:
            if (
                condition.get("type") == "PodScheduled"
                and condition.get("status") == "False"
                and condition.get("reason") == "Unschedulable"
            ):
                since = _seconds(condition.get("lastTransitionTime"))
                stuck.append(
                    (
                        now if since is None else since,
                        pod["metadata"]["name"],
                        (condition.get("message") or "no message from the scheduler").strip(),
                    )
                )
    if not stuck:
        return None
    since, _, message = min(stuck)
    return Unplaced(
        pods=tuple(sorted(name for _, name, _ in stuck)), message=message, seconds=max(0.0, now - since), placed=placed
    )


@dataclass(frozen=True)
class NotStarting:
    """Pods of one target that have a node but whose containers cannot start."""

    pods: tuple[str, ...]  # their names, sorted
    reason: str  # the kubelet's reason for the blocked container of the first of them
    message: str  # and its message
    seconds: float  # since the operator first saw a container of the target blocked (`seen_since`)
    others: int  # pods of the target on a node that are not blocked (running, or starting as usual)

    def give_up(self, wait_seconds: float) -> bool:
        """Every pod of the target on a node is blocked and has been long enough (a wait of 0: never)."""
        return wait_seconds > 0 and self.others == 0 and self.seconds >= wait_seconds

    def said(self) -> str:
        return (
            f"{len(self.pods)} pod(s) on a node cannot start their container ({self.pods[0]}, "
            f"{self.reason}, seen for {self.seconds:.0f}s): {self.message}"
        )

    def waiting_for(self, wait_seconds: float) -> str:
        limit = f"gives up after {wait_seconds:.0f}s" if wait_seconds > 0 else "waits without a time limit"
        return f"{self.said()}; the kubelet retries: {limit}"

    def gave_up(self, wait_seconds: float) -> str:
        return (
            f"{self.said()}; gave up after {wait_seconds:.0f}s (the operator's "
            f"scheduling.startTimeoutSeconds): check the worker image's name and tag, the registry's "
            f"pull secret (imagePullSecrets) and the Secret the worker's environment reads "
            f"(store.workerSecret)"
        )


def not_starting(pods: list[dict], now: float, seen_since: float | None = None) -> NotStarting | None:
    """The pods among `pods` (plain-dict Pod objects) that have a node and a container (init
    containers included) waiting for a reason in CANNOT_START, or None when there are none.
    `seen_since`: when the operator first saw one (kept on the target's status); None: now. The
    time counts from there, not from the pod's scheduling, so a slow pull that ends in one passing
    error is not counted as blocked time."""
    stuck: list[tuple[str, str, str]] = []
    others = 0
    for pod in pods:
        status, spec = pod.get("status") or {}, pod.get("spec") or {}
        if status.get("phase") in ("Succeeded", "Failed") or (pod.get("metadata") or {}).get("deletionTimestamp"):
            continue
        if not spec.get("nodeName"):
            continue
        waits = [
            (c.get("state") or {}).get("waiting") or {}
            for c in [*(status.get("initContainerStatuses") or []), *(status.get("containerStatuses") or [])]
        ]
        blocked = next((w for w in waits if w.get("reason") in CANNOT_START), None)
        if blocked is None:
            others += 1
            continue
        message = (blocked.get("message") or "no message from the kubelet").strip()
        stuck.append((pod["metadata"]["name"], blocked["reason"], message))
    if not stuck:
        return None
    stuck.sort()
    _, reason, message = stuck[0]
    since = now if seen_since is None else min(seen_since, now)
    return NotStarting(
        pods=tuple(name for name, _, _ in stuck), reason=reason, message=message, seconds=now - since, others=others
    )


@dataclass(frozen=True)
class Verdict:
    """What a target's pods say while its Jobs run: the reason for its status and whether it gives up."""

    reason: str  # Unschedulable or ContainerCannotStart
    message: str
    give_up: bool
    blocked_since: str | None  # when a container of the target was first seen blocked, RFC 3339 (None: none is)


def verdict(
    pods: list[dict], now: float, unschedulable_seconds: float, start_seconds: float, blocked_since: str | None = None
) -> Verdict | None:
    """Pods without a node (`waiting`) and pods on a node whose container cannot start (`not_starting`,
    blocked since `blocked_since`, the target status's RFC 3339 time): either gives the target up once it
    has waited its own time, so one never hides the other; while neither has, a container that
    cannot start is said first (it clears only when someone acts, and a new node would meet it too).
    None: every pod is placed and starting or running."""
    unplaced, stuck = waiting(pods, now), not_starting(pods, now, _seconds(blocked_since))
    since = None if stuck is None else stamp(now - stuck.seconds)
    found: list[tuple[Unplaced | NotStarting, str, float]] = []
    if stuck is not None:
        found.append((stuck, "ContainerCannotStart", start_seconds))
    if unplaced is not None:
        found.append((unplaced, "Unschedulable", unschedulable_seconds))
    for f, reason, wait in found:
        if f.give_up(wait):
            return Verdict(reason, f.gave_up(wait), True, since)
    if not found:
        return None
    f, reason, wait = found[0]
    return Verdict(reason, f.waiting_for(wait), False, since)
