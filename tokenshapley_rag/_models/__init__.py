"""Loading the causal language model that encodes texts (private package).

One job per module:

* :mod:`.loading`: :func:`load_causal_lm`, :class:`LoadedModel`, :func:`default_cache_dir`;
* :mod:`.registry`: the model aliases and the pip packages holding their GGUF files;
* :mod:`.gguf`: the one-time, crash-safe conversion of a GGUF into a safetensors checkpoint;
* :mod:`.pretrained`: ``from_pretrained`` on local directories and hub ids;
* :mod:`.checks`: checks of a loaded model (fast tokenizer, smoke forward pass) and its dimensions;
* :mod:`.fingerprint`: the fingerprint that keys caches of hidden states;
* :mod:`.files`: atomic writes, fsync, an exclusive lock and file hashes (no model knowledge).
"""

from tokenshapley_rag._models.checks import MAX_CONTEXT_LENGTH
from tokenshapley_rag._models.loading import LoadedModel, default_cache_dir, load_causal_lm
from tokenshapley_rag._models.registry import DEFAULT_MODEL, GEMMA_MODEL

__all__ = [
    "DEFAULT_MODEL",
    "GEMMA_MODEL",
    "MAX_CONTEXT_LENGTH",
    "LoadedModel",
    "default_cache_dir",
    "load_causal_lm",
]
