"""Whether a target's pods wait for a node, from the pods as the API server reports them (pure).

GPU pools often scale from zero: no node of the GPU type exists until a pod asks for one. So the
operator never waits for a node before creating a Job; it creates the Job, lets the scheduler and the
autoscaler work, and reads the scheduler's verdict back from the pods (`PodScheduled` False, reason
`Unschedulable`, with the scheduler's message). A target gives up only when none of its pods has a
node and one has been unschedulable for the operator's configured wait.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True)
class Waiting:
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


def _seconds(stamp: str | None) -> float | None:
    if not stamp:
        return None
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def waiting(pods: list[dict], now: float) -> Waiting | None:
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
    return Waiting(
        pods=tuple(sorted(name for _, name, _ in stuck)), message=message, seconds=max(0.0, now - since), placed=placed
    )
