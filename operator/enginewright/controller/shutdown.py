"""The operator's async generators, closed oldest first when it stops.

When `asyncio.run` ends it closes the async generators still open all at once, in no order. kopf's
watch stream is such a generator, and it holds another one open (its `streaming_block` context
manager) while it waits to hand over an event. When the inner one happens to be closed first,
closing the outer one raises "generator didn't stop after athrow()" and asyncio logs it with a
traceback, on an otherwise clean stop (seen once in CI, when SIGTERM came while the watcher was
handling an event). Closed in the order they were first iterated, each outer generator is closed
before the generators it opened, and closes them itself as it unwinds.
"""

from __future__ import annotations

import asyncio
import sys
import weakref
from collections.abc import AsyncGenerator, Awaitable
from types import AsyncGeneratorType


class OpenGenerators:
    """The async generators of this thread's loop that are still alive, in the order they started."""

    def __init__(self) -> None:
        self._started: dict[int, weakref.ref[AsyncGenerator]] = {}

    def track(self) -> None:
        """Note every async generator as it starts (call inside the running loop; the loop's own hooks
        still run, and the loop restores its hooks when it stops)."""
        hooks = sys.get_asyncgen_hooks()

        def firstiter(agen: AsyncGenerator) -> None:
            key = id(agen)
            # A dead generator's entry goes with it (its id is free only after the callback has run).
            self._started[key] = weakref.ref(agen, lambda _ref: self._started.pop(key, None))
            if hooks.firstiter is not None:
                hooks.firstiter(agen)

        sys.set_asyncgen_hooks(firstiter=firstiter, finalizer=hooks.finalizer)

    def __len__(self) -> int:
        return len(self._started)

    async def close_oldest_first(self) -> None:
        """Close the generators still open, one after another, oldest first; an error closing one
        goes to the loop's exception handler, as asyncio reports it, and the rest are still closed."""
        loop = asyncio.get_running_loop()
        for ref in list(self._started.values()):
            agen = ref()
            if agen is None or (isinstance(agen, AsyncGeneratorType) and agen.ag_running):
                continue  # gone, or being iterated by a task still running: asyncio's shutdown has it
            try:
                await agen.aclose()
            except Exception as exc:
                loop.call_exception_handler(
                    {
                        "message": f"an error occurred during closing of asynchronous generator {agen!r}",
                        "exception": exc,
                        "asyncgen": agen,
                    }
                )


async def run_closing_generators(main: Awaitable[None]) -> None:
    """Await `main` (the operator), then close its async generators oldest first."""
    generators = OpenGenerators()
    generators.track()
    try:
        await main
    finally:
        await generators.close_oldest_first()
