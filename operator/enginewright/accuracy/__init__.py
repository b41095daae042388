"""Accuracy validation: loss metrics over named output tensors, and whether reference data fits a
model's signature. Pure numpy."""

from enginewright.accuracy.metrics import AccuracyError, Verdict, compare, loss

__all__ = ["AccuracyError", "Verdict", "compare", "loss"]
