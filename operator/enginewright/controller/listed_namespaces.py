"""Namespaces that kopf sees only in a listing are served too.

With namespace patterns (ENGINEWRIGHT_NAMESPACES=team-*) kopf lists the namespaces once, then starts a
watch stream of namespaces, which lists them again and watches from that listing. Its namespace
processor skips the items of every such listing (events without a type), as if the first listing had
had them all. A namespace created between the two listings at start, or while the stream was down
(it lists again after an API server restart or a "410 Gone"), is seen only in a listing, and is not
served until it changes: its TuningRuns get no status, ever. Seen in CI (a run applied right after
the operator came up waited 300 s with an empty status) and reproduced by
tests/operator/test_namespaces_created_while_the_operator_starts_are_served.py.

`serve_listed_namespaces()` hands a listing's items to kopf's own processor as if they had been
added: kopf then notes a matching namespace it already serves again (a set), and one it did not yet
serve gets its watch streams, as in the first listing. kopf's internals, checked for: where they are
not as expected the operator says so in its log and runs with kopf as it is.
"""

from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger("enginewright.controller")


def serve_listed_namespaces() -> bool:
    """Install the wrapper in kopf (once); True when it is in place."""
    try:
        from kopf._core.reactor import observation
    except ImportError:
        process = None
    else:
        process = getattr(observation, "process_discovered_namespace_event", None)
    if process is None or not callable(getattr(observation, "revise_namespaces", None)):
        log.warning(
            "kopf's namespace observer is not as expected: a namespace created while its watch stream "
            "lists the namespaces may go unserved until it changes"
        )
        return False
    if getattr(process, "serves_listed_namespaces", False):
        return True

    async def process_listed_too(*, raw_event: Any, **kwargs: Any) -> None:
        if raw_event.get("type") is None and isinstance(raw_event.get("object"), dict):
            raw_event = {"type": "ADDED", "object": raw_event["object"]}
        await process(raw_event=raw_event, **kwargs)

    process_listed_too.serves_listed_namespaces = True  # type: ignore[attr-defined]
    observation.process_discovered_namespace_event = process_listed_too
    return True
