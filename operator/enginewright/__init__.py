"""Enginewright: compiler build-route tuning for inference engines, as Kubernetes custom resources."""

__version__ = "0.1.0"
