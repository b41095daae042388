"""kopf's namespace processor skips the items of its watch stream's listings; a namespace seen only
there (created between kopf's first listing and its stream's, or while the stream was down) went
unserved. controller/listed_namespaces.py hands those items on as added namespaces. Pure logic on
kopf's own processor and Insights; the operator test
tests/operator/test_namespaces_created_while_the_operator_starts_are_served.py shows it end to end."""

import asyncio

from kopf._cogs.structs import references
from kopf._core.reactor import observation

from enginewright.controller.listed_namespaces import serve_listed_namespaces


def listed(name: str, **metadata) -> dict:
    return {"type": None, "object": {"metadata": {"name": name, **metadata}}}


def served_after(events: list[dict]) -> set:
    insights = references.Insights()
    patterns = ["team-*"]

    async def feed():
        for event in events:
            await observation.process_discovered_namespace_event(
                raw_event=event, namespaces=patterns, insights=insights
            )

    asyncio.run(feed())
    return set(insights.namespaces)


def test_a_listed_namespace_that_matches_is_served(monkeypatch):
    monkeypatch.setattr(
        observation, "process_discovered_namespace_event", observation.process_discovered_namespace_event
    )
    assert served_after([listed("team-a")]) == set()  # kopf as it is: the listing's item is skipped
    assert serve_listed_namespaces()
    assert serve_listed_namespaces()  # installed once, not wrapped twice
    assert served_after(
        [listed("team-a"), listed("other-b"), {"type": "ADDED", "object": {"metadata": {"name": "team-c"}}}]
    ) == {"team-a", "team-c"}


def test_a_listed_namespace_being_deleted_is_not_served(monkeypatch):
    monkeypatch.setattr(
        observation, "process_discovered_namespace_event", observation.process_discovered_namespace_event
    )
    serve_listed_namespaces()
    metadata = {"name": "team-a", "deletionTimestamp": "2026-01-01T00:00:00Z"}
    gone = {
        "type": None,
        "object": {
            "metadata": metadata,
            "status": {"conditions": [{"type": "NamespaceContentRemaining", "status": "False"}]},
        },
    }
    assert served_after([{"type": "ADDED", "object": {"metadata": {"name": "team-a"}}}, gone]) == set()
