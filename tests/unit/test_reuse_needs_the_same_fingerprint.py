"""An earlier run's cache entry is reused only when its fingerprint is this run's, part for part:
changing any one part (model bytes, shapes, GPU, compute capability, compiler, CUDA, driver major,
settings, route, accuracy data, metric, threshold, tolerances where they count, outputs, objective)
reuses nothing. Entries without a fingerprint are read but never reused; the default route is never
reused (the flow's side: test_a_reused_route_never_wins_unconfirmed.py)."""

import hashlib

import pytest

from enginewright.api.cache import CacheEntry, Outcome, TimingStats, Versions
from enginewright.api.fingerprint import Fingerprint, fingerprint_of
from enginewright.api.routes import Route, route_id
from enginewright.store import LocalStore
from enginewright.worker.batch import Worker
from enginewright.worker.context import Accuracy, WorkerContext

VERSIONS = Versions(
    compiler="inductor-torch-2.9.0-triton-3.5.0",
    cuda="12.8",
    driver="570.124.06",
    gpu_name="NVIDIA H200",
    compute_capability="9.0",
)
ROUTE = Route.of({"max_autotune": "1"})


def base(**changes) -> Fingerprint:
    parts = dict(
        backend="inductor",
        backend_options={"device": "cuda"},
        model_sha256="a" * 64,
        versions=VERSIONS,
        objective="gpuTime",
        input_shapes={"x": [8, 64]},
        settings={"dtype": "float16"},
        data_sha256=["b" * 64, "c" * 64],
        metric="cosine",
        threshold=1e-4,
        atol=1e-5,
        rtol=1e-5,
        outputs=["y"],
    )
    parts.update(changes)
    return fingerprint_of(**parts)


# One changed value for every part of a fingerprint (route_id: another route).
CHANGED = {
    "backend": "tensorrt",
    "backend_options": {"device": "cpu"},
    "model_sha256": "d" * 64,
    "input_shapes": {"x": [16, 64]},
    "declared_shapes": [{"name": "x", "opt": [16, 64]}],
    "gpu_product": "NVIDIA H100 80GB HBM3",
    "compute_capability": "8.9",
    "compiler": "inductor-torch-2.9.1-triton-3.5.0",
    "cuda": "12.9",
    "driver_major": "580",
    "settings": {"dtype": "bfloat16"},
    "route_id": route_id("-max_autotune=0"),
    "data_sha256": ["b" * 64, "e" * 64],
    "metric": "max",
    "threshold": 1e-3,
    "atol": 1e-3,
    "rtol": 1e-3,
    "outputs": ["y", "z"],
    "objective": "latency",
}


def test_every_part_is_listed_here():
    assert set(CHANGED) == set(Fingerprint.model_fields)


def entry(fingerprint: Fingerprint | None, route: Route = ROUTE, run: str = "earlier", **extra) -> CacheEntry:
    fields = dict(
        target="local",
        route_id=route.id,
        route=route.canonical,
        knobs=route.as_dict,
        outcome=Outcome.ok,
        timing=TimingStats(median_ms=1.0, mean_ms=1.0, p90_ms=1.0, min_ms=1.0, n=10),
        objective="gpuTime",
        versions=VERSIONS,
        run=run,
        fingerprint=fingerprint.for_route(route.id) if fingerprint else None,
    )
    fields.update(extra)
    return CacheEntry(**fields)


def worker(tmp_path, fingerprint: Fingerprint | None, run: str = "this-run") -> Worker:
    ctx = WorkerContext(
        backend="inductor",
        model=tmp_path / "model",
        store=LocalStore(tmp_path / "store"),
        prefix="runs/local",
        target="local",
        workdir=tmp_path / "work",
        accuracy=Accuracy([], []),
        timing={"objective": "gpuTime"},
        fingerprint=fingerprint,
        run=run,
    )
    return Worker(ctx)


def put(w: Worker, e: CacheEntry) -> None:
    w.ctx.store.put(w.ctx.entry_key(e.route_id), e.to_json().encode())


def test_the_same_fingerprint_is_reused_and_says_from_where(tmp_path):
    w = worker(tmp_path, base())
    put(w, entry(base()))
    found = w.existing()[ROUTE.id]
    assert found.reused and found.reused_from.startswith("run earlier: ")
    assert str(tmp_path / "store") in found.reused_from


@pytest.mark.parametrize("part", sorted(CHANGED))
def test_one_changed_part_reuses_nothing(tmp_path, part):
    earlier = base().model_copy(update={part: CHANGED[part]})
    w = worker(tmp_path, base())
    stored = entry(earlier)
    if part == "route_id":  # an entry that claims another route's measurement
        stored = stored.model_copy(update={"fingerprint": earlier})
    put(w, stored)
    assert w.existing() == {}, f"an entry with another {part} was reused"


def test_all_parts_changed_one_at_a_time_give_zero_false_reuses(tmp_path):
    reused = 0
    for part, value in CHANGED.items():
        w = worker(tmp_path / part, base())
        e = entry(base().model_copy(update={part: value}))
        if part == "route_id":
            e = e.model_copy(update={"fingerprint": base().model_copy(update={part: value})})
        put(w, e)
        reused += len(w.existing())
    assert reused == 0


def test_what_does_not_decide_pass_or_fail_is_not_part_of_it():
    assert base(versions=VERSIONS.model_copy(update={"driver": "570.200.01", "node": "gpu-7"})).digest == base().digest
    assert base(atol=1e-2, rtol=1e-2).digest == base().digest  # cosine does not use the tolerances
    assert base(metric="l0", atol=1e-2).digest != base(metric="l0").digest  # l0 does
    unchecked = base(threshold=None)
    assert unchecked.metric is None and base(threshold=None, metric="max").digest == unchecked.digest


def test_an_entry_without_a_fingerprint_is_read_but_never_reused(tmp_path):
    w = worker(tmp_path, base())
    put(w, entry(None))
    assert w.existing() == {}
    own = worker(tmp_path, base(), run="earlier")  # the run that wrote it still resumes from it
    assert ROUTE.id in own.existing() and not own.existing()[ROUTE.id].reused
    CacheEntry.from_json('{"target": "local", "routeId": "x", "route": "", "outcome": "ok"}')  # older entries parse


def test_a_kept_engine_replaced_under_its_key_is_not_reused(tmp_path):
    w = worker(tmp_path, base())
    engine = b"engine bytes"
    e = entry(base(), engine_uri="file:///engine", engine_sha256=hashlib.sha256(engine).hexdigest())
    put(w, e)
    w.ctx.store.put(w.ctx.engine_key(ROUTE.id), engine)
    assert ROUTE.id in worker(tmp_path, base()).existing()
    w.ctx.store.put(w.ctx.engine_key(ROUTE.id), b"another run's engine")
    assert worker(tmp_path, base()).existing() == {}
