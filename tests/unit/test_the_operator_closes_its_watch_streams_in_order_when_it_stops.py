"""When the operator stops, the async generators it leaves open are closed oldest first, so a watch
stream that holds a context manager open is closed before the manager's own generator and the log
holds no "generator didn't stop after athrow()" traceback (CI saw one on a clean SIGTERM). The
generators are shaped like kopf's `infinite_watch` around its `streaming_block`."""

from __future__ import annotations

import asyncio
import contextlib
import logging

from enginewright.controller.shutdown import OpenGenerators, run_closing_generators

STREAMS = 20  # with asyncio's unordered close, some of 20 are closed inner-first (4 to 8 of 20 when tried)


@contextlib.asynccontextmanager
async def streaming_block(closed: list[str]):
    waiter = asyncio.get_running_loop().create_future()
    try:
        yield waiter
    finally:
        waiter.cancel()
        closed.append("block")


async def infinite_watch(closed: list[str]):
    while True:
        async with streaming_block(closed):
            yield "event"  # the watcher stops here while it handles the event
        await asyncio.sleep(0)


async def watchers_stopped_mid_event(kept: list, closed: list[str]) -> None:
    for _ in range(STREAMS):
        stream = infinite_watch(closed)
        assert await stream.__anext__() == "event"
        kept.append(stream)  # alive until the loop shuts down, as kopf's are


def athrow_errors(caplog) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.exc_info and "didn't stop after athrow" in str(r.exc_info[1])]


def test_asyncios_own_shutdown_closes_some_streams_inner_first(caplog):
    """The failure this guards against, as it happens without the ordered close."""
    kept: list = []
    closed: list[str] = []
    with caplog.at_level(logging.ERROR, logger="asyncio"):
        asyncio.run(watchers_stopped_mid_event(kept, closed))
    assert athrow_errors(caplog), "asyncio closed every stream before its block: the scenario did not happen"


def test_streams_closed_oldest_first_log_no_error_and_close_every_block(caplog):
    kept: list = []
    closed: list[str] = []
    with caplog.at_level(logging.ERROR, logger="asyncio"):
        asyncio.run(run_closing_generators(watchers_stopped_mid_event(kept, closed)))
    assert not [r for r in caplog.records if r.name == "asyncio"], [r.getMessage() for r in caplog.records]
    assert closed == ["block"] * STREAMS


def test_an_error_closing_a_generator_is_still_reported_and_the_rest_are_closed(caplog):
    closed: list[str] = []

    async def broken():
        try:
            yield 1
        finally:
            raise ValueError("broken on close")

    async def main(kept: list) -> None:
        for make in (broken, lambda: infinite_watch(closed)):
            stream = make()
            await stream.__anext__()
            kept.append(stream)

    kept: list = []
    with caplog.at_level(logging.ERROR, logger="asyncio"):
        asyncio.run(run_closing_generators(main(kept)))
    (record,) = [r for r in caplog.records if r.exc_info]
    assert isinstance(record.exc_info[1], ValueError)
    assert "closing of asynchronous generator" in record.getMessage()
    assert closed == ["block"]


def test_finished_generators_are_not_kept():
    async def short():
        yield 1

    async def main() -> int:
        generators = OpenGenerators()
        generators.track()
        for _ in range(1000):
            async for _item in short():
                pass
        return len(generators)

    assert asyncio.run(main()) == 0
