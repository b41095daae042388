"""Mixed search on a GPU whose default is host-bound: stage 1 times each knob behind the default's
launch overhead, where a change to the kernels shows little, so stage 2 also tries the fastest route
that removed the overhead (CUDA graphs) with each knob that was neither clearly faster nor clearly
slower. The figures are resnet50's stage 1 on an H100 (session 41, docs/benchmarks/raw/s41/call2/):
coordinate descent 1.030x alone (inside the 3% margin), and with CUDA graphs 2.7% faster than CUDA
graphs alone, full search's winner, which mixed search did not build."""

from enginewright.api.cache import CacheEntry, Measurements, Paired, Versions
from enginewright.api.routes import Knob, Route
from enginewright.search.flow import Decided, FlowSpec, Observed, RunBatches, RunConfirmation, next_step
from enginewright.search.planners import clearly_slower
from tests.unit.entries import measured

GRAPHS, AUTOTUNE, DESCENT, FREEZING, PADDING = (
    "triton.cudagraphs",
    "max_autotune",
    "coordinate_descent_tuning",
    "freezing",
    "shape_padding",
)
KNOBS = [Knob(name, ("false", "true"), "false") for name in (GRAPHS, AUTOTUNE, DESCENT, FREEZING, PADDING)]
H100 = Versions(compiler="inductor-torch-2.11.0", gpu_name="NVIDIA H100 80GB HBM3", compute_capability="9.0")
HOST = Versions(compiler="inductor-torch-2.11.0", gpu_name="cpu-x86_64")
MIXED = FlowSpec(mode="mixed", max_routes=10, routes_per_batch=16, top_k=1)


def entry(knobs: dict, ms: float, paired=None, host_ms=None, versions=H100, **fields) -> CacheEntry:
    return measured(
        knobs,
        ms,
        target="NVIDIA-H100",
        paired=Paired(ratio=paired[0], low=paired[1], high=paired[2], rounds=5, stopped="x") if paired else None,
        measurements=Measurements(latency_ms=ms, throughput_ms=ms, gpu_time_ms=ms, host_cpu_ms=host_ms),
        versions=versions,
        engine_uri=f"file:///{Route.of(knobs).id}",
        **fields,
    )


def on(knob: str) -> dict:
    return {knob: "true"}


def stage1(default_host_ms=3.5, graphs_host_ms=0.45, versions=H100, autotune=(0.710, 0.700, 0.719)):
    return [
        entry({}, 3.385, host_ms=default_host_ms, versions=versions),  # host-bound: 3.5 of 3.385 ms a call
        entry(on(GRAPHS), 1.617, (0.345, 0.341, 0.349), graphs_host_ms, versions),  # 2.899x
        entry(on(AUTOTUNE), 1.974, autotune, 1.9, versions),  # 1.409x: improving
        entry(on(DESCENT), 3.142, (0.971, 0.962, 0.978), 3.1, versions),  # 1.030x: inside the margin
        entry(on(FREEZING), 3.002, (1.021, 1.012, 1.030), 3.0, versions),  # 0.979x: inside the margin
        entry(on(PADDING), 4.100, (1.210, 1.150, 1.260), 4.0, versions),  # clearly slower
    ]


def stage2(entries: list[CacheEntry], spec: FlowSpec = MIXED) -> RunBatches:
    step = next_step(spec, Observed(KNOBS, {e.route_id: e for e in entries}))
    assert isinstance(step, RunBatches) and step.stage == "stage2", step
    return step


def routes(step: RunBatches) -> list[str]:
    return [r.canonical for b in step.batches for r in b.routes]


def test_the_launch_free_route_is_tried_with_each_knob_that_was_neither_faster_nor_slower():
    step = stage2(stage1())
    assert routes(step) == [
        "-max_autotune=true -triton.cudagraphs=true",  # the improving knobs combined, as before
        "-coordinate_descent_tuning=true -triton.cudagraphs=true",  # neutral, best first
        "-freezing=true -triton.cudagraphs=true",
    ]  # shape padding was clearly slower: not combined
    assert step.planned == 6 + 3
    assert "the default is host-bound and -triton.cudagraphs=true is not: 2 of 2 routes pair it" in step.note


