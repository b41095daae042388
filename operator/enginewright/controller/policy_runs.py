"""A TuningPolicy's check, the shell around `controller.policy`: read the driver labels of each
target's nodes and the worker image the operator would use, ask the core what to do, create the
TuningRun it names (in the policy's namespace only), and return the status to write.

The check is level-based: the stack a target's run was started for lives in the policy's status and
the run's name is a function of that stack, so a check repeated after a crash (the run created, the
status not yet written) finds the run it made (409, owned by this policy) and records it."""

from __future__ import annotations

import logging
from datetime import datetime, timezone
from typing import Any, Callable, Mapping

from pydantic import ValidationError

from enginewright.api.cache import CacheEntry
from enginewright.api.names import GROUP, PLURAL, VERSION
from enginewright.api.policy import PolicyTargetStatus, TuningPolicySpec
from enginewright.controller import metrics
from enginewright.controller.children import RunRef, selector
from enginewright.controller.policy import (
    REGRESSED,
    RUNNER_UP_WINS,
    SCHEDULED,
    DriverReading,
    as_built_outcome,
    decide,
    driver_reading,
    next_remeasure,
    observed_stack,
    owned_by,
    policy_status,
    run_manifest,
    run_outcome,
    runners_up,
    scheduled,
    target_status,
    template_base,
    with_runners_up,
)
from enginewright.controller.settings import Settings
from enginewright.controller.status import condition, now

Emit = Callable[[str, str, str], None]  # (type Normal|Warning, reason, message), an Event on the policy
log = logging.getLogger("enginewright.controller")


