"""TuningPolicy spec and status: re-tune when a target's stack changes.

A TuningRun's spec is immutable (its results belong to the spec that produced them), so a policy
never changes a run: when the stack a target's winner was measured on changes (the driver major on
the nodes of its GPU type, the worker image that fixes the compiler version, the model's digest) it
starts a new TuningRun from its template, in its own namespace, with a name derived from the stack.
`enginewright crds` generates the policy's CRD from these models, as it does the TuningRun's.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import ConfigDict, Field, field_validator

from enginewright.api.models import Condition, ObjectMeta, TuningRunSpec, WireModel
from enginewright.api.names import API_VERSION, POLICY_KIND

RUNS_KEPT = 20  # names of started runs a target's status lists (the runs themselves stay until deleted)
SCHEDULE_MINIMUM = "1h"  # the shortest spec.triggers.schedule: a re-measure builds and times engines
# A Go duration (metav1.Duration) in h, m and s, each at most once and in that order, with digits
# bounded so that no value overflows Go's (and so CEL's) duration, 2562047h: "3000000h" matched the
# unbounded pattern and then failed duration() in the CRD's rule with an evaluation error, not a reason.
# The largest value, 999999h9999999m99999999s, is about 136 years. minLength 2 refuses "".
DURATION_PATTERN = r"^([0-9]{1,6}(\.[0-9]{1,9})?h)?([0-9]{1,7}(\.[0-9]{1,9})?m)?([0-9]{1,8}(\.[0-9]{1,9})?s)?$"
_DURATION_PART = re.compile(r"([0-9]+(?:\.[0-9]+)?)(h|m|s)")
_UNIT_SECONDS = {"h": 3600.0, "m": 60.0, "s": 1.0}


def duration_seconds(text: str) -> float:
    """A Go-style duration ("168h", "1h30m", "90m") in seconds; ValueError when it is not one."""
    if not text or not re.fullmatch(DURATION_PATTERN, text):
        raise ValueError(
            f"{text!r} is not a duration such as 168h, 24h or 1h30m (units h, m, s, each at most once and in "
            "that order, with at most 6 digits of hours, 7 of minutes, 8 of seconds)"
        )
    return sum(float(number) * _UNIT_SECONDS[unit] for number, unit in _DURATION_PART.findall(text))


class Triggers(WireModel):
    """Which changes of a target's stack start a new run."""

    driver_major: bool = Field(
        True,
        description="A new CUDA driver major on the nodes of the target's GPU type (GPU feature discovery's "
        "nvidia.com/cuda.driver.major label), once all of them agree.",
    )
    compiler_version: bool = Field(
        True,
        description="A new worker image for the template's compiler (the operator's setting or "
        "template.compiler.image): the image fixes the compiler version; the version inside it is not read.",
    )
    model_digest: bool = Field(True, description="A new template.model.sha256.")
    schedule: str | None = Field(
        None,
        description=f"Re-measure each target's published winner (with its runners-up) against the default, or a "
        f"default that won against its runners-up, this often, on an unchanged stack: a duration such as 168h or 24h (units h, m, s, "
        f"each at most once and in that order; at least "
        f"{SCHEDULE_MINIMUM}), counted from when the policy recorded the target's current run (its startedAt). "
        "Unset: no schedule.",
        json_schema_extra={
            "minLength": 2,
            "maxLength": 64,
            "pattern": DURATION_PATTERN,
            # A value that is not a duration is the pattern's to refuse: duration() of it is an evaluation
            # error, which the API server does not ratchet, so every status write of a policy stored
            # with it (before this rule, or past an older CRD) would be refused (422).
            "x-kubernetes-validations": [
                {
                    # (size: the pattern matches "", which minLength refuses but ratchets for a value
                    # stored past it, while duration('') would be an evaluation error)
                    "rule": f"self.size() < 2 || !self.matches(r'{DURATION_PATTERN}') || "
                    f"duration(self) >= duration('{SCHEDULE_MINIMUM}')",
                    "message": f"must be at least {SCHEDULE_MINIMUM}, e.g. 168h (a re-measure builds and times "
                    "engines on the target's GPUs)",
                }
            ],
        },
    )

    @field_validator("schedule")
    @classmethod
    def _at_least_the_minimum(cls, schedule: str | None) -> str | None:
        if schedule is not None and duration_seconds(schedule) < duration_seconds(SCHEDULE_MINIMUM):
            raise ValueError(f"spec.triggers.schedule must be at least {SCHEDULE_MINIMUM} (got {schedule})")
        return schedule

    @property
    def schedule_seconds(self) -> float | None:
        return duration_seconds(self.schedule) if self.schedule else None


