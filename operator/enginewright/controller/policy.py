"""A TuningPolicy's decisions, pure: from the stack observed for each target of its template and the
stack its current run was started for, whether to start a new TuningRun (and its deterministic name
and manifest), only record what was learned, wait, or do nothing; and the policy's status after.

On a stack change a target whose current run published a winner other than the default route is
first re-measured: a run of `spec.search.routes` = [that winner, the run's runners-up] measures only
the default, the winner and the (up to two) stage-1 routes that came closest to it, on the new
stack, and judges them by the product's confirmation rule. If the winner is confirmed, that run has
published it for the new stack and nothing more starts (WinnerConfirmed); if the default wins
(WinnerRegressed), a runner-up wins (RunnerUpWins: a stage-1 route now beats the default and the
winner) or the re-measure fails (RemeasureFailed), the full re-tune starts, under the name a plain
stack change would have given it.

The shell (`controller.policy_runs`) reads nodes and settings into these inputs, creates the run and
writes what these return. A decision depends only on what is observed now and what the status says,
so a check that runs twice, or after a restart, decides the same and names the same run."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta, timezone
from typing import Literal

from enginewright.api.cache import CacheEntry
from enginewright.api.models import SETTINGS_ARE_KNOBS, ReuseMode, SearchMode, Target, TuningRunSpec
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
from enginewright.api.routes import canonical_route, parse_route
from enginewright.controller.children import child_name, controller_reference, label_value
from enginewright.controller.status import conditions, now, stamp
from enginewright.search.winner import rank_candidates

ANNOTATION_STACK = f"{GROUP}/stack"  # on a started run: the stack (JSON) it was started for
ANNOTATION_TRIGGER = f"{GROUP}/trigger"  # on a started run: why the policy started it
ANNOTATION_REMEASURE = f"{GROUP}/remeasure"  # on a re-measure run: the published winner's route it re-measures
ANNOTATION_RUNNERS_UP = f"{GROUP}/runners-up"  # on a re-measure run: the runners-up it carries (JSON list)
REGRESSED = "WinnerRegressed"
RUNNER_UP_WINS = "RunnerUpWins"
RUNNERS_UP = 2  # stage-1 routes of the published run a re-measure carries beside its winner
SCHEDULED = "Scheduled"  # the reason of a re-measure that spec.triggers.schedule started

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


def remeasure_name(policy: str, gpu_type: str, stack: Stack) -> str:
    """The re-measure run of a published winner on `stack`: `<policy>-<gpu-type>-<stack digest>-check`,
    beside the full re-tune's `run_name` for the same stack (which a regression starts)."""
    return child_name(policy, gpu_type, stack_digest(stack), "check")


def scheduled_remeasure_name(policy: str, gpu_type: str, stack: Stack, since: str) -> str:
    """The re-measure the schedule starts when the current run, recorded at `since` (its startedAt),
    is a schedule old: `<policy>-<gpu-type>-<stack digest>-<since>-check`. The stack is unchanged, so
    the time tells one scheduled re-measure from the one before; a check repeated before the status is
    written sees the same `since` and names the same run."""
    return child_name(policy, gpu_type, stack_digest(stack), _stamp(since), "check")


def scheduled_retune_name(policy: str, gpu_type: str, stack: Stack, since: str) -> str:
    """The full re-tune a scheduled re-measure, recorded at `since`, starts when its winner lost:
    `<policy>-<gpu-type>-<stack digest>-<since>` (`run_name` of the same stack is the run that
    measured it first)."""
    return child_name(policy, gpu_type, stack_digest(stack), _stamp(since))


def _stamp(when: str) -> str:
    """An RFC 3339 time as a name part: 2026-12-03T06:14:26Z -> 20261203t061426z."""
    return re.sub(r"[^0-9a-z]", "", when.lower()) or "unrecorded"


def remeasure_due(every: float | None, since: str | None) -> datetime | None:
    """When the schedule (`every` seconds) re-measures a run recorded at `since` (None: no schedule;
    a run recorded without a time is due now)."""
    if every is None:
        return None
    if since is None:
        return datetime.min.replace(tzinfo=timezone.utc)
    return datetime.strptime(since, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc) + timedelta(seconds=every)


@dataclass(frozen=True)
class RunOutcome:
    """What the policy reads of a target's current run: its phase, and the route of the winner it
    published (None while nothing is published; "" when the default route won)."""

    phase: str
    winner: str | None = None

    @property
    def finished(self) -> bool:
        return self.phase in ("Succeeded", "Failed")


