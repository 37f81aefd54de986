"""Exception hierarchy of tokenshapley-rag.

Every error the library raises on bad input or an unusable model derives from
:class:`TokenShapleyError`, so ``except TokenShapleyError`` catches all of them. Each
also derives from the matching built-in (``ValueError``, ``TypeError``, ``OSError``)
so code that predates this library keeps working.

Examples
--------
>>> from tokenshapley_rag.errors import EmptyTextError, TokenShapleyError
>>> issubclass(EmptyTextError, TokenShapleyError) and issubclass(EmptyTextError, ValueError)
True
"""

from __future__ import annotations

__all__ = [
    "TokenShapleyError",
    "InvalidInputError",
    "InvalidInputTypeError",
    "EmptyTextError",
    "DuplicateSourceIdError",
    "TextTooLongError",
    "InvalidTextError",
    "StreamStateError",
    "ModelLoadError",
    "ModelNotFoundError",
]


class TokenShapleyError(Exception):
    """Base class of every error raised by tokenshapley-rag."""


class InvalidInputError(TokenShapleyError, ValueError):
    """An argument has the right type but an unusable value."""


class InvalidInputTypeError(TokenShapleyError, TypeError):
    """An argument (or an item of a list argument) has the wrong type."""


class EmptyTextError(InvalidInputError):
    """A query, answer or source is empty or only whitespace where text is required."""


class DuplicateSourceIdError(InvalidInputError):
    """Two sources share one id, so citations could not say which one they mean."""


class InvalidTextError(InvalidInputError):
    """A text holds something that is not Unicode text (a lone surrogate, or bytes that are
    not UTF-8). The message names the field and the position."""


class TextTooLongError(InvalidInputError):
    """A text does not fit the encoder's context window (the message gives the limit)."""


class StreamStateError(TokenShapleyError, RuntimeError):
    """An :class:`AttributionStream` was used out of order (fed after ``finish``, or its
    ``result`` read before)."""


class ModelLoadError(TokenShapleyError, OSError):
    """The encoder model could not be loaded."""


class ModelNotFoundError(ModelLoadError):
    """The model name or path does not exist locally (and may not be downloaded)."""
