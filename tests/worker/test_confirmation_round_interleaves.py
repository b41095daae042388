"""The confirmation round loads every engine into one serving process and times them in rotating
order, one at a time, and stops before its last round when told the decision is settled; an engine
that cannot load is reported, not hung on."""

import os

import pytest

from enginewright.worker.measure import interleave
from tests.worker.conftest import make_worker, run_tune


@pytest.fixture(scope="module")
def default_engine(example, tmp_path_factory):
    out = tmp_path_factory.mktemp("confirm")
    assert run_tune(example, out, "--knob", "enable_mem_pattern=0", "--no-confirm").returncode == 0
    return next((out / "store/runs/local/engines").glob("e3b0c44298fc.*"))


def test_each_engine_is_timed_once_per_round(example, tmp_path, default_engine):
    rounds = interleave(
        make_worker(example, tmp_path).ctx,
        {"a": default_engine, "b": default_engine, "c": default_engine},
        4,
        tmp_path / "confirm",
    )
    assert set(rounds) == {"a", "b", "c"}
    assert all(len(times) == 4 and all(t > 0 for t in times) for times in rounds.values())
    logs = list((tmp_path / "confirm").rglob("serve.log"))
    assert [p.parent.name for p in logs] == ["serve"]  # one process for every engine
    loaded = sorted(p.name for p in (tmp_path / "confirm/serve").iterdir() if p.name.startswith(("load", "primer")))
    # each engine loaded from its own bytes: a primer (first load, never timed), then its timed load
    assert loaded == ["load", "load-a", "load-b", "load-c", "primer-b", "primer-c"]


def test_every_load_of_every_engine_is_timed_in_every_round(example, tmp_path, default_engine):
    rounds = interleave(
        make_worker(example, tmp_path).ctx, {"d": default_engine, "c": default_engine}, 3, tmp_path / "confirm", loads=3
    )
    assert set(rounds) == {"d", "d@2", "d@3", "c", "c@2", "c@3"}
    assert all(len(times) == 3 and all(t > 0 for t in times) for times in rounds.values())


def test_the_rounds_stop_once_settled_and_settled_is_asked_after_each_round_but_the_last(
    example, tmp_path, default_engine
):
    asked: list[dict[str, int]] = []

    def settled(times: dict[str, list[float]]) -> bool:
        asked.append({key: len(values) for key, values in times.items()})
        return len(asked) == 3

    rounds = interleave(
        make_worker(example, tmp_path).ctx,
        {"d": default_engine, "c": default_engine},
        5,
        tmp_path / "confirm",
        loads=2,
        settled=settled,
    )
    assert {key: len(values) for key, values in rounds.items()} == {"d": 3, "c": 3, "d@2": 3, "c@2": 3}
    assert asked == [{"d": n, "c": n, "d@2": n, "c@2": n} for n in (1, 2, 3)]  # every load timed each time

    asked.clear()
    never = interleave(
        make_worker(example, tmp_path / "never").ctx,
        {"d": default_engine, "c": default_engine},
        2,
        tmp_path / "never" / "confirm",
        settled=lambda times: asked.append(times) or False,
    )
    assert [len(v) for v in never.values()] == [2, 2] and len(asked) == 1  # not asked after the last round


def test_an_engine_that_cannot_load_is_reported(example, tmp_path, default_engine):
    broken = tmp_path / "broken.ort.tar"
    broken.write_bytes(b"not a tar archive")
    with pytest.raises(RuntimeError, match="confirmation: loading engine broken@primer failed: ReadError"):
        interleave(
            make_worker(example, tmp_path, timeout=60).ctx,
            {"ok": default_engine, "broken": broken},
            2,
            tmp_path / "confirm",
        )


def test_serving_processes_are_pinned_to_the_measuring_cpus(example, tmp_path, default_engine):
    from enginewright.worker.server import Server

    worker = make_worker(example, tmp_path)
    cpu = max(os.sched_getaffinity(0))
    worker.ctx.measure_cpus = frozenset({cpu})
    server = Server(worker.ctx, "pinned", default_engine, tmp_path / "serve", references=False)
    try:
        server.start(120)
        assert os.sched_getaffinity(server.proc.pid) == {cpu}
        threads = os.listdir(f"/proc/{server.proc.pid}/task")  # threads started after the pin inherit it
        assert all(os.sched_getaffinity(int(t)) == {cpu} for t in threads)
        assert server.time(60) > 0
    finally:
        server.close()


def test_measuring_cpus_follow_the_setting(monkeypatch):
    from enginewright.worker.context import measuring_cpus

    monkeypatch.delenv("ENGINEWRIGHT_MEASURE_CPUS", raising=False)
    assert measuring_cpus() is None  # off unless asked for: pinning every process to one core hurt on the H200
    monkeypatch.setenv("ENGINEWRIGHT_MEASURE_CPUS", "off")
    assert measuring_cpus() is None
    monkeypatch.setenv("ENGINEWRIGHT_MEASURE_CPUS", "0,1")
    assert measuring_cpus() == {0, 1}