def run_outcome(run: Mapping | None) -> RunOutcome | None:
    """A TuningRun as read back (None: it does not exist) -> its outcome for the policy. A run started by
    the policy has one target; its winner counts as published once the target names its engine."""
    if run is None:
        return None
    status = run.get("status") or {}
    target: Mapping = next(iter(status.get("targets") or []), {})
    winner = (target.get("winner") or {}).get("route") if target.get("engineUri") else None
    return RunOutcome(str(status.get("phase") or "Pending"), None if winner is None else same_route(winner))


def same_route(text: str) -> str:
    """A route string in canonical form (knobs sorted), so two spellings of one route compare equal."""
    return canonical_route(parse_route(text))


def template_base(template: TuningRunSpec) -> dict[str, str]:
    """The template's base settings that routes are planned against (`search.planners.as_built`):
    its `compiler.settings` for a compiler whose settings are its knobs, else none."""
    return dict(template.compiler.settings) if template.compiler.name.value in SETTINGS_ARE_KNOBS else {}


def over_base(route: str, base: Mapping[str, str]) -> str:
    """A route as the template now builds it: in canonical form, without the knobs the base settings
    `base` (`template_base`) already set to the same value. A run published before the template took
    its winner's knob into its base names a route that the template now builds as, in part or whole,
    its default route: re-measured, compared or ranked, it is that route."""
    return canonical_route({k: v for k, v in parse_route(route).items() if base.get(k) != v})


def as_built_outcome(
    outcome: RunOutcome | None, base: Mapping[str, str], remeasuring: str | None = None
) -> RunOutcome | None:
    """A run's outcome with its winner as the template now builds it (`over_base`): a winner whose
    every knob is now a base setting is the default route (""). A re-measure's own outcome
    (`remeasuring` set: the route it re-measures) stays in the terms it was planned in, the route it
    re-measures being in them too: a template edited while it runs must not make its published
    winner, or the route it re-measures, read as another route (a regression read as confirmed)."""
    if outcome is None or outcome.winner is None or remeasuring is not None:
        return outcome
    return replace(outcome, winner=over_base(outcome.winner, base))


Action = Literal["none", "start", "record", "wait"]


@dataclass(frozen=True)
class Decision:
    """What to do for one target: `start` a run named `run` for `stack` (a re-measure of the published
    winner's route `remeasure` when set, else a full run); `record` `stack` without a run (the driver
    major learned after a run started with no node to read it from, or a re-measure that confirmed its
    winner); `wait` (nodes disagree); or `none`. `reason` is CamelCase, `message` says what changed."""

    action: Action
    stack: Stack | None
    reason: str
    message: str
    run: str | None = None
    remeasure: str | None = None
    runners_up: tuple[str, ...] = ()


def runners_up(
    entries: Iterable[CacheEntry], winner: str, limit: int = RUNNERS_UP, base: Mapping[str, str] | None = None
) -> tuple[str, ...]:
    """The stage-1 routes of a finished run (its cache entries) that came closest to its winner:
    accuracy-passing, neither the default nor the winner, fastest against the default first (as the
    run ranked its candidates), each as the template builds it now (`over_base` of `base`; `winner`
    already so). Empty when the default's entry is not among them."""
    stage1 = [e for e in entries if e.stage == "stage1"]
    default = next((e for e in stage1 if not e.route and e.passed), None)
    if default is None or default.median_ms is None:
        return ()
    won, base = same_route(winner), base or {}
    ranked = (over_base(e.route, base) for e in rank_candidates(stage1, default.route_id, default.median_ms))
    return tuple(dict.fromkeys(route for route in ranked if route not in (won, "")))[:limit]


def with_runners_up(decision: Decision, routes: Iterable[str]) -> Decision:
    """A re-measure decision that also carries `routes` (the published run's `runners_up`), unless it
    carries its runners-up already (a default's scheduled re-measure)."""
    carried = tuple(routes)
    if decision.remeasure is None or decision.runners_up or not carried:
        return decision
    message = f"{decision.message} (and the runners-up {', '.join(carried)})"
    return replace(decision, runners_up=carried, message=message)


