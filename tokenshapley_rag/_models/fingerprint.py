"""Fingerprints: 64 hex digits that change whenever a model's hidden states could.

A model's fingerprint combines its weights (the files of its checkpoint directory,
or the tensors of a model passed in already loaded), its tokenizer when one is given
separately, and the dtype. Equal fingerprints mean equal hidden states, so caches of
encoded sentences key on it.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import torch

from tokenshapley_rag._files import file_sha256, sha256_of

__all__ = [
    "MARKER",
    "combine_fingerprint",
    "directory_fingerprint",
    "fingerprint_names",
    "hash_files",
    "state_dict_fingerprint",
    "tokenizer_fingerprint",
]

MARKER = "tokenshapley-complete.json"
"""The completion marker the GGUF conversion writes last into a converted directory.

It is no part of the fingerprint, so a converted model has the same fingerprint
whether it is named by its alias or by its path.
"""

# Top-level files of a checkpoint directory that make up its fingerprint.
_FINGERPRINT_SUFFIXES = (".safetensors", ".bin", ".json", ".model", ".txt", ".tiktoken")
_FINGERPRINT_SKIP = frozenset({MARKER})


def hash_files(directory: Path, names: list[str], cache: Path | None = None) -> str:
    """One sha256 over (name, content sha256) of ``names`` in ``directory``.

    With ``cache``, each file's sha256 is remembered there (:func:`file_sha256`).
    """
    digest = hashlib.sha256(b"tokenshapley-files-v1\n")
    for fname in sorted(names):
        if fname in _FINGERPRINT_SKIP:
            continue
        p = directory / fname
        sha = file_sha256(p, cache) if cache is not None else sha256_of(p)
        digest.update(f"{fname}\0{sha}\n".encode())
    return digest.hexdigest()


def fingerprint_names(directory: Path) -> list[str]:
    """The files of a checkpoint directory that decide its hidden states.

    One rule for converted and user directories, so a converted model has the same
    fingerprint whether it is named by its alias or by its path.
    """
    return sorted(
        p.name
        for p in directory.iterdir()
        if p.is_file() and p.suffix in _FINGERPRINT_SUFFIXES and p.name not in _FINGERPRINT_SKIP
    )


def directory_fingerprint(directory: Path, cache: Path) -> str:
    """Fingerprint of a checkpoint directory from its weight, config and tokenizer files."""
    return hash_files(directory, fingerprint_names(directory), cache)


def state_dict_fingerprint(lm: Any) -> str:
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


def tokenizer_fingerprint(tok: Any) -> str:
    """Fingerprint of a fast tokenizer: its serialised backend and special tokens."""
    digest = hashlib.sha256(b"tokenshapley-tokenizer-v1\n")
    backend = getattr(tok, "backend_tokenizer", None)
    digest.update(backend.to_str().encode() if backend is not None else repr(tok).encode())
    digest.update(json.dumps(tok.special_tokens_map, sort_keys=True, default=str).encode())
    return digest.hexdigest()


def combine_fingerprint(weights_fp: str, tok_fp: str | None, dtype: torch.dtype) -> str:
    """The model's fingerprint (``tok_fp`` is ``None`` for the tokenizer bundled with it)."""
    # The dtype is part of it: the same weights in bfloat16 give other hidden states.
    text = f"tokenshapley-model-v1|{weights_fp}|{tok_fp or 'bundled'}|{dtype}"
    return hashlib.sha256(text.encode()).hexdigest()
