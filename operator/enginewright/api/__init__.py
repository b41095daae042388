"""The TuningRun API: pydantic models that are the single source of truth for the CRD."""

from enginewright.api.cache import CacheEntry, Outcome, TimingStats, Versions
from enginewright.api.models import TuningRun, TuningRunSpec, TuningRunStatus

__all__ = ["CacheEntry", "Outcome", "TimingStats", "Versions", "TuningRun", "TuningRunSpec", "TuningRunStatus"]
