"""A dry run's plan (`spec.search.dryRun`): every route the flow would build, by the Job that would
build it, in the ConfigMap `<run>-plan-<gpu-type>` (data `routes.txt`), and the target done with
what it lists. Pure: the reconciler applies the ConfigMap.
"""

from __future__ import annotations

from enginewright.api.models import TargetStatus
from enginewright.controller.children import RunRef, child_name, labels
from enginewright.controller.status import target_done
from enginewright.search.flow import RunBatches

SHOWN = 64  # candidates listed in the status; the ConfigMap has them all


def plan_lines(step: RunBatches) -> list[str]:
    """One line per route, in the order the Jobs would build them: `<batch> <route id> <route>`
    (`(default)` for the default route)."""
    return [f"{b.name} {r.id} {r.canonical or '(default)'}" for b in step.batches for r in b.routes]


def plan_config_map(run: RunRef, gpu_type: str, step: RunBatches) -> dict:
    """The plan's ConfigMap, owned by the run (so it goes with it)."""
    return {
        "metadata": {
            "name": child_name(run.name, "plan", gpu_type, limit=253),
            "namespace": run.namespace,
            "labels": labels(run, gpu_type, component="plan"),
            "ownerReferences": [run.owner_reference()],
        },
        "data": {"routes.txt": "\n".join(plan_lines(step)) + "\n"},
    }


def planned(status: TargetStatus, step: RunBatches, config_map: str) -> TargetStatus:
    """The target done by its dry run: the routes it would build (the first SHOWN), how many, and
    where the whole plan is."""
    candidates = [r.canonical or "(default)" for b in step.batches for r in b.routes]
    return target_done(
        status.model_copy(update={"candidates": candidates[:SHOWN], "planned": len(candidates)}),
        f"dry run: {len(candidates)} routes in {len(step.batches)} Job(s) would be built (ConfigMap {config_map})",
    )
