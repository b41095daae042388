"""After its rounds a route's loads (its primer and its timed loads) leave the default's serving
process in one `drop` request, so the process collects their garbage once (a drop request took
0.085 s on an H100, and every route sent three)."""

from enginewright.api.routes import Route
from enginewright.worker.server import Server
from tests.worker.conftest import make_worker


def test_each_route_sends_one_drop_naming_all_its_loads(example, tmp_path, monkeypatch):
    asked: list[dict] = []
    real = Server._ask

    def recorded(self, request, timeout):
        asked.append(request)
        return real(self, request, timeout)

    monkeypatch.setattr(Server, "_ask", recorded)
    worker = make_worker(example, tmp_path)
    default = Route.of({})
    routes = [default, Route.of({"enable_mem_pattern": "0"}), Route.of({"enable_cpu_mem_arena": "0"})]
    with worker:
        wrote = worker.run_batch(routes, "stage1", "stage1-b000", default)
    assert [e.outcome.value for e in wrote] == ["ok"] * 3
    drops = [r for r in asked if r["op"] == "drop"]
    loads = worker.ctx.timing.loads
    assert len(drops) == 2  # one a route
    for drop in drops:
        assert len(drop["keys"]) == 1 + loads  # its primer and its timed loads
        assert {k.split("@")[0] for k in drop["keys"]} == {"route"}
