"""The worker waits for the serving process's threads to go quiet before each request that times an
engine (a round, interleaved rounds, measurements), and not after loads and drops, which time
nothing: a route's primer, its loads and their drops waited ~50 ms each for nothing."""

from enginewright.api.routes import Route
from enginewright.worker import server as server_module
from enginewright.worker.measure import build
from enginewright.worker.server import Server
from tests.worker.conftest import make_worker


def test_loads_and_drops_do_not_wait_and_every_timing_starts_quiet(example, tmp_path, monkeypatch):
    ctx = make_worker(example, tmp_path).ctx
    built = build(ctx, Route.of({}), "stage1", "b0")
    assert built.engine_path is not None
    waits: list[tuple[int, bool]] = []
    real = server_module.wait_quiet

    def counting(pid: int, *args, **kwargs) -> bool:
        quiet = real(pid, *args, **kwargs)
        waits.append((pid, quiet))
        return quiet

    monkeypatch.setattr(server_module, "wait_quiet", counting)
    server = Server(ctx, "a", built.engine_path, tmp_path / "serve", references=False)
    try:
        server.start(120)
        for key in ("b", "c"):
            server.add(key, built.engine_path, tmp_path / "serve" / key, 120, check=False)
        server.drop(["c"], 60)
        assert waits == []  # loads and a drop: nothing timed, nothing waited for
        assert len(server.interleave(["a", "b"], 60)) == 2
        assert server.time(60, key="b") > 0
        assert server.measurements(60, key="a").latency_ms > 0
        assert waits == [(server.proc.pid, True)] * 3  # one wait before each timing request, each quiet
    finally:
        server.close()
