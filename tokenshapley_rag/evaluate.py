"""Deprecated: the chain evaluation is :mod:`tokenshapley_rag.chain_eval`.

``from tokenshapley_rag.evaluate import evaluate_chain`` (and every other public name)
still works and returns the same object, with a :class:`DeprecationWarning` pointing at
the importing line. The old private submodules (``tokenshapley_rag.evaluate._cli``, ...)
are gone.
"""

from __future__ import annotations

import warnings
from typing import Any

from tokenshapley_rag import chain_eval

__all__ = list(chain_eval.__all__)


def __getattr__(name: str) -> Any:
    if name in chain_eval.__all__:
        warnings.warn(
            # One message for every name: shown once per importing line.
            "tokenshapley_rag.evaluate is deprecated: import from tokenshapley_rag.chain_eval",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(chain_eval, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(chain_eval.__all__)
