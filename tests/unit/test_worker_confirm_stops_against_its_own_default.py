"""`Worker.confirm` hands the serving rounds an early stop judged against the confirmation's own
default route and the context's noise margin (the spec's floor), and none when told to time every
round. The rounds themselves are stubbed here (their stop is tested on real engines in
tests/worker/test_confirmation_round_interleaves.py and end to end in tests/e2e and tests/worker)."""

import pytest

from enginewright.api.cache import CacheEntry, Outcome
from enginewright.api.routes import Route
from enginewright.measure.paired import load_key
from enginewright.worker import batch
from enginewright.worker.batch import Worker
from tests.worker.conftest import make_worker


def entry(route: Route) -> CacheEntry:
    return CacheEntry(target="cpu", route_id=route.id, route=route.canonical, outcome=Outcome.ok, engine_uri="x")


@pytest.fixture
def worker(tmp_path) -> Worker:
    worker = make_worker(tmp_path, tmp_path)  # (no model is read: the rounds are stubbed)
    worker.ctx.noise_margin = 0.10
    return worker


def rounds(fast: str, slow: str, count: int = 3) -> dict[str, list[float]]:
    """Two engines of 3 loads each, `slow` 1.05x `fast` in every round (between the 0.03 and 0.10 margins)."""
    return {load_key(e, i): [scale] * count for e, scale in ((fast, 1.0), (slow, 1.05)) for i in range(3)}


def test_the_stop_is_judged_against_the_default_at_the_contexts_margin(worker, monkeypatch):
    default, candidate = entry(Route()), entry(Route.of({"a": "1"}))
    for e in (default, candidate):
        worker.ctx.store.put(worker.ctx.engine_key(e.route_id), b"engine")
    seen = {}

    def interleave(ctx, engines, count, folder, loads=1, settled=None, launched=None):
        seen.update(engines=list(engines), count=count, loads=loads, settled=settled)
        assert launched is not None  # the fresh process launched before the engines were fetched
        launched.close()  # (as the rounds close it)
        return {}

    monkeypatch.setattr(batch, "interleave", interleave)
    worker.confirm([candidate], default, 5, 3)
    assert seen["engines"] == [default.route_id, candidate.route_id] and seen["count"] == 5 and seen["loads"] == 3
    stop = seen["settled"]
    # the context's margin is 10% (line 0.90): a candidate 5% slower (1.05) or 5% faster (0.952) cannot win
    assert stop(rounds(fast=default.route_id, slow=candidate.route_id))
    assert stop(rounds(fast=candidate.route_id, slow=default.route_id))
    worker.ctx.noise_margin = 0.03  # line 0.97: the faster candidate (0.952) could still win, the slower not
    worker.confirm([candidate], default, 5, 3)
    assert not seen["settled"](rounds(fast=candidate.route_id, slow=default.route_id))
    assert seen["settled"](rounds(fast=default.route_id, slow=candidate.route_id))

    worker.confirm([candidate], default, 5, 3, early_stop=False)
    assert seen["settled"] is None