def decide(
    policy: str,
    gpu_type: str,
    triggers: Triggers,
    observed: Stack,
    driver: DriverReading,
    recorded: Stack | None,
    current: RunOutcome | None = None,
    remeasuring: str | None = None,
    *,
    current_run: str | None = None,
    scheduled_since: str | None = None,
) -> Decision:
    """The decision for one target, from the stack observed now, the one its current run was started
    for (None: the policy has started no run for this target yet), that run's outcome (`current`,
    None when it is not there) and, when that run is a re-measure, the winner's route it re-measures.

    A stack change re-measures the current run's published winner when it is not the default route
    (there is nothing to re-measure a default against), else starts a full run; the shell adds the
    runners-up (`with_runners_up`). A finished re-measure is recorded when its winner held (it
    published it for the new stack); a regression (the default won), a runner-up that won, or a
    failed or vanished re-measure starts the full run for the stack. `current_run` names the current
    run in messages; `scheduled_since` is the startedAt of a current re-measure the schedule started
    (`scheduled`), whose full re-tune is `scheduled_retune_name`."""
    decision = _stack_decision(policy, gpu_type, triggers, observed, driver, recorded)
    if decision.action == "start" and decision.reason != "Initial" and decision.stack is not None:
        if current is not None and current.phase == "Succeeded" and current.winner:
            return Decision(
                "start",
                decision.stack,
                decision.reason,
                f"{decision.message}; re-measuring the published winner {current.winner} against the default",
                remeasure_name(policy, gpu_type, decision.stack),
                remeasure=current.winner,
            )
        return decision
    if decision.action != "none" or remeasuring is None or recorded is None:
        return decision
    if current is not None and not current.finished:
        return decision
    if scheduled_since is None:
        full, where = run_name(policy, gpu_type, recorded), "the new stack"
    else:
        full, where = scheduled_retune_name(policy, gpu_type, recorded, scheduled_since), "its stack, on schedule"
    check = current_run or remeasure_name(policy, gpu_type, recorded)
    if current is None or current.phase == "Failed":
        why = "was deleted" if current is None else "failed"
        message = f"the re-measure {check} of {remeasuring} {why}: starting the full re-tune {full}"
        return Decision("start", recorded, "RemeasureFailed", message, full)
    if not remeasuring and not current.winner:
        message = f"the re-measure {check} kept the default route against its runners-up on {where} and published it"
        return Decision("record", recorded, "WinnerConfirmed", message)
    if current.winner and same_route(current.winner) == same_route(remeasuring):
        message = f"the re-measure {check} confirmed {remeasuring} against the default on {where} and published it"
        return Decision("record", recorded, "WinnerConfirmed", message)
    if current.winner:
        # The re-measure measured only the default, the winner and its runners-up: one of those won.
        beaten = f"the default and the published winner {remeasuring}" if remeasuring else "the published default"
        message = (
            f"the runner-up {current.winner} beat {beaten} on {where} "
            f"(re-measure {check} published it): starting the full re-tune {full}"
        )
        return Decision("start", recorded, RUNNER_UP_WINS, message, full)
    message = (
        f"the published winner {remeasuring} no longer beats the default on {where} (re-measure {check} "
        f"kept the default route): starting the full re-tune {full}"
    )
    return Decision("start", recorded, REGRESSED, message, full)


def scheduled(
    policy: str,
    gpu_type: str,
    decision: Decision,
    current: RunOutcome | None,
    remeasuring: str | None,
    every: float | None,
    since: str | None,
    at: datetime,
    default_runners_up: tuple[str, ...] = (),
) -> Decision:
    """`decide`'s decision, or the schedule's re-measure when it is due: nothing else is to be done
    (`none`: the stack is unchanged, no re-measure is going), the current run has published its
    winner, and `at` is `every` seconds or more after `since`, when the policy recorded that run.
    A winner other than the default is re-measured against the default (the shell adds its
    runners-up, as after a stack change); a default that won is re-measured against its runners-up,
    `default_runners_up` (the run's `runners_up` of ""), and only when it has some: there is nothing
    else to measure it against. A run still going, or one that failed, is not re-measured: the
    schedule waits for it."""
    due = remeasure_due(every, since)
    if decision.action != "none" or due is None or remeasuring is not None or decision.stack is None:
        return decision
    if not re_measurable(current, default_runners_up) or at < due:
        return decision
    assert current is not None and current.winner is not None  # (re_measurable)
    check = scheduled_remeasure_name(policy, gpu_type, decision.stack, since or "")
    recorded = f"the schedule is due (the current run was recorded {since or 'at no recorded time'})"
    if not current.winner:
        message = f"{recorded}: re-measuring the default route against its runners-up {', '.join(default_runners_up)}"
        return Decision("start", decision.stack, SCHEDULED, message, check, remeasure="", runners_up=default_runners_up)
    message = f"{recorded}: re-measuring the published winner {current.winner} against the default"
    return Decision("start", decision.stack, SCHEDULED, message, check, remeasure=current.winner)