class TuningPolicySpec(WireModel):
    """The run to start for each target, and when to start it again."""

    template: TuningRunSpec = Field(
        description="The TuningRun spec each started run gets, with targets narrowed to the one target whose "
        "stack changed (publish.modelName defaults to the policy's name, so every run publishes to one "
        "catalog model). Unlike a run's spec it may be edited; an edit is used by the next run and starts "
        "none by itself, except a new model.sha256 (triggers.modelDigest)."
    )
    triggers: Triggers = Field(default_factory=Triggers, description="Which stack changes start a new run.")


class Stack(WireModel):
    """What a target's measurements depend on that can change under a published winner."""

    driver_major: str | None = Field(
        None, description="CUDA driver major of the nodes of the GPU type; unset while no node reports one."
    )
    compiler_image: str = Field(description="The worker image that builds and measures (it fixes the compiler).")
    model_digest: str | None = Field(None, description="template.model.sha256, when the template gives one.")


class PolicyTargetStatus(WireModel):
    """What the policy saw and did for one GPU type of its template."""

    gpu_type: str = Field(description="The template's targets[].gpuType.")
    stack: Stack | None = Field(None, description="The stack the current run was started for.")
    observed: Stack | None = Field(None, description="The stack seen at the last check.")
    run: str | None = Field(None, description="The TuningRun (in this namespace) measuring `stack`.")
    reason: str | None = Field(
        None,
        description="Why that run started: Initial, or the changed parts, e.g. DriverMajorChanged, "
        "CompilerVersionChanged, ModelDigestChanged (a re-measure of the published winner when there is one), "
        "Scheduled (triggers.schedule: a re-measure on an unchanged stack); "
        "after a re-measure, WinnerConfirmed, or WinnerRegressed, RunnerUpWins or RemeasureFailed (a full re-tune "
        "started).",
    )
    message: str | None = Field(None, description="What changed (old -> new), or why the policy waits.")
    remeasure: str | None = Field(
        None,
        description="The published winner's route that the current run re-measures against the default on the "
        "new stack (a run of spec.search.routes; empty: the default route, re-measured on schedule against its "
        "runners-up); unset once that run has decided: WinnerConfirmed (it published "
        "the winner for the new stack) or WinnerRegressed / RunnerUpWins (the policy started a full re-tune).",
    )
    runners_up: list[str] = Field(
        default_factory=list,
        description="The published run's stage-1 routes that came closest to its winner (up to 2, from its cache "
        "entries) that the re-measure measures too: one of them winning it (RunnerUpWins) starts the full re-tune.",
    )
    started_at: str | None = Field(
        None, description="When the policy recorded that run (RFC 3339); triggers.schedule counts from it."
    )
    next_remeasure: str | None = Field(
        None,
        description="With triggers.schedule: when the published winner of the current run is re-measured next "
        "(startedAt + schedule, RFC 3339); unset while there is none to re-measure.",
    )
    runs: list[str] = Field(
        default_factory=list,
        description=f"Runs this policy started for the target, oldest first (the last {RUNS_KEPT}).",
    )


class TuningPolicyStatus(WireModel):
    """Observed state of a TuningPolicy."""

    model_config = ConfigDict(extra="allow")  # kopf keeps its own bookkeeping beside ours

    observed_generation: int | None = Field(
        None, description="metadata.generation this status was written for; an older one is not yet about the spec."
    )
    conditions: list[Condition] = Field(
        default_factory=list,
        description="Ready (True: every target has a run for the stack last seen), Reconciling (True while "
        "the nodes of a GPU type disagree on their driver) and Stalled (True: the policy cannot go on without a "
        "change; the reason says why), as kstatus reads them; and WinnerRegressed (True while a target's current "
        "run is the full re-tune started because its published winner no longer beat the default on a new stack).",
    )
    targets: list[PolicyTargetStatus] = Field(default_factory=list, description="Per GPU type of the template.")
    message: str | None = Field(None, description="The policy's latest news.")


class TuningPolicy(WireModel):
    """A manifest: apiVersion, kind, metadata, spec (and status when read back)."""

    model_config = ConfigDict(extra="ignore")

    api_version: Literal[API_VERSION] = API_VERSION  # type: ignore[valid-type]
    kind: Literal[POLICY_KIND] = POLICY_KIND  # type: ignore[valid-type]
    metadata: ObjectMeta
    spec: TuningPolicySpec
    status: TuningPolicyStatus | None = None
