"""Fixtures of the Inductor tests."""

import pytest


@pytest.fixture(scope="module")
def caches_restored():
    """The backend points torch at each build's and load's own cache folders (it sets
    TORCHINDUCTOR_CACHE_DIR and TRITON_CACHE_DIR in the test's process): restored after the module."""
    with pytest.MonkeyPatch.context() as patch:
        for var in ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR"):
            patch.setenv(var, "unset-by-the-test")
        yield
