"""A policy compares, re-measures and ranks routes as its template builds them now: when the
template's base settings took a published winner's knob (an edit starts no run), that knob is part
of the default route as built (`search.planners.as_built`), so the re-measure plans the winner
without it. The policy must compare the re-measure's winner with the published one in those terms
(else a confirmed winner reads as a runner-up that won, RunnerUpWins), and a winner whose every knob
is now a base setting is the default route: the stack change starts the full run at once, with no
re-measure that could only call it a regression (controller.policy, pure)."""

from __future__ import annotations

from enginewright.api.models import CompilerName
from enginewright.api.policy import Stack, Triggers
from enginewright.controller.policy import (
    REGRESSED,
    RUNNER_UP_WINS,
    DriverReading,
    RunOutcome,
    as_built_outcome,
    decide,
    over_base,
    remeasure_name,
    run_manifest,
    run_name,
    runners_up,
    template_base,
    with_runners_up,
)
from tests.unit.entries import measured
from tests.unit.test_a_policy_starts_a_run_only_when_the_stack_changes import template

OLD = Stack(driver_major="550", compiler_image="reg/worker-onnxruntime:1", model_digest="a" * 64)
NEW = OLD.model_copy(update={"driver_major": "560"})
GPU = "NVIDIA-H200"
PUBLISHED = "-enable_mem_pattern=0 -graph_optimization_level=disable"  # won over a base of {}
BASE = {"graph_optimization_level": "disable"}  # the template's base since


def stack_change(published: str, base: dict[str, str]):
    current = as_built_outcome(RunOutcome("Succeeded", published), base)
    return decide("mlp", GPU, Triggers(), NEW, DriverReading("560"), OLD, current)


def test_the_re_measure_plans_the_winner_without_the_knob_the_base_took():
    assert over_base(PUBLISHED, BASE) == "-enable_mem_pattern=0"
    assert over_base(PUBLISHED, {}) == PUBLISHED and over_base("", BASE) == ""
    decision = stack_change(PUBLISHED, BASE)
    assert (decision.action, decision.remeasure) == ("start", "-enable_mem_pattern=0")
    spec = template()
    spec.compiler.settings = dict(BASE)
    doc = run_manifest("mlp", "team-a", "uid-1", spec, spec.targets[0], decision)
    assert doc["spec"]["search"]["routes"] == ["-enable_mem_pattern=0"]


def test_the_re_measure_that_confirms_the_winner_as_built_now_is_winner_confirmed():
    check = stack_change(PUBLISHED, BASE)
    # the re-measure run, planned over BASE, publishes the winner as it built it
    published_again = as_built_outcome(RunOutcome("Succeeded", "-enable_mem_pattern=0"), BASE)
    after = decide(
        "mlp",
        GPU,
        Triggers(),
        NEW,
        DriverReading("560"),
        NEW,
        published_again,
        check.remeasure,
        current_run=remeasure_name("mlp", GPU, NEW),
    )
    assert (after.action, after.reason) == ("record", "WinnerConfirmed")
    assert after.reason != RUNNER_UP_WINS


def test_a_winner_whose_every_knob_is_now_a_base_setting_starts_the_full_run_at_once():
    decision = stack_change("-graph_optimization_level=disable", BASE)
    assert (decision.action, decision.run, decision.remeasure) == ("start", run_name("mlp", GPU, NEW), None)
    assert decision.reason == "DriverMajorChanged" and decision.runners_up == ()


def test_a_re_measure_running_when_the_template_takes_the_winners_knobs_is_judged_as_planned():
    # the re-measure of PUBLISHED started over a base of {}; the template then took both its knobs
    both = {"enable_mem_pattern": "0", "graph_optimization_level": "disable"}

    def judged(published: str):
        current = as_built_outcome(RunOutcome("Succeeded", published), both, remeasuring=PUBLISHED)
        return decide("mlp", GPU, Triggers(), NEW, DriverReading("560"), NEW, current, PUBLISHED)

    assert judged("").reason == REGRESSED  # its default won: not "the default kept against its runners-up"
    assert (judged(PUBLISHED).action, judged(PUBLISHED).reason) == ("record", "WinnerConfirmed")


def test_runners_up_are_ranked_as_built_now_never_the_default_or_the_winner_twice():
    entries = [
        measured({}, 1.0),
        measured({"enable_mem_pattern": "0", "graph_optimization_level": "disable"}, 0.80, baseline_ms=1.0),
        measured({"graph_optimization_level": "disable"}, 0.85, baseline_ms=1.0),  # now the default route
        measured({"enable_mem_pattern": "0"}, 0.90, baseline_ms=1.0),  # now the winner's build
        measured({"intra_op_num_threads": "2"}, 0.95, baseline_ms=1.0),
    ]
    winner = over_base(PUBLISHED, BASE)
    assert runners_up(entries, winner, base=BASE) == ("-intra_op_num_threads=2",)
    assert runners_up(entries, PUBLISHED) == ("-graph_optimization_level=disable", "-enable_mem_pattern=0")
    decision = with_runners_up(stack_change(PUBLISHED, BASE), runners_up(entries, winner, base=BASE))
    assert decision.runners_up == ("-intra_op_num_threads=2",)


def test_only_a_compiler_whose_settings_are_its_knobs_has_a_base_to_plan_against():
    spec = template()
    spec.compiler.settings = dict(BASE)
    assert template_base(spec) == BASE
    inductor = spec.model_copy(update={"compiler": spec.compiler.model_copy(update={"name": CompilerName.inductor})})
    assert template_base(inductor) == {}