def next_remeasure(
    every: float | None,
    target: PolicyTargetStatus,
    current: RunOutcome | None,
    default_runners_up: tuple[str, ...] = (),
) -> str | None:
    """When the schedule re-measures the target next (RFC 3339), for its status: None without a
    schedule, while a re-measure goes, or while the current run has nothing to re-measure (no
    published winner, or a default that won with no runners-up, `default_runners_up`)."""
    due = remeasure_due(every, target.started_at)
    if due is None or target.started_at is None or target.remeasure is not None:
        return None
    if not re_measurable(current, default_runners_up):
        return None
    return stamp(due.timestamp())


def re_measurable(current: RunOutcome | None, default_runners_up: tuple[str, ...]) -> bool:
    """Whether the schedule has something to re-measure in the current run (`scheduled` and
    `next_remeasure` both ask): it succeeded and published a winner, and a default that won has
    runners-up to be measured against."""
    if current is None or current.phase != "Succeeded" or current.winner is None:
        return False
    return bool(current.winner or default_runners_up)


def _stack_decision(
    policy: str, gpu_type: str, triggers: Triggers, observed: Stack, driver: DriverReading, recorded: Stack | None
) -> Decision:
    """The decision from the stacks alone.

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
    annotations = {
        ANNOTATION_STACK: json.dumps(decision.stack.wire(), sort_keys=True),
        ANNOTATION_TRIGGER: decision.reason,
    }
    if decision.remeasure is not None:
        # Only the default, the winner and its runners-up, measured fresh (nothing reused: this is the
        # measurement being repeated), every one of them a candidate of the confirmation round.
        routes = [r for r in (decision.remeasure, *decision.runners_up) if r]  # (the default is always measured)
        search = spec.search.model_copy(
            update={
                "mode": SearchMode.fast,
                "knobs": [],
                "routes": routes,
                "measure_uncompiled": False,
                "dry_run": False,
                "reuse": ReuseMode.none,
                "seed_cache": None,
                "confirm": spec.search.confirm.model_copy(
                    update={"top_k": max(len(routes), spec.search.confirm.top_k)}
                ),
            }
        )
        spec = spec.model_copy(update={"search": search})
        annotations[ANNOTATION_REMEASURE] = decision.remeasure
        if decision.runners_up:
            annotations[ANNOTATION_RUNNERS_UP] = json.dumps(list(decision.runners_up))
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {
            "name": decision.run,
            "namespace": namespace,
            "labels": {LABEL_POLICY: label_value(policy), LABEL_MANAGED_BY: MANAGED_BY},
            "annotations": annotations,
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
                "remeasure": decision.remeasure,
                "runners_up": list(decision.runners_up),
                "started_at": when,
                "runs": runs[-RUNS_KEPT:],
            }
        )
    if decision.action == "record" and decision.reason == "WinnerConfirmed":
        return out.model_copy(
            update={"reason": decision.reason, "message": decision.message, "remeasure": None, "runners_up": []}
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
        "conditions": conditions(previous.get("conditions"), generation, state, reason, message)
        + [regressed_condition(previous.get("conditions"), generation, targets)],
        "targets": [t.wire() for t in targets],
        "message": message,
    }


def regressed_condition(previous: list[dict] | None, generation: int, targets: list[PolicyTargetStatus]) -> dict:
    """WinnerRegressed: True while a target's current run is the full re-tune its re-measure started
    because the published winner no longer beat the default on the new stack."""
    found = [t for t in targets if t.reason == REGRESSED]
    status = "True" if found else "False"
    old = next((c for c in previous or [] if c.get("type") == REGRESSED), {})
    return {
        "type": REGRESSED,
        "status": status,
        "reason": REGRESSED if found else "NoRegression",
        "message": "; ".join(f"{t.gpu_type}: {t.message}" for t in found),
        "lastTransitionTime": old.get("lastTransitionTime") if old.get("status") == status else now(),
        "observedGeneration": generation,
    }
