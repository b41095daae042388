"""Which earlier entries a TuningRun takes (`controller.reuse`): only keys of other runs of its own
namespace for its GPU type, only entries with its fingerprint, never the default route's, never an
entry that was itself a copy, and the newest of a route."""

from enginewright.api.routes import Route, route_id
from enginewright.controller.reuse import entry_keys, pick, source_run
from tests.unit.test_reuse_needs_the_same_fingerprint import ROUTE, base, entry

NS = "runs/team-a/"
OWN = "runs/team-a/second-22222222/cpu"


def test_only_other_runs_of_this_namespace_and_gpu_type_are_read():
    keys = [
        "runs/team-a/first-11111111/cpu/entries/abc.json",
        "runs/team-a/first-11111111/cpu/engines/abc.ort.tar",
        "runs/team-a/first-11111111/NVIDIA-H200/entries/abc.json",
        "runs/team-a/second-22222222/cpu/entries/abc.json",
        "runs/team-ab/first-33333333/cpu/entries/abc.json",
        "runs/team-b/first-44444444/cpu/entries/abc.json",
    ]
    assert entry_keys(keys, NS, "cpu", OWN) == ["runs/team-a/first-11111111/cpu/entries/abc.json"]
    assert source_run(keys[0], NS) == "first-11111111"


def test_the_newest_matching_entry_of_each_route_is_taken_and_never_the_default():
    default = Route.of({})
    old = entry(base(), finished_at="2026-12-01T00:00:00Z")
    new = entry(base(), finished_at="2026-12-02T00:00:00Z")
    other = entry(base(model_sha256="f" * 64))
    copy = entry(base()).model_copy(update={"reused_from": "first-1: s3://..."})
    found = [("a", old), ("b", new), ("c", other), ("d", entry(base(), route=default)), ("e", copy)]
    chosen = pick(found, base(), route_id(""), have=set())
    assert {k: v[0] for k, v in chosen.items()} == {ROUTE.id: "b"}
    assert pick(found, base(), route_id(""), have={ROUTE.id}) == {}  # the run measured it already
    assert pick([("c", other)], base(), route_id(""), have=set()) == {}
