"""Checks of a freshly loaded model and tokenizer, and the dimensions read from its config.

Each check raises :class:`~tokenshapley_rag.errors.ModelLoadError` with the reason, so
a model that cannot serve keyword citations fails at load time, not mid-attribution.
"""

from __future__ import annotations

from typing import Any

import torch

from tokenshapley_rag._models.pretrained import short_error
from tokenshapley_rag.errors import ModelLoadError

__all__ = [
    "MAX_CONTEXT_LENGTH",
    "check_fast_tokenizer",
    "dimensions",
    "max_length",
    "smoke_test",
    "tie_output_embeddings_if_missing",
]

MAX_CONTEXT_LENGTH = 8192
"""Upper bound of :attr:`~tokenshapley_rag._models.LoadedModel.max_length`.

Models advertise up to 128k positions; on a CPU an input that long takes minutes and
gigabytes of activations, so the usable window is capped here.
"""

# Used when a config names no position limit at all (rare: every RoPE model has one).
_FALLBACK_CONTEXT_LENGTH = 2048
# Text of the load-time smoke forward pass.
_SMOKE_TEXT = "Hello world"


def check_fast_tokenizer(tok: Any, name: str) -> None:
    """Keyword citations map tokens back to text through character offsets."""
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
            f"the tokenizer of {name!r} cannot return offset mappings: {short_error(e)}"
        ) from e
    if not ok:
        raise ModelLoadError(f"the tokenizer of {name!r} returned no offsets for 'Hello world'")


def tie_output_embeddings_if_missing(lm: Any, name: str) -> None:
    """Tie a meta-device output layer to the input embedding, or fail clearly.

    Our own loads are serialised (``CONSTRUCTION_LOCK``), but a ``from_pretrained``
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


def dimensions(lm: Any, name: str) -> tuple[int, int]:
    """(number of transformer blocks, hidden size) of a causal LM."""
    config = _text_config(lm)
    # Llama-style names first, then GPT-2 / T5-style ones.
    layers = _first_attr(config, ("num_hidden_layers", "n_layer", "num_layers"))
    hidden = _first_attr(config, ("hidden_size", "n_embd", "d_model"))
    if not isinstance(layers, int) or not isinstance(hidden, int):
        raise ModelLoadError(f"cannot tell the number of layers and hidden size of {name!r}")
    return layers, hidden


def max_length(lm: Any, tok: Any) -> int:
    """Longest input in tokens: the model's and tokenizer's limits, capped at
    :data:`MAX_CONTEXT_LENGTH`."""
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


def smoke_test(lm: Any, tok: Any, name: str, num_layers: int, hidden_size: int) -> None:
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
        raise ModelLoadError(f"the model {name!r} failed a forward pass: {short_error(e)}") from e
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
