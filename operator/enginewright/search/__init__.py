"""Route spaces, canonical routes, planners for fast/full/mixed, batching and winner selection.

Pure code: no I/O, no clock, no randomness without a seed.
"""
