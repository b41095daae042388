"""Status as kstatus expects it (pure): `observedGeneration` and the `Ready`, `Reconciling` and
`Stalled` conditions, which `kubectl wait --for=condition=Ready`, Flux and Helm read."""

from __future__ import annotations

from datetime import datetime, timezone


def now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def conditions(previous: list[dict], generation: int, state: str, reason: str, message: str) -> list[dict]:
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
        out.append({
            "type": kind, "status": status,
            "reason": reason if active else ("Ready" if state == "ready" else reason),
            "message": message if active else "",
            "lastTransitionTime": old.get("lastTransitionTime") if old.get("status") == status else now(),
            "observedGeneration": generation,
        })
    return out


def condition(status: dict | None, kind: str) -> dict | None:
    return next((c for c in (status or {}).get("conditions") or [] if c.get("type") == kind), None)


def is_true(status: dict | None, kind: str) -> bool:
    found = condition(status, kind)
    return bool(found and found.get("status") == "True")
