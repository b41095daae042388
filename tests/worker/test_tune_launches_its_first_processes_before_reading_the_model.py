"""`tune` launches the first batch's build and serving processes before it reads the model's
signature and lists the backend's knobs: for a PyTorch model both import torch in tune's own process
(7.2 s of an MLP's run on an H100's host, session 30), while those processes do their own imports.
Data that does not fit the model is still refused with --out left as it was, and the processes
launched for nothing are ended."""

from pathlib import Path

import pytest

from enginewright.backends.onnxruntime import OnnxRuntimeBackend
from enginewright.cli.tune import TuneError, TuneOptions, tune
from enginewright.worker.process import Builders
from enginewright.worker.server import Server
from tests.worker.test_tune_refuses_data_that_does_not_fit_the_model import bad_copy


def options(folder: Path, out: Path) -> TuneOptions:
    return TuneOptions(
        backend="onnxruntime",
        model=folder / "mlp.onnx",
        out=out,
        inputs=[folder / "inputs-0.npz", folder / "inputs-1.npz"],
        references=[folder / "references-0.npz", folder / "references-1.npz"],
        metric="cosine",
        threshold=1e-4,
        mode="fast",
        knobs=[("enable_mem_pattern", ["0"])],
        settings={"intra_op_num_threads": "1"},
        top_k=0,
        timing={"warmup_iterations": 2, "round_seconds": 0.01, "min_rounds": 2, "max_rounds": 2},
    )


def recording(monkeypatch) -> tuple[list[str], list[Server], list[Builders]]:
    """What tune does, in order (a serving process or build processes launched, the signature read),
    and every serving process and set of build processes it launched."""
    events: list[str] = []
    servers: list[Server] = []
    builders: list[Builders] = []
    launch, start, signature = Server.launch, Builders.launch, OnnxRuntimeBackend.signature

    def launched(self, *args, **kwargs):
        events.append("serving process launched")
        servers.append(self)
        return launch(self, *args, **kwargs)

    def started(self, *args, **kwargs):
        events.append("build processes launched")
        builders.append(self)
        return start(self, *args, **kwargs)

    def read(self, *args, **kwargs):
        events.append("signature read")
        return signature(self, *args, **kwargs)

    monkeypatch.setattr(Server, "launch", launched)
    monkeypatch.setattr(Builders, "launch", started)
    monkeypatch.setattr(OnnxRuntimeBackend, "signature", read)
    return events, servers, builders


def test_the_first_batch_processes_start_before_the_model_is_read(example, tmp_path, monkeypatch):
    events, _, _ = recording(monkeypatch)
    result = tune(options(example, tmp_path / "out"), say=lambda line: None)
    assert result.summary["default_ms"] > 0
    read = events.index("signature read")
    assert "build processes launched" in events[:read] and "serving process launched" in events[:read], events


@pytest.mark.parametrize("existing", [False, True])
def test_data_that_does_not_fit_leaves_out_as_it_was_and_no_process(example, tmp_path, monkeypatch, existing):
    folder = bad_copy(example, tmp_path / "data", "wrong input dtype")
    out = tmp_path / "out"
    if existing:  # a folder of the user's: it stays, with nothing added
        out.mkdir()
        (out / "notes.txt").write_text("mine")
    events, servers, builders = recording(monkeypatch)
    with pytest.raises(TuneError, match="does not fit"):
        tune(options(folder, out), say=lambda line: None)
    assert events.index("serving process launched") < events.index("signature read")  # launched, then ended
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"] if existing else not out.exists()
    assert servers and all(s.proc is None or s.proc.poll() is not None for s in servers)
    assert builders and all(b.proc is None or b.proc.poll() is not None for b in (x for bs in builders for x in bs.all))
