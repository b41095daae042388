"""Compiler backends behind one small interface (see `backends.base`).

Imports are lazy: a backend's compiler library is imported only when that backend is used, so
the rest of the product works where torch or TensorRT are not installed.
"""

from __future__ import annotations

from enginewright.backends.base import Backend, BackendUnavailable, Runner

BACKENDS = ("onnxruntime", "inductor", "tensorrt")
READS = {"onnxruntime": "onnx", "tensorrt": "onnx", "inductor": "torch-export"}
"""What model file each backend builds from."""
KIND_NAMES = {"onnx": "an ONNX model (.onnx)", "torch-export": "a torch.export program (torch.export.save, .pt2)"}


def model_kind(path) -> str:
    """`torch-export` for a torch.export program (a zip archive, whatever its name), else `onnx`."""
    import zipfile

    return "torch-export" if zipfile.is_zipfile(path) else "onnx"


def misfit(backend: str, path) -> str | None:
    """Why `backend` cannot build the model file at `path`, naming the backends that can; None
    when it can (or `backend` is not one of ours)."""
    from pathlib import Path

    if backend not in READS:
        return None
    kind = model_kind(path)
    if READS[backend] == kind:
        return None
    fits = [name for name in BACKENDS if READS[name] == kind]
    return (
        f"{Path(path).name} is {KIND_NAMES[kind]}, and the {backend} backend builds from "
        f"{KIND_NAMES[READS[backend]]}: use --backend {' or --backend '.join(fits)}"
    )


def get_backend(name: str, **options) -> Backend:
    """The backend called `name` (`onnxruntime`, `inductor`, `tensorrt`), or a backend class from
    another package named `module:Class` (the worker's child processes import it by that name)."""
    if ":" in name:
        import importlib

        module, _, attribute = name.partition(":")
        return getattr(importlib.import_module(module), attribute)(**options)
    if name == "onnxruntime":
        from enginewright.backends.onnxruntime import OnnxRuntimeBackend

        return OnnxRuntimeBackend(**options)
    if name == "inductor":
        from enginewright.backends.inductor import InductorBackend

        return InductorBackend(**options)
    if name == "tensorrt":
        from enginewright.backends.tensorrt import TensorRTBackend

        return TensorRTBackend(**options)
    raise ValueError(f"unknown compiler {name!r} (one of {', '.join(BACKENDS)})")


__all__ = ["BACKENDS", "Backend", "BackendUnavailable", "Runner", "get_backend", "misfit", "model_kind"]
