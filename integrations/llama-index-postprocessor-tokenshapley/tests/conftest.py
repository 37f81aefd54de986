"""Nothing here may reach a model hub. One TokenShapley per test session."""

import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


@pytest.fixture(scope="session")
def ts():
    """The default TokenShapley, loaded once (sentence keys kept in memory only)."""
    from tokenshapley_rag import TokenShapley

    return TokenShapley(use_disk_cache=False)
