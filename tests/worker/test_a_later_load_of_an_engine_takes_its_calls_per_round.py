"""A later load of an engine file the serving process holds takes the calls per round its earlier
load found, instead of timing trial rounds again (`child.same_engine`): 0.06 s a load of a 0.08 ms
engine on an H100, 28 loads in one run. Another file is calibrated as before."""

import shutil

from enginewright.api.routes import Route
from enginewright.worker.measure import build
from enginewright.worker.server import Server
from tests.worker.conftest import make_worker


def test_a_second_load_of_the_same_file_takes_the_first_loads_calls(example, tmp_path):
    ctx = make_worker(example, tmp_path).ctx
    built = build(ctx, Route.of({}), "stage1", "b0")
    assert built.engine_path is not None
    other = tmp_path / f"copy{built.engine_path.suffix}"
    shutil.copyfile(built.engine_path, other)  # the same bytes in another file: another engine
    server = Server(ctx, "a", built.engine_path, tmp_path / "serve", references=True)
    try:
        first = server.start(120)
        again = server.add("a@2", built.engine_path, tmp_path / "serve" / "a2", 120, check=False)
        elsewhere = server.add("b", other, tmp_path / "serve" / "b", 120, check=False)
    finally:
        server.close()
    assert first["calls_from"] is None  # trial rounds
    assert (again["calls_from"], again["calls"]) == ("a", first["calls"])
    assert again["seconds"]["calls_per_round"] <= 0.001  # none timed (rounded to 1 ms)
    assert elsewhere["calls_from"] is None  # another file: its own trial rounds
