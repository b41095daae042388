"""The Inductor backend's knob list and route options, and where the GPU runners (Inductor, TensorRT)
put their timing events, without torch: a stand-in for `torch._inductor.config` (a namespace with the
options' defaults) is all the knobs read, and a stand-in for `torch.cuda` records the events."""

import subprocess
import sys
from types import SimpleNamespace

import pytest

from enginewright.backends.inductor import compiles, discover_knobs, route_options
from enginewright.search.planners import build_space, plan_full


def fake_config():
    return SimpleNamespace(
        max_autotune=False,
        max_autotune_gemm_backends="ATEN,TRITON",
        epilogue_fusion=True,
        freezing=False,
        triton=SimpleNamespace(cudagraphs=False),
    )


def test_importing_the_backend_does_not_import_torch():
    check = "import sys, enginewright.backends.inductor; assert 'torch' not in sys.modules"
    done = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_compile_is_offered_on_every_device_as_an_exclusive_knob(device):
    knobs = {k.name: k for k in discover_knobs(fake_config(), device)}
    assert knobs["compile"].values == ("true", "false")
    assert knobs["compile"].default == "true"
    assert knobs["compile"].exclusive
    assert not any(k.exclusive for name, k in knobs.items() if name != "compile")
    assert ("triton.cudagraphs" in knobs) == (device == "cuda")
    assert "coordinate_descent_tuning" not in knobs  # this config does not have it


def test_compile_is_not_a_torch_compile_option():
    config = fake_config()
    assert route_options(config, {"compile": "true", "epilogue_fusion": "false"}) == {"epilogue_fusion": False}
    assert route_options(config, {"compile": "false"}) == {}
    assert compiles({}) and compiles({"compile": "true"}) and not compiles({"compile": "false"})


def test_compile_false_with_any_other_option_is_refused_by_name():
    with pytest.raises(
        ValueError,
        match=r"compile=false runs the program eagerly: options "
        r"epilogue_fusion=false, triton.cudagraphs=true have no effect",
    ):
        route_options(fake_config(), {"compile": "false", "triton.cudagraphs": "true", "epilogue_fusion": "false"})


def test_bad_compile_value_and_unknown_knobs_are_refused():
    with pytest.raises(ValueError, match="inductor knob compile"):
        route_options(fake_config(), {"compile": "maybe"})
    with pytest.raises(ValueError, match="no tunable knob"):
        route_options(fake_config(), {"not_a_knob": "1"})


def test_a_full_search_tries_the_eager_route_alone():
    space = build_space(discover_knobs(fake_config(), "cuda"), [], {})
    routes = [r.as_dict for r in plan_full(space)]
    eager = [r for r in routes if r.get("compile") == "false"]
    assert eager == [{"compile": "false"}]
    for route in routes:  # every planned route is buildable as far as its options go
        route_options(fake_config(), route)


class FakeCuda:
    """Just enough of `torch.cuda` to see where a runner records its events: a device clock that each
    call advances by 1 ms, and a log of records, calls and synchronizations."""

    def __init__(self):
        self.log, self.now, self.created = [], 0.0, 0
        cuda = self

        class Event:
            def __init__(self, enable_timing=False):
                assert enable_timing
                cuda.created += 1
                self.at = None

            def record(self, stream=None):
                cuda.log.append(("record", stream))
                self.at = cuda.now

            def elapsed_time(self, end):
                return end.at - self.at

        self.Event = Event

    def current_stream(self):
        return "current"

    def synchronize(self):
        self.log.append("sync")

    def call(self, prepared):
        assert prepared == "prepared"
        self.log.append("call")
        self.now += 1.0


def fake_inductor_runner(device="cuda", cuda=None):
    from enginewright.backends.inductor import InductorRunner

    cuda = cuda or FakeCuda()
    runner = InductorRunner.__new__(InductorRunner)  # no torch: only the timing code is exercised
    runner.torch, runner.device, runner._event_pairs = SimpleNamespace(cuda=cuda), device, []
    runner.prepare = lambda inputs: "prepared"
    runner.run_prepared = cuda.call
    runner.run = lambda inputs: cuda.call("prepared")
    return runner, cuda


