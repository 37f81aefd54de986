"""Shared fixtures: one default TokenShapley per session, offline hub, isolated caches."""

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

# Converting the packaged GGUF takes ~20-30 s, so converted models persist between runs in
# the repo's git-ignored .cache/ (CI's fresh clone converts once per run). Datastores
# (sentence keys) always go to a fresh temporary folder so cache tests start cold.
MODELS_DIR = Path(__file__).resolve().parents[1] / ".cache" / "models"


def make_cache_dir(tmp_path: Path) -> Path:
    """A cache root whose models/ points at the shared converted models."""
    MODELS_DIR.mkdir(parents=True, exist_ok=True)
    root = tmp_path / "ts-cache"
    root.mkdir(parents=True, exist_ok=True)
    link = root / "models"
    if not link.exists():
        link.symlink_to(MODELS_DIR, target_is_directory=True)
    return root


@pytest.fixture
def cache_root(tmp_path):
    """A fresh cache folder (empty datastore) that reuses the converted models."""
    return make_cache_dir(tmp_path)


@pytest.fixture(scope="session")
def ts(tmp_path_factory):
    """The default TokenShapley, loaded once per test session."""
    from tokenshapley_rag import TokenShapley

    return TokenShapley(cache_dir=make_cache_dir(tmp_path_factory.mktemp("session")))
