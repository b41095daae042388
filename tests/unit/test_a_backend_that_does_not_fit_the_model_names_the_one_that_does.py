"""`enginewright tune --backend B` on a model file B cannot build says which backends can, and a
backend that is not installed says so, without a traceback."""

import subprocess
import sys
import zipfile

import pytest

from enginewright.backends import misfit, model_kind


def tune(model, backend, tmp_path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "enginewright",
            "tune",
            str(model),
            "--backend",
            backend,
            "--inputs",
            str(tmp_path / "in.npz"),
            "--no-accuracy",
            "--out",
            str(tmp_path / "out"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture
def models(tmp_path):
    (tmp_path / "m.onnx").write_bytes(b"\x08\x07\x12\x07pytorch")  # protobuf bytes, as an ONNX file starts
    with zipfile.ZipFile(tmp_path / "m.pt2", "w") as archive:  # torch.export.save writes a zip archive
        archive.writestr("m/version", "1")
    (tmp_path / "in.npz").write_bytes(b"")
    return tmp_path


def test_the_model_kind_decides(models):
    assert model_kind(models / "m.onnx") == "onnx" and model_kind(models / "m.pt2") == "torch-export"
    assert misfit("onnxruntime", models / "m.onnx") is None and misfit("tensorrt", models / "m.onnx") is None
    assert misfit("inductor", models / "m.pt2") is None
    assert "--backend inductor" in misfit("onnxruntime", models / "m.pt2")


@pytest.mark.parametrize(
    "backend,model,fits",
    [
        ("inductor", "m.onnx", "--backend onnxruntime or --backend tensorrt"),
        ("onnxruntime", "m.pt2", "--backend inductor"),
    ],
)
def test_a_backend_that_cannot_build_the_file_names_the_one_that_can(backend, model, fits, models):
    result = tune(models / model, backend, models)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert fits in result.stderr and model in result.stderr
    assert not (models / "out").exists()


def test_a_backend_that_is_not_installed_says_so(models):
    pytest.importorskip("onnxruntime")
    try:
        import tensorrt  # noqa: F401

        pytest.skip("TensorRT is installed here")
    except ImportError:
        pass
    result = tune(models / "m.onnx", "tensorrt", models)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "the tensorrt backend is not available on this machine" in result.stderr
    assert "--backend onnxruntime" in result.stderr
    assert not (models / "out" / "run.json").exists()