def test_cuda_gpu_time_is_an_event_pair_around_each_call_on_the_current_stream():
    runner, cuda = fake_inductor_runner()
    assert runner.timed_calls("gpuTime", {}, 3) == 3.0
    created, cuda.log = cuda.created, []
    assert runner.timed_calls("gpuTime", {}, 3) == 3.0
    assert cuda.created == created  # events are created ahead, once, and reused
    record = ("record", "current")
    assert cuda.log == ["sync", "call"] + [record, "call", record] * 3 + ["sync"]  # one untimed call first


def test_cuda_throughput_is_one_event_pair_around_calls_back_to_back():
    runner, cuda = fake_inductor_runner()
    runner.timed_calls("throughput", {}, 1)
    cuda.log = []
    assert runner.timed_calls("throughput", {}, 4) == 4.0
    record = ("record", "current")
    assert cuda.log == ["sync", "call", record] + ["call"] * 4 + [record, "sync"]


@pytest.mark.parametrize("device", ["cuda", "cpu"])
def test_latency_and_cpu_timing_use_the_host_clock_and_unknown_objectives_are_refused(device):
    runner, cuda = fake_inductor_runner(device)
    assert runner.timed_calls("latency", {}, 2) > 0
    if device == "cpu":
        assert runner.timed_calls("gpuTime", {}, 2) > 0
    assert cuda.log == ["call"] * (2 if device == "cuda" else 4)  # no events, no device waits
    with pytest.raises(ValueError, match="unknown timing objective"):
        runner.timed_calls("wallclock", {}, 1)


def test_tensorrt_runner_records_its_events_on_its_own_stream():
    from enginewright.backends.tensorrt import TensorRTRunner

    cuda = FakeCuda()
    stream = SimpleNamespace(synchronize=lambda: cuda.log.append("sync"))
    runner = TensorRTRunner.__new__(TensorRTRunner)  # TensorRT cannot be installed here
    runner.torch, runner.stream, runner._event_pairs = SimpleNamespace(cuda=cuda), stream, []
    runner.prepare = lambda inputs: "prepared"
    runner.run_prepared = cuda.call
    runner.timed_calls("gpuTime", {}, 2)
    cuda.log = []
    assert runner.timed_calls("gpuTime", {}, 2) == 2.0
    assert cuda.log == ["sync", "call"] + [("record", stream), "call", ("record", stream)] * 2 + ["sync"]
    cuda.log = []
    assert runner.timed_calls("throughput", {}, 3) == 3.0
    assert cuda.log == ["sync", "call", ("record", stream)] + ["call"] * 3 + [("record", stream), "sync"]
    with pytest.raises(ValueError, match="unknown timing objective"):
        runner.timed_calls("wallclock", {}, 1)


class FakeInferenceTorch:
    """Only torch's inference-mode switch, with its semantics: entering sets it on and remembers the
    state before, exiting restores that state."""

    def __init__(self):
        self.on = False
        self.entered = 0

    def inference_mode(self):
        fake = self

        class Mode:
            def __enter__(self):
                self.before, fake.on = fake.on, True
                fake.entered += 1

            def __exit__(self, *exc):
                fake.on = self.before

        return Mode()


def test_runners_of_one_process_share_inference_mode_whatever_order_they_close_in():
    from enginewright.backends.inductor import InductorRunner

    torch = FakeInferenceTorch()

    def runner():
        return InductorRunner(torch, object(), {}, [], None, "cpu", None, eager=True)

    default, route = runner(), runner()
    assert torch.on and torch.entered == 1
    default.close()  # out of order: a route loaded after the default outlives it
    assert torch.on  # the route's calls still run in inference mode
    route.close()
    assert not torch.on
    again = runner()  # a later engine of the same process enters it again
    assert torch.on
    again.close()
    assert not torch.on
