"""Checkpoints loaded with transformers' ``from_pretrained``: local directories and hub ids.

A hub id is loaded from the local Hugging Face cache when it is there (no network
call at all); it is downloaded only when ``HF_HUB_OFFLINE`` / ``TRANSFORMERS_OFFLINE``
is not set. Every failure becomes a :class:`~tokenshapley_rag.errors.ModelLoadError`
or :class:`~tokenshapley_rag.errors.ModelNotFoundError` with a one-line reason.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from tokenshapley_rag._models.fingerprint import directory_fingerprint
from tokenshapley_rag._models.registry import ALIASES
from tokenshapley_rag.errors import ModelLoadError, ModelNotFoundError

__all__ = [
    "CONSTRUCTION_LOCK",
    "cached_snapshot",
    "check_repo_id",
    "from_pretrained",
    "hf_offline",
    "load_from_hub",
    "offline_message",
    "short_error",
]

_TRUTHY = frozenset({"1", "on", "yes", "true", "y", "t"})

CONSTRUCTION_LOCK = threading.RLock()
"""Held by every model construction in this package.

transformers builds models inside context managers that patch *class attributes*
for the whole process (``PreTrainedModel.tie_weights`` becomes a no-op, see
``transformers.initialization.no_tie_weights``). Two loads overlapping in two
threads restore those attributes in the wrong order and leave ``tie_weights``
disabled for good: every later model with tied embeddings then keeps its output
layer on the meta device.
"""


def short_error(e: BaseException) -> str:
    """First line of an exception, so wrapped messages stay readable."""
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0] if text else ''}".rstrip(": ")


def hf_offline() -> bool:
    """Whether hub downloads are switched off by the environment."""
    # Read at call time, not huggingface_hub.constants.HF_HUB_OFFLINE, which is frozen
    # when huggingface_hub is first imported.
    return any(
        os.environ.get(var, "").strip().lower() in _TRUTHY
        for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
    )


def check_repo_id(spec: str, what: str) -> None:
    """Raise ModelNotFoundError for a string that can be neither a path nor a hub id."""
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    try:
        validate_repo_id(spec)
    except HFValidationError as e:
        raise ModelNotFoundError(
            f"{what} {spec!r} not found: no such file or directory, and it is neither a "
            f"known alias ({', '.join(sorted(ALIASES))}) nor a valid hub model id"
        ) from e


def cached_snapshot(spec: str, filenames: tuple[str, ...]) -> Path | None:
    """Snapshot directory of hub id ``spec`` in the local hub cache, if it is there."""
    from huggingface_hub import try_to_load_from_cache

    for fname in filenames:
        hit = try_to_load_from_cache(spec, fname)
        if isinstance(hit, str):  # None: never fetched; a sentinel: known to be absent
            return Path(hit).parent
    return None


def offline_message(spec: str, what: str) -> str:
    """Why ``spec`` cannot be had: not local, and downloads are off."""
    return (
        f"{what} {spec!r} is not available locally (no such directory, and not in the "
        "Hugging Face cache), and downloads are disabled because HF_HUB_OFFLINE is set"
    )


def load_from_hub(spec: str, cache: Path, dtype: torch.dtype) -> tuple[Any, Any, Path, str, str]:
    """Load a hub id from the local hub cache; download it only when not offline.

    Returns (model, tokenizer, snapshot dir, name, weights fingerprint).
    """
    check_repo_id(spec, "model")
    snapshot = cached_snapshot(spec, ("config.json",))
    if snapshot is not None:
        # Cached: load the snapshot directory itself, so no network call is made even
        # when online (and the files hashed for the fingerprint are the ones loaded).
        lm, tok = from_pretrained(snapshot, dtype, name=spec)
        return lm, tok, snapshot, spec, directory_fingerprint(snapshot, cache)
    if hf_offline():
        raise ModelNotFoundError(offline_message(spec, "model"))
    try:
        from transformers import AutoConfig

        AutoConfig.from_pretrained(spec)  # cheapest way to learn whether it exists
    except Exception as e:  # noqa: BLE001 - any hub failure means "not available"
        raise ModelNotFoundError(
            f"model {spec!r} is not available locally and could not be downloaded: {short_error(e)}"
        ) from e
    lm, tok = from_pretrained(spec, dtype, name=spec, local_only=False)
    snapshot = cached_snapshot(spec, ("config.json",))
    if snapshot is None:
        raise ModelLoadError(f"model {spec!r} was downloaded but is not in the hub cache")
    return lm, tok, snapshot, spec, directory_fingerprint(snapshot, cache)


@contextlib.contextmanager
def quiet_progress_bars() -> Iterator[None]:
    """transformers' progress bars off while a model loads ("Loading weights: 100%" on every
    ``TokenShapley()``, a second after the library's own status line), then as they were."""
    from transformers.utils import logging as hf_logging

    shown = hf_logging.is_progress_bar_enabled()
    if shown:
        hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if shown:
            hf_logging.enable_progress_bar()


def from_pretrained(
    source: Path | str, dtype: torch.dtype, *, name: str, local_only: bool = True
) -> tuple[Any, Any]:
    """Load model and tokenizer with ``from_pretrained``; failures become ModelLoadError."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    try:
        with CONSTRUCTION_LOCK, quiet_progress_bars():
            lm, info = AutoModelForCausalLM.from_pretrained(
                source, dtype=dtype, local_files_only=local_only, output_loading_info=True
            )
    except Exception as e:  # noqa: BLE001 - transformers raises many unrelated types
        raise ModelLoadError(
            f"could not load a causal language model from {name!r}: {short_error(e)}"
        ) from e
    # transformers fills weights absent from the checkpoint with random values and
    # only logs it; attributions from such a model would be noise. (A weight left on
    # the meta device instead is an untied output layer: load_causal_lm ties it.)
    params = dict(lm.named_parameters(remove_duplicate=False))
    missing = sorted(
        k for k in info.get("missing_keys", ()) if not (k in params and params[k].is_meta)
    ) + sorted(map(str, info.get("mismatched_keys", ())))
    if missing:
        shown = ", ".join(map(str, missing[:3])) + (", ..." if len(missing) > 3 else "")
        raise ModelLoadError(
            f"the checkpoint {name!r} lacks weights the model needs ({shown}): it is "
            "incomplete or belongs to another architecture"
        )
    try:
        tok = AutoTokenizer.from_pretrained(source, local_files_only=local_only)
    except Exception as e:  # noqa: BLE001
        raise ModelLoadError(f"could not load the tokenizer of {name!r}: {short_error(e)}") from e
    return lm, tok
