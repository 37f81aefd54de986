"""Loading the causal language model that encodes texts: :func:`load_causal_lm`.

The encoder needs a causal LM together with a *fast* tokenizer (character offsets
are how keyword citations map tokens back to text). :func:`load_causal_lm` finds
that pair from:

* the aliases ``"smollm2-135m-instruct"`` (the default) and ``"gemma-3-270m"``
  (:mod:`~tokenshapley_rag._models.registry`), GGUF files shipped inside pip
  packages and converted once into a plain checkpoint under ``<cache_dir>/models/``
  (:mod:`~tokenshapley_rag._models.gguf`);
* a local directory (a ``save_pretrained`` checkpoint) or a ``.gguf`` file path;
* a Hugging Face hub id that is already in the local hub cache (downloads only
  happen when ``HF_HUB_OFFLINE`` is not set; :mod:`~tokenshapley_rag._models.pretrained`);
* an already loaded :class:`transformers.PreTrainedModel` plus its tokenizer.

Nothing is kept in module-level state: every call of :func:`load_causal_lm` loads
afresh, and the caller owns the result.

Examples
--------
>>> from tokenshapley_rag._models import load_causal_lm
>>> lm = load_causal_lm()  # doctest: +SKIP
>>> lm.name, lm.num_layers, lm.hidden_size  # doctest: +SKIP
('smollm2-135m-instruct', 30, 576)
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from tokenshapley_rag._files import default_cache_dir
from tokenshapley_rag._models.checks import (
    check_fast_tokenizer,
    dimensions,
    max_length,
    smoke_test,
    tie_output_embeddings_if_missing,
)
from tokenshapley_rag._models.fingerprint import (
    combine_fingerprint,
    directory_fingerprint,
    state_dict_fingerprint,
    tokenizer_fingerprint,
)
from tokenshapley_rag._models.gguf import load_converted
from tokenshapley_rag._models.pretrained import (
    cached_snapshot,
    check_repo_id,
    from_pretrained,
    hf_offline,
    load_from_hub,
    offline_message,
    short_error,
)
from tokenshapley_rag._models.registry import ALIASES, DEFAULT_MODEL, gguf_file_source
from tokenshapley_rag.errors import (
    InvalidInputError,
    InvalidInputTypeError,
    ModelLoadError,
    ModelNotFoundError,
)

if TYPE_CHECKING:  # importing transformers takes seconds; only the loaders need it
    import transformers

__all__ = ["LoadedModel", "default_cache_dir", "load_causal_lm"]


@dataclass(frozen=True, eq=False)
class LoadedModel:
    """A causal LM ready for encoding, with its tokenizer and a few facts about it.

    Parameters
    ----------
    model : transformers.PreTrainedModel
        Causal LM in eval mode, gradients off, on the requested device and dtype.
    tokenizer : transformers.PreTrainedTokenizerBase
        A fast tokenizer (``return_offsets_mapping=True`` works).
    name : str
        Human-readable name: the alias, the path, or the hub id.
    fingerprint : str
        64 hex digits identifying the exact weights, config, tokenizer and dtype;
        equal fingerprints mean equal hidden states, so it is safe in cache keys.
    num_layers : int
        Number of transformer blocks; ``hidden_states`` has ``num_layers + 1``
        entries (the embeddings come first).
    hidden_size : int
        Width of each hidden state.
    max_length : int
        Longest input in tokens: the model's ``max_position_embeddings`` (or the
        tokenizer's limit if smaller), capped at ``MAX_CONTEXT_LENGTH`` (8192).
    path : pathlib.Path or None, default=None
        Local directory the weights were read from (the converted cache directory
        for an alias); ``None`` for a model passed in already loaded.

    Examples
    --------
    >>> lm = load_causal_lm()  # doctest: +SKIP
    >>> len(lm.model(lm.tokenizer("Hi", return_tensors="pt").input_ids,
    ...              output_hidden_states=True).hidden_states) == lm.num_layers + 1
    ... # doctest: +SKIP
    True
    """

    model: transformers.PreTrainedModel
    tokenizer: transformers.PreTrainedTokenizerBase
    name: str
    fingerprint: str
    num_layers: int
    hidden_size: int
    max_length: int
    path: Path | None = None


def usable_device(device: str | torch.device) -> torch.device:
    """``device`` as a :class:`torch.device` this machine can encode on, checked before a
    model is loaded (so a wrong device costs no weight loading).

    Raises :class:`InvalidInputError` naming the device when torch does not know it, when
    it is the ``meta`` device (it holds shapes, no weights: nothing can be encoded there),
    or when this build of torch or this machine lacks it: ``cuda`` without a CUDA device
    (or ``cuda:N`` past the last one), ``mps`` without Metal, ``xpu`` without an XPU.

    >>> usable_device("cpu"), usable_device(torch.device("cpu", 0))
    (device(type='cpu'), device(type='cpu', index=0))
    >>> usable_device("meta")
    Traceback (most recent call last):
    ...
    tokenshapley_rag.errors.InvalidInputError: device='meta' holds no weights, so nothing can be encoded there; use 'cpu', 'cuda' or 'mps'
    """
    try:
        torch_device = torch.device(device)
    except (RuntimeError, ValueError) as e:
        raise InvalidInputError(f"unknown device {device!r}: {e}") from e
    kind = torch_device.type
    if kind == "meta":
        raise InvalidInputError(
            "device='meta' holds no weights, so nothing can be encoded there; use 'cpu', 'cuda' or 'mps'"
        )
    if kind == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0:
            raise InvalidInputError(f"device={str(device)!r}: this torch build or machine has no CUDA device")
        if torch_device.index is not None and torch_device.index >= count:
            raise InvalidInputError(
                f"device={str(device)!r}: CUDA device indices are 0..{count - 1} on this machine"
            )
    elif kind == "mps" and not (torch.backends.mps.is_built() and torch.backends.mps.is_available()):
        raise InvalidInputError(f"device={str(device)!r}: this torch build or machine has no MPS (Metal) device")
    elif kind == "xpu" and not (hasattr(torch, "xpu") and torch.xpu.is_available()):
        raise InvalidInputError(f"device={str(device)!r}: this torch build or machine has no XPU device")
    return torch_device


def load_causal_lm(
    model: str | os.PathLike[str] | transformers.PreTrainedModel | None = None,
    tokenizer: str | os.PathLike[str] | transformers.PreTrainedTokenizerBase | None = None,
    *,
    cache_dir: str | os.PathLike[str] | None = None,
    device: str | torch.device = "cpu",
    dtype: torch.dtype = torch.float32,
) -> LoadedModel:
    """Load a causal LM and its fast tokenizer, converting a packaged GGUF once.

    Parameters
    ----------
    model : str, path-like, transformers.PreTrainedModel or None, default=None
        ``None`` or ``"smollm2-135m-instruct"`` for the default model,
        ``"gemma-3-270m"`` for Gemma-3-270m (base), a local checkpoint directory, a
        ``.gguf`` file, a Hugging Face hub id already in the local hub cache, or a
        loaded model (then ``tokenizer`` is required). A loaded model is modified in
        place: it is put in eval mode, its gradients are turned off and it is moved
        to ``device`` / ``dtype``.
    tokenizer : str, path-like, transformers.PreTrainedTokenizerBase or None, default=None
        Overrides the tokenizer that comes with ``model`` (a name, a path or a loaded
        tokenizer). Must be a fast tokenizer.
    cache_dir : str or path-like, optional
        Where converted GGUF models and file hashes live; defaults to
        :func:`default_cache_dir`.
    device : str or torch.device, default="cpu"
        Device to put the model on.
    dtype : torch.dtype, default=torch.float32
        Floating-point type of the weights.

    Returns
    -------
    LoadedModel
        The model, its tokenizer, a fingerprint and the model's dimensions.

    Raises
    ------
    ModelNotFoundError
        The alias's package is not installed, the path does not exist, or the hub
        id is not in the local cache (and downloads are off or failed).
    ModelLoadError
        The path exists but holds no usable model, the tokenizer is not a fast
        tokenizer, or the model fails its smoke forward pass.
    InvalidInputTypeError
        An argument has the wrong type, or a loaded model came without a tokenizer.
    InvalidInputError
        ``device`` names no device torch knows, the meta device, or a device this
        machine does not have (:func:`usable_device`); checked before any loading.

    Notes
    -----
    The conversion of an alias is atomic and safe with concurrent processes: it is
    written into a temporary directory beside its final place, a completion marker
    is written last, and the directory is renamed into place; a process that loses
    the race uses the winner's copy. A converted directory whose marker is missing,
    whose files have the wrong size, or that fails to load is rebuilt.

    Examples
    --------
    >>> lm = load_causal_lm()  # doctest: +SKIP
    >>> enc = lm.tokenizer("Hello world", return_offsets_mapping=True)  # doctest: +SKIP
    >>> enc["offset_mapping"]  # doctest: +SKIP
    [(0, 5), (5, 11)]
    """
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

    if model is not None and not isinstance(model, (str, os.PathLike, PreTrainedModel)):
        raise InvalidInputTypeError(
            "model must be None, an alias, a path, a hub id or a transformers "
            f"PreTrainedModel, not {type(model).__name__}"
        )
    if tokenizer is not None and not isinstance(
        tokenizer, (str, os.PathLike, PreTrainedTokenizerBase)
    ):
        raise InvalidInputTypeError(
            "tokenizer must be None, a path, a hub id or a transformers tokenizer, "
            f"not {type(tokenizer).__name__}"
        )
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise InvalidInputTypeError(f"dtype must be a floating torch.dtype, not {dtype!r}")
    if not isinstance(device, (str, torch.device)):
        raise InvalidInputTypeError(
            f"device must be a str or torch.device, not {type(device).__name__}"
        )
    torch_device = usable_device(device)
    if cache_dir is not None and not isinstance(cache_dir, (str, os.PathLike)):
        raise InvalidInputTypeError(
            f"cache_dir must be a str or path-like, not {type(cache_dir).__name__}"
        )
    cache = Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir()

    # --- the weights -------------------------------------------------------------
    tok: Any
    if isinstance(model, PreTrainedModel):
        if tokenizer is None:
            raise InvalidInputTypeError(
                "a loaded model needs its tokenizer: pass tokenizer= as well"
            )
        lm, tok, path = model, None, None
        name = str(getattr(model.config, "_name_or_path", "") or type(model).__name__)
        weights_fp = None  # hashed below, after the cast to dtype
    else:
        spec = DEFAULT_MODEL if model is None else os.fspath(model)
        if not spec.strip():
            raise InvalidInputError("model must not be an empty string")
        lm, tok, path, name, weights_fp = _load_from_spec(spec, cache, dtype)

    # --- the tokenizer -----------------------------------------------------------
    tok_fp = None
    if tokenizer is not None:
        tok = _load_tokenizer(tokenizer, cache)
        tok_fp = tokenizer_fingerprint(tok)
    check_fast_tokenizer(tok, name)

    # --- device, dtype, inference mode -------------------------------------------
    tie_output_embeddings_if_missing(lm, name)
    try:
        lm = lm.to(device=torch_device, dtype=dtype)
    except (RuntimeError, ValueError, TypeError, AssertionError) as e:  # torch asserts on a backend it lacks
        raise ModelLoadError(
            f"could not move model {name!r} to {torch_device} / {dtype}: {e}"
        ) from e
    lm.eval()
    lm.requires_grad_(False)
    if weights_fp is None:
        weights_fp = state_dict_fingerprint(lm)

    num_layers, hidden_size = dimensions(lm, name)
    smoke_test(lm, tok, name, num_layers, hidden_size)
    return LoadedModel(
        model=lm,
        tokenizer=tok,
        name=name,
        fingerprint=combine_fingerprint(weights_fp, tok_fp, dtype),
        num_layers=num_layers,
        hidden_size=hidden_size,
        max_length=max_length(lm, tok),
        path=path,
    )


# ---------------------------------------------------------------------------------
# Resolving a model spec
# ---------------------------------------------------------------------------------


def _load_from_spec(
    spec: str, cache: Path, dtype: torch.dtype
) -> tuple[Any, Any, Path, str, str]:
    """Load (model, tokenizer, dir, name, weights fingerprint) for a string spec."""
    alias = spec.strip().lower()
    if alias in ALIASES:
        source = ALIASES[alias](cache)
        lm, tok, directory, fp = load_converted(source, cache, dtype)
        return lm, tok, directory, alias, fp

    path = Path(spec).expanduser()
    if path.exists():
        if path.is_file() and path.suffix.lower() == ".gguf":
            source = gguf_file_source(path, cache)
            lm, tok, directory, fp = load_converted(source, cache, dtype)
            return lm, tok, directory, spec, fp
        if not path.is_dir():
            raise ModelLoadError(
                f"{spec!r} is a file but not a model: pass a checkpoint directory "
                "(with config.json) or a .gguf file"
            )
        if not (path / "config.json").is_file():
            raise ModelLoadError(
                f"{spec!r} is a directory but not a model checkpoint (it has no config.json)"
            )
        lm, tok = from_pretrained(path, dtype, name=spec)
        return lm, tok, path, spec, directory_fingerprint(path, cache)

    return load_from_hub(spec, cache, dtype)


def _load_tokenizer(tokenizer: Any, cache: Path) -> Any:
    """Return ``tokenizer``, loading it first if it was given as a name or path."""
    from transformers import AutoTokenizer, PreTrainedTokenizerBase

    if isinstance(tokenizer, PreTrainedTokenizerBase):
        return tokenizer
    spec = os.fspath(tokenizer)
    alias = spec.strip().lower()
    if alias in ALIASES:
        # The converted directory of the alias holds its tokenizer files.
        source = ALIASES[alias](cache)
        return load_converted(source, cache, torch.float32, tokenizer_only=True)[1]

    path = Path(spec).expanduser()
    if not path.exists():
        check_repo_id(spec, "tokenizer")
        snapshot = cached_snapshot(spec, ("tokenizer.json", "tokenizer_config.json"))
        if snapshot is None:
            if hf_offline():
                raise ModelNotFoundError(offline_message(spec, "tokenizer"))
            try:
                return AutoTokenizer.from_pretrained(spec)
            except Exception as e:  # noqa: BLE001
                raise ModelNotFoundError(
                    f"tokenizer {spec!r} is not available locally and could not be "
                    f"downloaded: {short_error(e)}"
                ) from e
        path = snapshot
    try:
        return AutoTokenizer.from_pretrained(path, local_files_only=True)
    except Exception as e:  # noqa: BLE001
        raise ModelLoadError(f"could not load tokenizer {spec!r} from {path}: {short_error(e)}") from e