class PolicyChecker:
    """Checks policies with the operator's API clients (CoreV1Api for nodes, CustomObjectsApi for runs)."""

    def __init__(self, settings: Settings, core: Any, custom: Any):
        self.settings, self.core, self.custom = settings, core, custom

    def driver(self, gpu_type: str) -> DriverReading:
        """The driver major of the nodes of one GPU type (list by label: no node is fine, see `decide`)."""
        nodes = self.core.list_node(label_selector=f"{self.settings.gpu_type_label}={gpu_type}").items
        return driver_reading(node.metadata.labels or {} for node in nodes)

    def check(self, body: dict, emit: Emit) -> dict | None:
        """One check of every target of the policy; the status to write, or None when it is unchanged."""
        meta, previous = body["metadata"], dict(body.get("status") or {})
        name, namespace, uid, generation = meta["name"], meta["namespace"], meta["uid"], meta.get("generation", 0)
        metrics.POLICY_CHECKS.inc()
        try:
            spec = TuningPolicySpec.model_validate(body.get("spec") or {})
        except ValidationError as exc:
            invalid = ("InvalidInput", f"spec: {'; '.join(_errors(exc))}")
            kept = [PolicyTargetStatus.model_validate(t) for t in previous.get("targets") or []]
            return self._finish(body, previous, policy_status(previous, generation, kept, invalid, []), emit)
        before = {t["gpuType"]: PolicyTargetStatus.model_validate(t) for t in previous.get("targets") or []}
        image = self.settings.image(spec.template.compiler.name.value, spec.template.compiler.image)
        base = template_base(spec.template)  # (routes as the template builds them now: `over_base`)
        targets: list[PolicyTargetStatus] = []
        waiting: list[str] = []
        problem: tuple[str, str] | None = None
        for target in spec.template.targets:
            try:
                driver = self.driver(target.gpu_type)
            except Exception as exc:
                if getattr(exc, "status", None) != 403:
                    raise
                # Without `list` on nodes no driver change can be seen: say so, start nothing.
                refused = f"listing the nodes of {target.gpu_type} was forbidden: the operator needs list on nodes"
                problem = problem or ("Forbidden", f"{refused} ({_api_message(exc)})")
                targets.append(before.get(target.gpu_type) or PolicyTargetStatus(gpu_type=target.gpu_type))
                continue
            observed = observed_stack(spec.template, driver, image)
            old = before.get(target.gpu_type)
            # the current run's winner as the template builds it now: a knob the template's base
            # settings took from it since is its default route's (`over_base`); a re-measure's is
            # judged in the terms it was planned in
            remeasuring = old.remeasure if old else None
            run_doc = self._run(namespace, uid, old.run) if old and old.run else None
            current = as_built_outcome(run_outcome(run_doc), base, remeasuring)
            decision = decide(
                name,
                target.gpu_type,
                spec.triggers,
                observed,
                driver,
                old.stack if old else None,
                current,
                remeasuring,
                current_run=old.run if old else None,
                scheduled_since=old.started_at if old and remeasuring is not None and old.reason == SCHEDULED else None,
            )
            every = spec.triggers.schedule_seconds
            since = old.started_at if old else None
            at = datetime.now(timezone.utc)
            defaults: tuple[str, ...] = ()
            if every is not None and run_doc is not None and current is not None and current.winner == "":
                defaults = runners_up(self._entries(run_doc, target.gpu_type), "", base=base)
            decision = scheduled(name, target.gpu_type, decision, current, remeasuring, every, since, at, defaults)
            if decision.remeasure and run_doc is not None:  # (a default's carries its runners-up)
                entries = self._entries(run_doc, target.gpu_type)
                decision = with_runners_up(decision, runners_up(entries, decision.remeasure, base=base))
            started = False
            if decision.action == "start":
                doc = run_manifest(name, namespace, uid, spec.template, target, decision)
                started, trouble = self._create(namespace, uid, doc, decision.reason, decision.message, emit)
                problem = problem or trouble
                if started and decision.reason in (REGRESSED, "RemeasureFailed"):
                    if decision.reason == REGRESSED:
                        metrics.POLICY_REGRESSIONS.inc()
                    emit("Warning", decision.reason, f"{target.gpu_type}: {decision.message}")
                elif started and decision.reason == RUNNER_UP_WINS:
                    emit("Normal", decision.reason, f"{target.gpu_type}: {decision.message}")
            elif decision.action == "record" and decision.reason == "WinnerConfirmed":
                emit("Normal", decision.reason, f"{target.gpu_type}: {decision.message}")
            elif decision.action == "record":
                log.info(f"{namespace}/{name} {target.gpu_type}: {decision.message} (recorded, no new run)")
            elif decision.action == "wait":
                waiting.append(decision.message)
            status = target_status(old, target.gpu_type, decision, observed, started, now())
            upcoming = None if started else next_remeasure(every, status, current, defaults)
            targets.append(status.model_copy(update={"next_remeasure": upcoming}))
        return self._finish(body, previous, policy_status(previous, generation, targets, problem, waiting), emit)

    def _run(self, namespace: str, uid: str, run: str) -> dict | None:
        """The target's current run as read back (None: it is gone, or it is not this policy's): its
        outcome (`run_outcome`) and its cache entries (`_entries`) come from this one read."""
        from kubernetes.client.exceptions import ApiException

        try:
            body = self.custom.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, run)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        return body if owned_by(body, uid) else None

    def _entries(self, run: Mapping, gpu_type: str) -> list[CacheEntry]:
        """The cache entries of the target's current run (`_run`), from its cache ConfigMaps (in the
        cluster as long as the run is: a restarted operator reads the same). An entry that does not
        parse is skipped: it only narrows the runners-up."""
        meta = run["metadata"]
        namespace, ref = meta["namespace"], RunRef(meta["name"], meta["namespace"], meta["uid"])
        maps = self.core.list_namespaced_config_map(
            namespace, label_selector=selector(ref, gpu_type, component="cache")
        ).items
        entries = []
        for shard in maps:
            if not any(o.uid == ref.uid for o in shard.metadata.owner_references or []):
                continue
            for text in (shard.data or {}).values():
                try:
                    entries.append(CacheEntry.from_json(text))
                except (ValueError, ValidationError):
                    continue
        return entries

    def _create(
        self, namespace: str, uid: str, doc: dict, reason: str, message: str, emit: Emit
    ) -> tuple[bool, tuple[str, str] | None]:
        """Create the run; (whether it exists now, the problem when it cannot be made)."""
        from kubernetes.client.exceptions import ApiException

        run = doc["metadata"]["name"]
        gpu_type = doc["spec"]["targets"][0]["gpuType"]
        try:
            self.custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, doc)
        except ApiException as exc:
            if exc.status == 409:
                existing = self.custom.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, run)
                if owned_by(existing, uid):
                    emit("Normal", "RunAdopted", f"found TuningRun {run} for {gpu_type} ({reason}), started earlier")
                    return True, None
                return False, (
                    "RunNameTaken",
                    f"a TuningRun named {run} exists in {namespace} and is not this policy's: rename or delete it "
                    f"(the policy names the run of {gpu_type} for its stack; {reason})",
                )
            if exc.status == 403:
                return False, ("Forbidden", f"creating TuningRun {run} was forbidden: {_api_message(exc)}")
            if exc.status in (400, 422):
                return False, ("RunRefused", f"the API server refused TuningRun {run}: {_api_message(exc)}")
            raise
        metrics.POLICY_RUNS_STARTED.labels(trigger=reason).inc()
        emit("Normal", "RunStarted", f"started TuningRun {run} for {gpu_type}: {reason} ({message})")
        return True, None

    def _finish(self, body: dict, previous: dict, status: dict, emit: Emit) -> dict | None:
        """Post a Warning when the policy becomes stalled (once, not every check); None when unchanged."""
        stall, was = condition(status, "Stalled") or {}, condition(previous, "Stalled") or {}
        if stall.get("status") == "True" and (was.get("status"), was.get("reason")) != ("True", stall.get("reason")):
            emit("Warning", stall["reason"], stall["message"])
        return None if status == previous else status


def _errors(exc: ValidationError) -> list[str]:
    return [f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()][:5]


def _api_message(exc: Exception) -> str:
    import json

    try:
        return str(json.loads(getattr(exc, "body", "") or "{}").get("message") or exc)[:500]
    except ValueError:
        return str(exc)[:500]
