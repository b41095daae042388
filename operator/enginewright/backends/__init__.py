"""Compiler backends behind one small interface (see `backends.base`).

Imports are lazy: a backend's compiler library is imported only when that backend is used, so
the rest of the product works where torch or TensorRT are not installed.
"""

from __future__ import annotations

from enginewright.backends.base import Backend, BackendUnavailable, Runner

BACKENDS = ("onnxruntime", "inductor", "tensorrt")


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


__all__ = ["BACKENDS", "Backend", "BackendUnavailable", "Runner", "get_backend"]
