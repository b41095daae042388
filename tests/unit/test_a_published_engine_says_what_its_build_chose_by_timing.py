"""A build that chose kernel configs by timing them is one draw (Inductor times a kernel's few configs,
or descends through them, while building, and the engine keeps its choice): on an H100 resnet50's
builds of one route chose otherwise for 14 of 18 kernels (CUDA graphs) and 24 of 24 (coordinate
descent) and ran up to 1.18x apart (docs/benchmarks.md, session 44). So `tune`'s last lines,
report.md and the published provenance say how many kernels each engine's build chose so, and that
the times are of these engines, not of a rebuild of their routes; nothing where no build chose
anything or the backend does not say."""

import json

from enginewright.api.contracts import EngineFacts, TunedAtBuild
from enginewright.api.routes import route_id
from enginewright.report import headline, markdown
from tests.unit.entries import measured


def run(winner_info: dict | None, default_info: dict | None, winner: bool = True):
    default = measured({}, 3.0, load_info=default_info)
    tuned = measured({"coordinate_descent_tuning": "true", "triton.cudagraphs": "true"}, 1.6, load_info=winner_info)
    summary = {
        "model": "resnet50.pt2",
        "default_id": route_id(""),
        "winner_id": tuned.route_id if winner else route_id(""),
        "decision": "decided",
    }
    return summary, [default, tuned]


def test_the_headline_and_the_report_say_what_both_builds_chose_by_timing():
    summary, entries = run(
        {"compiled": 1, "tuned_placed": 24, "tuned_by_descent": 24, "tuned_here": 0},
        {"compiled": 1, "tuned_placed": 18, "tuned_by_descent": 0, "tuned_here": 0},
    )
    said = (
        "kernel configs autotuned while building: winner 24 (24 by coordinate descent), default 18; the "
        "published engine is the winner's as measured, and a rebuild of a route autotunes again"
    )
    assert f"builds: {said}" in headline(summary, entries)
    assert f"- **builds**: {said}" in markdown(summary, entries)
    facts = TunedAtBuild.of(entries[1])
    assert (facts.kernels, facts.by_coordinate_descent) == (24, 24) and "rebuild" in facts.note
    assert "max_autotune" in facts.note  # what is not counted: choices compiled into the code


def test_a_kept_default_is_named_the_default():
    summary, entries = run(None, {"compiled": 1, "tuned_placed": 18, "tuned_by_descent": 0}, winner=False)
    line = next(x for x in headline(summary, entries).splitlines() if x.startswith("builds:"))
    assert line.startswith("builds: kernel configs autotuned while building: default 18;"), line
    assert "winner 18" not in line and "winner 0" not in line


def test_nothing_is_said_where_no_build_chose_by_timing_or_the_backend_does_not_say():
    for winner_info, default_info in (
        ({"compiled": 1, "tuned_placed": 0, "tuned_by_descent": 0}, {"compiled": 1, "tuned_placed": 0}),
        (None, None),  # ONNX Runtime, TensorRT: the load says nothing of it
    ):
        summary, entries = run(winner_info, default_info)
        assert "builds:" not in headline(summary, entries)
        assert "**builds**" not in markdown(summary, entries)
    summary, entries = run({"compiled": 1, "tuned_placed": 0, "tuned_by_descent": 0}, None)
    untuned = TunedAtBuild.of(entries[1])
    assert untuned.kernels == 0 and "no autotuned kernel config" in untuned.note  # said so, what is not counted too
    assert "max_autotune" in untuned.note
    summary, entries = run(None, None)
    assert TunedAtBuild.of(entries[1]) is None
    summary, entries = run({"compiled": 1, "tuned_placed": 3}, None)  # a load before tuned_by_descent
    assert TunedAtBuild.of(entries[1]).by_coordinate_descent is None


def test_the_provenance_field_is_camel_case_and_optional():
    summary, entries = run({"compiled": 1, "tuned_placed": 2, "tuned_by_descent": 1}, None)
    facts = EngineFacts(uri="s3://b/e", sha256="1" * 64, tuned_at_build=TunedAtBuild.of(entries[1]))
    wire = json.loads(facts.model_dump_json(by_alias=True))
    assert wire["tunedAtBuild"]["kernels"] == 2 and wire["tunedAtBuild"]["byCoordinateDescent"] == 1
    assert EngineFacts.model_validate(wire).tuned_at_build.kernels == 2
    assert EngineFacts.model_validate({"uri": "s3://b/e", "sha256": "1" * 64}).tuned_at_build is None
