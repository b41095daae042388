"""A batch after the one that wrote the default route's entry loads the engine that batch kept (the
bytes the catalog publishes) instead of building the default again: on the H100, resnet50's default
build took 16 s in a resumed run's batch. It builds the default as before when the kept bytes are
not the ones measured, when they were measured on another node or with another fingerprint, and when
they do not load here."""

import hashlib
import logging

from enginewright.api.fingerprint import Fingerprint
from enginewright.api.routes import Route
from enginewright.worker.batch import KEPT_DEFAULT
from enginewright.worker.measure import kept_engine
from tests.worker.conftest import make_worker


def first_batch(example, tmp_path):
    default = Route()
    owner = make_worker(example, tmp_path / "a")
    wrote = owner.run_batch([default], "stage1", "stage1-b000", default)
    assert [e.route_id for e in wrote] == [default.id]
    return default, owner


def later_worker(example, tmp_path):
    later = make_worker(example, tmp_path / "a")  # the same store and prefix, its own work dir
    later.ctx.workdir = tmp_path / "later-work"
    return later


def test_a_later_batch_loads_the_kept_default_and_builds_nothing_of_it(example, tmp_path, caplog):
    default, _ = first_batch(example, tmp_path)
    later = later_worker(example, tmp_path)
    # a model no build can read: the later batch's default can only load if it is not built again
    broken = tmp_path / "broken.onnx"
    broken.write_bytes(b"not an onnx model")
    later.ctx.model = broken
    routes = [Route.of({"enable_mem_pattern": "0"}), Route.of({"enable_cpu_mem_arena": "0"})]
    with caplog.at_level(logging.INFO, logger="enginewright.worker"):
        wrote = later.run_batch(routes, "stage2", "stage2-b000", default)
    said = [r.getMessage() for r in caplog.records]
    assert f"[stage2-b000] 2 routes and {KEPT_DEFAULT}, built 1 at a time" in said[0], said
    assert any("default route (baseline)" in m and KEPT_DEFAULT in m for m in said), said
    # the default loaded and the batch went on to its routes, whose own builds failed on the model
    assert [(e.route_id, e.outcome.value) for e in wrote] == [(r.id, "build-failed") for r in routes]


def test_a_kept_engine_that_is_not_the_measured_one_is_built_again(example, tmp_path, caplog):
    default, owner = first_batch(example, tmp_path)
    owner.ctx.store.put(owner.ctx.engine_key(default.id), b"other bytes", {})
    later = later_worker(example, tmp_path)
    route = Route.of({"enable_mem_pattern": "0"})
    with caplog.at_level(logging.INFO, logger="enginewright.worker"):
        wrote = later.run_batch([route], "stage2", "stage2-b000", default)
    assert not any(KEPT_DEFAULT in r.getMessage() for r in caplog.records)
    assert [(e.route_id, e.outcome.value) for e in wrote] == [(route.id, "ok")]


def test_a_kept_engine_that_does_not_load_here_is_built_instead(example, tmp_path, caplog):
    default, owner = first_batch(example, tmp_path)
    # bytes that are the ones the entry names (so they are loaded), but no engine at all
    entry = owner.existing()[default.id]
    owner.ctx.store.put(owner.ctx.engine_key(default.id), b"not an engine", {})
    digest = hashlib.sha256(b"not an engine").hexdigest()
    owner.ctx.store.put(
        owner.ctx.entry_key(default.id), entry.model_copy(update={"engine_sha256": digest}).to_json().encode()
    )
    later = later_worker(example, tmp_path)
    route = Route.of({"enable_mem_pattern": "0"})
    with caplog.at_level(logging.INFO, logger="enginewright.worker"):
        wrote = later.run_batch([route], "stage2", "stage2-b000", default)
    said = [r.getMessage() for r in caplog.records]
    assert any(f"{KEPT_DEFAULT} did not load here" in m for m in said), said
    assert [(e.route_id, e.outcome.value) for e in wrote] == [(route.id, "ok")]


def test_an_engine_measured_on_another_node_or_stack_is_not_loaded(example, tmp_path, monkeypatch):
    default, owner = first_batch(example, tmp_path)
    entry = owner.existing()[default.id]
    assert kept_engine(owner.ctx, default, entry, "stage2", "stage2-b000") is not None
    # a context with a fingerprint loads only an engine measured with it
    fingerprint = Fingerprint(
        backend="onnxruntime", model_sha256="0" * 64, compiler="onnxruntime-x", objective="gpuTime"
    )
    owner.ctx.fingerprint = fingerprint
    assert kept_engine(owner.ctx, default, entry, "stage2", "stage2-b000") is None  # measured with none
    measured = entry.model_copy(update={"fingerprint": fingerprint.for_route(default.id)})
    assert kept_engine(owner.ctx, default, measured, "stage2", "stage2-b000") is not None
    other = fingerprint.model_copy(update={"compiler": "onnxruntime-y"}).for_route(default.id)
    assert kept_engine(owner.ctx, default, entry.model_copy(update={"fingerprint": other}), "s", "b") is None
    monkeypatch.setenv("NODE_NAME", "another-node")
    assert kept_engine(owner.ctx, default, measured, "stage2", "stage2-b000") is None
