"""A run's status, from plain data (pure): a target's counts from its cache entries, the run's phase,
progress and message from its targets, and the `observedGeneration` and `Ready`, `Reconciling` and
`Stalled` conditions kstatus expects, which `kubectl wait --for=condition=Ready`, Flux and Helm read.
The reconciler writes what these return and posts the event they name."""

from __future__ import annotations

import time
from datetime import datetime, timezone
from typing import Any, Callable

from enginewright.api.cache import CacheEntry, Outcome
from enginewright.api.models import RouteResult, TargetStatus, TuningRunSpec
from enginewright.search.flow import Decided, RunBatches, RunConfirmation, Step

FINISHED = ("done", "failed")  # a target's stages after which nothing changes

Event = tuple[str, str, str]  # (type Normal|Warning, reason, message)
Emit = Callable[[str, str, str], None]  # posts an Event on the run


def stamp(epoch: float) -> str:
    """An RFC 3339 time as Kubernetes writes one (a condition's lastTransitionTime)."""
    return datetime.fromtimestamp(epoch, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def seconds(when: str) -> float:
    """`stamp`'s inverse: a Kubernetes time (fractions and offsets allowed) as epoch seconds."""
    return datetime.fromisoformat(when.replace("Z", "+00:00")).timestamp()


def now() -> str:
    return stamp(time.time())


def conditions(previous: list[dict] | None, generation: int, state: str, reason: str, message: str) -> list[dict]:
    """The three conditions for `state` (reconciling, stalled or ready); a condition keeps its
    lastTransitionTime while its status does not change."""
    wanted = {
        "reconciling": {"Ready": "False", "Reconciling": "True", "Stalled": "False"},
        "stalled": {"Ready": "False", "Reconciling": "False", "Stalled": "True"},
        "ready": {"Ready": "True", "Reconciling": "False", "Stalled": "False"},
    }[state]
    before = {c.get("type"): c for c in previous or []}
    out = []
    for kind, status in wanted.items():
        old = before.get(kind, {})
        active = status == "True" or kind == "Ready"
        out.append(
            {
                "type": kind,
                "status": status,
                "reason": reason if active else ("Ready" if state == "ready" else reason),
                "message": message if active else "",
                "lastTransitionTime": old.get("lastTransitionTime") if old.get("status") == status else now(),
                "observedGeneration": generation,
            }
        )
    return out


def condition(status: dict | None, kind: str) -> dict | None:
    return next((c for c in (status or {}).get("conditions") or [] if c.get("type") == kind), None)


def is_true(status: dict | None, kind: str) -> bool:
    found = condition(status, kind)
    return bool(found and found.get("status") == "True")


def stalled(previous: dict, generation: int, reason: str, message: str, final: bool = False) -> dict:
    """The run waits for the user (`reason`: a Problem's, InvalidSpec, Forbidden); `final` when no
    later pass can change that (an invalid spec: the run has Failed)."""
    return {
        **previous,
        "phase": "Failed" if final else previous.get("phase", "Pending"),
        "observedGeneration": generation,
        "message": message,
        "conditions": conditions(previous.get("conditions"), generation, "stalled", reason, message),
    }


def waiting_for_store(previous: dict, generation: int, message: str) -> dict:
    """The store did not answer: everything else stays as it was, the pass is retried."""
    return waiting_on_cluster(previous, generation, "StoreUnavailable", message)


def waiting_on_cluster(previous: dict, generation: int, reason: str, message: str) -> dict:
    """The run waits for something the cluster clears by itself (`reason`): everything else stays as
    it was, Reconciling (not Stalled), and the pass is retried."""
    return {
        **previous,
        "observedGeneration": generation,
        "message": message,
        "conditions": conditions(previous.get("conditions"), generation, "reconciling", reason, message),
    }


def run_status(
    targets: list[TargetStatus],
    previous: dict,
    generation: int,
    *,
    objective: str,
    accuracy_validated: bool,
    dry_run: bool,
) -> tuple[dict, Event | None]:
    """The run's status from its targets' (`objective` names the best speedup), and the event to post:
    Failed or Succeeded (DryRun) when the run has just finished, else None."""
    planned = sum(t.planned for t in targets)
    done = sum(t.done + t.failed + t.rejected for t in targets)
    failed = [t for t in targets if t.stage == "failed"]
    speedups = [t.winner.speedup for t in targets if t.winner and t.winner.speedup is not None]
    status = {
        "observedGeneration": generation,
        "progress": f"{done}/{planned}" if planned else None,
        "bestSpeedup": f"{max(speedups):.3f}x {objective}" if speedups else None,
        "accuracyValidated": accuracy_validated,
        "targets": [t.wire() for t in targets],
    }
    before = previous.get("conditions")
    if all(t.stage in FINISHED for t in targets):
        if failed:
            reason = failed[0].reason or "TargetFailed"
            message = "; ".join(f"{t.gpu_type}: {t.message}" for t in failed)
            event = ("Warning", "Failed", message) if previous.get("phase") != "Failed" else None
            return {
                **status,
                "phase": "Failed",
                "message": message,
                "conditions": conditions(before, generation, "stalled", reason, message),
            }, event
        reason = "DryRun" if dry_run else "Succeeded"
        message = ("dry run: " if dry_run else "") + "; ".join(f"{t.gpu_type}: {t.message}" for t in targets)
        event = ("Normal", reason, message) if previous.get("phase") != "Succeeded" else None
        return {
            **status,
            "phase": "Succeeded",
            "message": message,
            "conditions": conditions(before, generation, "ready", reason, message),
        }, event
    stages = {t.stage for t in targets}
    phase = "Confirming" if "confirming" in stages else "Running" if stages & {"stage1", "stage2"} else "Pending"
    message = "; ".join(f"{t.gpu_type}: {t.message}" for t in targets if t.message)
    # A target that waits says why (Unschedulable, ContainerCannotStart) in the Ready and Reconciling conditions' reason.
    reason = next((t.reason for t in targets if t.stage not in FINISHED and t.reason), "Reconciling")
    return {
        **status,
        "phase": phase,
        "message": message,
        "conditions": conditions(before, generation, "reconciling", reason, message),
    }, None


def target_counts(status: TargetStatus, entries: dict[str, CacheEntry], step: Step) -> TargetStatus:
    """`status` with what the target's cache entries count: routes planned, done, failed, rejected
    and left unmeasured, the default's time, the best passing route and the GPU seconds spent (a
    reused entry's were spent by the run that measured it)."""
    values = list(entries.values())
    failed = sum(e.outcome in (Outcome.crash, Outcome.build_failed, Outcome.timeout) for e in values)
    rejected = sum(e.outcome is Outcome.accuracy_rejected for e in values)
    default = next((e for e in values if e.route == ""), None)
    passed = [e for e in values if e.passed and e.route and e.speedup]
    best = max(passed, key=lambda e: (e.speedup or 0.0, e.route_id), default=None)
    return status.model_copy(
        update={
            "planned": getattr(step, "planned", len(values)),
            "done": len(values) - failed - rejected,
            "unmeasured": step.planned - len(step.entries) if isinstance(step, Decided) else 0,
            "failed": failed,
            "rejected": rejected,
            "default_ms": default.median_ms if default else None,
            "best": RouteResult(
                route_id=best.route_id,
                route=best.route,
                median_ms=best.median_ms,
                speedup=round(best.speedup or 0.0, 4),
                max_loss=best.max_loss,
            )
            if best
            else None,
            "gpu_seconds": round(sum((e.build_seconds or 0) + e.spent_seconds for e in values if not e.reused), 3),
        }
    )


def run_deadline(spec: TuningRunSpec, meta: dict[str, Any]) -> float | None:
    """When the run must stop (epoch seconds): its creation plus `spec.search.deadlineSeconds`; None
    without one."""
    if spec.search.deadline_seconds is None:
        return None
    return seconds(meta["creationTimestamp"]) + spec.search.deadline_seconds


def target_done(status: TargetStatus, message: str) -> TargetStatus:
    """The target has its result (`message` says which): no Job of it runs any more."""
    return status.model_copy(update={"stage": "done", "message": message, "active_jobs": 0})


def target_failed(status: TargetStatus, reason: str, message: str) -> TargetStatus:
    """The target cannot give a result: its reason is kept (the run's Stalled reason)."""
    return status.model_copy(
        update={"stage": "failed", "reason": reason, "message": f"{reason}: {message}", "active_jobs": 0}
    )


def sweeping(status: TargetStatus, step: RunBatches, active_jobs: int) -> TargetStatus:
    """The target building and measuring the step's batches (`active_jobs` of them running)."""
    return status.model_copy(update={"stage": step.stage, "active_jobs": active_jobs, "message": step.note})


def confirming(status: TargetStatus, step: RunConfirmation) -> TargetStatus:
    """The target in its confirmation round (one Job)."""
    return status.model_copy(
        update={
            "stage": "confirming",
            "active_jobs": 1,
            "message": f"confirming {len(step.candidates)} candidate(s) against the default "
            f"over at most {step.rounds} interleaved rounds",
        }
    )


def unpublished(status: TargetStatus, step: Decided) -> TargetStatus:
    """The decided target done without publishing (spec.publish.enabled false)."""
    return target_done(
        status, f"winner {step.winner.route or '(default)'}; {step.decision.reason} (publishing disabled)"
    )


def published(status: TargetStatus, step: Decided, engine_uri: str) -> TargetStatus:
    """The decided target done with its engine in the catalog at `engine_uri`."""
    decision, winner = step.decision, step.winner
    result = (
        f"kept the default route ({decision.reason})"
        if decision.default_won
        else f"winner {winner.route}: {step.headline_text()}"
    )
    return target_done(
        status.model_copy(update={"engine_uri": engine_uri, "engine_sha256": winner.engine_sha256}),
        f"{result}; published {engine_uri}",
    )


def decided_status(status: TargetStatus, step: Decided) -> TargetStatus:
    """`status` with the flow's decision: the winner, its speedup and interval, the host note."""
    decision, winner = step.decision, step.winner
    headline = step.headline()
    return status.model_copy(
        update={
            "winner": RouteResult(
                route_id=winner.route_id,
                route=winner.route,
                median_ms=winner.median_ms,
                speedup=decision.speedup,
                speedup_low=headline["low"],
                speedup_high=headline["high"],
                max_loss=winner.max_loss,
            ),
            "speedup": f"{step.headline_text()[:-1]}; winner {winner.route or '(default)'})",
            "host": headline["host"],
            "decision": decision.reason,
            "cut_short": step.cut_short,
        }
    )