def test_where_only_the_launch_free_knob_improved_stage_2_is_no_longer_empty():
    step = stage2(stage1(autotune=(0.99, 0.98, 1.0)))  # max-autotune inside the margin too
    assert routes(step) == [  # best first: 1.030x, 1.010x, 0.979x alone
        "-coordinate_descent_tuning=true -triton.cudagraphs=true",
        "-max_autotune=true -triton.cudagraphs=true",
        "-freezing=true -triton.cudagraphs=true",
    ]
    assert step.note.startswith("stage 2: 1 improving knobs (triton.cudagraphs) -> 0 combined routes; ")


def test_the_plan_holds_while_stage_2_is_measured_and_its_routes_are_confirmed():
    first = stage2(stage1())
    planned = [r for b in first.batches for r in b.routes]
    done = [entry(dict(r.knobs), 1.60 + i / 100, (0.5, 0.49, 0.51), 0.4, stage="stage2") for i, r in enumerate(planned)]
    assert stage2(stage1() + done[:1]).planned == first.planned  # a batch half measured asks for the rest
    step = next_step(MIXED, Observed(KNOBS, {e.route_id: e for e in stage1() + done}))
    assert isinstance(step, RunConfirmation) and step.planned == first.planned == 9, step


def test_nothing_more_where_the_default_is_not_host_bound_or_the_best_route_still_is():
    improving_only = ["-max_autotune=true -triton.cudagraphs=true"]
    assert routes(stage2(stage1(default_host_ms=1.0))) == improving_only  # the GPU sets the default's pace
    assert routes(stage2(stage1(graphs_host_ms=1.55))) == improving_only  # CUDA graphs left it host-bound
    assert routes(stage2(stage1(default_host_ms=None))) == improving_only  # not measured: not said


def test_nothing_more_for_an_engine_that_runs_on_the_host():
    # a CPU engine's calling thread does the work itself: there is no launch overhead to take away
    step = stage2(stage1(versions=HOST))
    assert routes(step) == ["-max_autotune=true -triton.cudagraphs=true"]
    assert "host-bound" not in step.note


def test_max_routes_keeps_the_improving_combinations_first_and_the_note_counts_what_it_kept():
    step = stage2(stage1(), FlowSpec(mode="mixed", max_routes=8, routes_per_batch=16, top_k=1))
    assert routes(step) == [
        "-max_autotune=true -triton.cudagraphs=true",
        "-coordinate_descent_tuning=true -triton.cudagraphs=true",
    ]
    assert "1 of 2 routes pair it" in step.note
    cut = next_step(FlowSpec(mode="mixed", max_routes=6, top_k=0), Observed(KNOBS, {e.route_id: e for e in stage1()}))
    assert isinstance(cut, Decided), cut
    assert cut.cut_short == (
        "spec.search.maxRoutes=6 kept 0 of 1 stage-2 combinations (the most promising) and 0 of 2 routes "
        "pairing -triton.cudagraphs=true with a neutral knob"
    )


def test_a_slower_route_is_clearly_slower_by_the_same_line_paired_or_not():
    margin = 0.03
    assert clearly_slower(entry(on(FREEZING), 3.2, (1.05, 1.031, 1.07)), 3.0, margin)
    assert not clearly_slower(entry(on(FREEZING), 3.2, (1.05, 1.029, 1.07)), 3.0, margin)
    # unpaired: its time over the default's beyond 1 + margin, as the paired rule's
    assert clearly_slower(entry(on(FREEZING), 3.0 * 1.031, baseline_ms=3.0), 3.0, margin)
    assert not clearly_slower(entry(on(FREEZING), 3.0 * 1.029, baseline_ms=3.0), 3.0, margin)
