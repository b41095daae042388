"""An Inductor engine on the host (CPU) is timed in interleaved rounds as it serves alone: switching
engines every few calls timed them with cold caches and threads (an MLP of 33 MB of weights, 2.1 ms a
call alone, read 3.2-4.4 ms in rounds of 10 blocks each), so a tune's table, intervals and headline
described engines slower than any consumer runs them. On CUDA the blocks stay (`interleave_blocks`)
and the same agreement must hold."""

import statistics

import numpy as np
import pytest

torch = pytest.importorskip("torch")

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"

pytestmark = pytest.mark.usefixtures("caches_restored")  # (tests/gpu/conftest.py)


@pytest.fixture(scope="module")
def engine(tmp_path_factory, caches_restored):
    """The eager route (`compile=false`: no compile, the effect is the runtime's) of an MLP whose
    weights (1024-4096-1024, fp32, 33 MB) do not stay in the host's caches across engines."""
    from enginewright.backends.base import BuildRequest
    from enginewright.backends.inductor import InductorBackend

    folder = tmp_path_factory.mktemp("host-rounds")
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.GELU(), torch.nn.Linear(4096, 1024)).eval()
    model = model.to(DEVICE)
    exported = torch.export.export(model, (torch.zeros(8, 1024, device=DEVICE),))
    (name,) = [
        s.arg.name
        for s in exported.graph_signature.input_specs
        if s.kind == torch.export.graph_signature.InputKind.USER_INPUT
    ]
    torch.export.save(exported, str(folder / "model.pt2"))
    inputs = {name: np.random.default_rng(0).standard_normal((8, 1024)).astype(np.float32)}
    backend = InductorBackend(device=DEVICE)
    request = BuildRequest(model_path=folder / "model.pt2", workdir=folder / "build", sample_inputs=inputs)
    return backend, backend.build(request, {"compile": "false"}), inputs, folder


def test_rounds_time_each_engine_as_it_runs_alone(engine):
    from enginewright.measure.rounds import Held, interleaved_round
    from enginewright.measure.timing import calls_to_fill

    backend, bytes_, inputs, folder = engine
    runners = [backend.load(bytes_, folder / f"load-{i}") for i in range(4)]  # two loads of default and route
    try:
        held = []
        for runner in runners:
            runner.timed_calls("gpuTime", inputs, 20)
            alone = runner.timed_calls("gpuTime", inputs, 20) / 20
            held.append(Held(runner, calls=calls_to_fill(0.05, alone / 1000), key=str(len(held))))
        ratios = []
        for _ in range(6):  # alone and in a round taking turns, so the host's drift hits both
            alone = [h.timed_calls("gpuTime", inputs, h.calls) / h.calls for h in held]
            rounds = interleaved_round(held, "gpuTime", inputs, 0.05)
            ratios += [r / a for r, a in zip(rounds, alone)]
        ratio = statistics.median(ratios)
        print(f"\n{DEVICE}: {held[0].calls} calls a round; in rounds / alone: median {ratio:.3f}, all {sorted(ratios)}")
        assert 0.85 < ratio < 1.2, f"engines timed in rounds ran {ratio:.2f}x their time alone"
    finally:
        for runner in reversed(runners):
            runner.close()
