"""`timing.minRoundsIfSlower` came after runs whose --out holds a run.json without it: such a run
resumes while the field is at its default, and a run that changes it is told its timing differs."""

import json

import pytest

from enginewright.api.models import Timing
from enginewright.cli.tune import TuneError, TuneOptions, _check_resume, _refuse_another_run


def options(tmp_path, **timing) -> TuneOptions:
    model, inputs = tmp_path / "m.onnx", tmp_path / "i.npz"
    model.write_bytes(b"model")
    inputs.write_bytes(b"inputs")
    return TuneOptions(
        backend="onnxruntime", model=model, out=tmp_path / "out", inputs=[inputs], timing=Timing(**timing)
    )


def test_a_run_json_written_before_the_field_resumes_at_its_default(tmp_path):
    opts = options(tmp_path)
    written = opts.fingerprint()
    written["timing"] = {k: v for k, v in Timing().model_dump().items() if k != "min_rounds_if_slower"}
    (opts.out).mkdir()
    (opts.out / "run.json").write_text(json.dumps(written))
    _refuse_another_run(opts)  # a resumed run, not refused
    assert _check_resume(opts) is False
    with pytest.raises(TuneError, match="different timing"):
        _refuse_another_run(options(tmp_path, min_rounds_if_slower=5))
