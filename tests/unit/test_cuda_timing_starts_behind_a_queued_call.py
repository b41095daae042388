"""A timed block of CUDA calls starts behind a queued call, as every call of a serving loop does.

Interleaved rounds time engines in blocks, and every block starts on a drained device: an event
recorded there fires at once, so without a call queued ahead the first timed call's device time holds
the host's time to reach its first kernel. On the H200 that read a device-bound MLP 19-20% slow in
one-call blocks (bench/block_bias.py, docs/benchmarks.md, session 9)."""

import pytest

from tests.unit.test_inductor_knobs_pure import FakeCuda, fake_inductor_runner


class QueueingCuda(FakeCuda):
    """A device that runs calls in order: a call's kernels start once the host has spent `host` ms
    reaching them and the call before has finished, and take `device` ms; an event fires when the
    stream reaches it (at once on a drained device). As the H200 behaves for one stream."""

    def __init__(self, host: float, device: float):
        super().__init__()
        self.host_ms, self.device_ms, self.host, self.busy = host, device, 0.0, 0.0
        cuda = self

        class Event:
            def __init__(self, enable_timing=False):
                self.at = None

            def record(self, stream=None):
                cuda.log.append(("record", stream))
                self.at = max(cuda.host, cuda.busy)

            def elapsed_time(self, end):
                return end.at - self.at

        self.Event = Event

    def synchronize(self):
        self.log.append("sync")
        self.host = max(self.host, self.busy)

    def call(self, prepared):
        self.log.append("call")
        self.host += self.host_ms
        self.busy = max(self.host, self.busy) + self.device_ms


@pytest.mark.parametrize("objective", ["gpuTime", "throughput"])
def test_a_device_bound_engine_reads_its_device_time_in_blocks_of_one_call_as_in_a_long_round(objective):
    """Interleaved rounds time engines in blocks; every block starts on a drained device. The host's
    0.3 ms to reach the first kernel must not count: on main each one-call block read 1.3 ms."""
    runner, cuda = fake_inductor_runner(cuda=QueueingCuda(host=0.3, device=1.0))
    long_round = runner.timed_calls(objective, {}, 50) / 50
    blocks = sum(runner.timed_calls(objective, {}, 1) for _ in range(10)) / 10
    assert long_round == pytest.approx(1.0)
    assert blocks == pytest.approx(1.0)
    assert cuda.busy > 0


def test_a_host_bound_engine_reads_its_host_time_per_call():
    """Where the host sets the pace, that is what serving it costs: the gaps count."""
    runner, _ = fake_inductor_runner(cuda=QueueingCuda(host=0.5, device=0.2))
    assert runner.timed_calls("gpuTime", {}, 40) / 40 == pytest.approx(0.5)
    assert runner.timed_calls("gpuTime", {}, 1) == pytest.approx(0.5)
