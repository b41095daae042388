"""Each default is written once, in the TuningRun's API models: `enginewright tune`'s flags, the flow
and the worker read it from there, so a local run and a cluster run of the same spec agree."""

from pathlib import Path

from enginewright.api.models import Accuracy, Confirm, Metric, Search, TuningRunSpec, default_of
from enginewright.cli import build_parser
from enginewright.cli.tune import TuneOptions
from enginewright.search.flow import FlowSpec
from enginewright.worker.child import ChildRequest
from enginewright.worker.context import Accuracy as WorkerAccuracy, WorkerContext


def spec() -> TuningRunSpec:
    return TuningRunSpec.model_validate(
        {
            "model": {"uri": "s3://models/m.onnx"},
            "compiler": {"name": "onnxruntime"},
            "accuracy": {"disabled": True, "reason": "test"},
            "targets": [{"gpuType": "cpu"}],
        }
    )


def tune_defaults():
    return build_parser().parse_args(["tune", "m.onnx", "--backend", "onnxruntime", "--inputs", "i.npz"])


def test_tune_flags_default_to_the_tuningrun_s():
    args, search, confirm = tune_defaults(), Search(), Confirm()
    assert (args.search, args.max_routes, args.routes_per_batch, args.route_timeout, args.noise_margin, args.reuse) == (
        search.mode.value,
        search.max_routes,
        search.routes_per_job,
        search.route_timeout_seconds,
        search.noise_margin,
        search.reuse.value,
    )
    assert (args.top_k, args.confirm_rounds, args.confirm_loads) == (confirm.top_k, confirm.rounds, confirm.loads)
    assert (args.metric, args.atol, args.rtol) == (
        default_of(Accuracy, "metric").value,
        default_of(Accuracy, "atol"),
        default_of(Accuracy, "rtol"),
    )


def test_metric_choices_are_the_tuningrun_s():
    parser = build_parser()
    tune = next(a for a in parser._subparsers._group_actions[0].choices["tune"]._actions if a.dest == "metric")
    assert tune.choices == [m.value for m in Metric]


def test_the_flow_and_the_worker_default_to_the_tuningrun_s():
    assert FlowSpec() == FlowSpec.of(spec())
    options = TuneOptions(backend="onnxruntime", model=Path("m.onnx"), out=Path("out"), inputs=[])
    search = Search()
    assert (options.noise_margin, options.route_timeout, options.max_routes) == (
        search.noise_margin,
        search.route_timeout_seconds,
        search.max_routes,
    )
    context = WorkerContext(
        backend="onnxruntime",
        model=Path("m.onnx"),
        accuracy=WorkerAccuracy([], []),
        store=None,
        prefix="p",
        target="t",
        workdir=Path("w"),
    )
    assert (context.noise_margin, context.route_timeout) == (search.noise_margin, search.route_timeout_seconds)
    child = ChildRequest(action="build", backend="onnxruntime", workdir="w", engine="e")
    assert (child.metric, child.atol, child.rtol) == (
        WorkerAccuracy([], []).metric,
        default_of(Accuracy, "atol"),
        default_of(Accuracy, "rtol"),
    )


def test_tune_options_reach_the_flow_through_the_spec_mapper():
    options = TuneOptions(backend="inductor", model=Path("m.pt2"), out=Path("out"), inputs=[])
    # (the one field with no TuningRun default: the spec names its compiler, and Inductor's builds
    # read no knob from the base settings)
    assert FlowSpec.of(options.spec()) == FlowSpec(settings_are_knobs=False)
    options = TuneOptions(
        backend="inductor",
        model=Path("m.pt2"),
        out=Path("out"),
        inputs=[],
        mode="mixed",
        knobs=[("freezing", ["true"])],
        pinned={"compile": "true"},
        max_routes=7,
        routes_per_batch=2,
        noise_margin=0.05,
        top_k=0,
        confirm_rounds=1,
        confirm_loads=2,
        measure_uncompiled=False,
    )
    assert FlowSpec.of(options.spec()) == FlowSpec(
        mode="mixed",
        knobs=(("freezing", ("true",)),),
        pinned={"compile": "true"},
        max_routes=7,
        routes_per_batch=2,
        noise_margin=0.05,
        top_k=0,
        confirm_rounds=1,
        confirm_loads=2,
        measure_uncompiled=False,
        settings_are_knobs=False,
    )
