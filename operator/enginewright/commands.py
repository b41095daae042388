"""Sub-commands that need the worker (tune, report); registered by `cli`."""


def register(sub) -> None:
    """Add the worker-backed sub-commands."""
