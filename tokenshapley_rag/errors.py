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
    "AttributionCancelledError",
    "ModelLoadError",
    "ModelNotFoundError",
    "AttributionServiceError",
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
    """A text is over a size limit: the encoder's context window, or the attributor's
    bound on work (``max_source_chars``, ``max_context_chars``).

    The message names the field, its size and the limit. When the check knows them,
    ``field`` (e.g. ``"sources[0].text"`` or ``"sources"``), ``size`` and ``limit`` (in
    characters) are also attributes; they are None for the encoder's token limit.

    Examples
    --------
    >>> err = TextTooLongError("sources hold 9 characters", field="sources", size=9, limit=5)
    >>> (err.field, err.size, err.limit, isinstance(err, ValueError))
    ('sources', 9, 5, True)
    """

    def __init__(self, message: str, *, field: str | None = None, size: int | None = None, limit: int | None = None) -> None:
        super().__init__(message)
        self.field, self.size, self.limit = field, size, limit


class StreamStateError(TokenShapleyError, RuntimeError):
    """An :class:`AttributionStream` was used out of order (fed after ``finish``, or its
    ``result`` read before)."""


class AttributionCancelledError(TokenShapleyError, RuntimeError):
    """An attribution stopped early because its ``cancel`` event was set (the client left,
    or a time budget ran out). Raised at the next checkpoint: between the encoder's
    forward passes over the sources, and between the steps of an attribution."""


class ModelLoadError(TokenShapleyError, OSError):
    """The encoder model could not be loaded."""


class ModelNotFoundError(ModelLoadError):
    """The model name or path does not exist locally (and may not be downloaded)."""


class AttributionServiceError(TokenShapleyError, OSError):
    """The attribution service (``tokenshapley serve``) could not be reached, or refused a
    request. ``status`` is the HTTP status (None when no server answered), ``code`` the
    service's error code (``"unreachable"`` when none answered, ``"daemon_failed"`` when a
    background service started for ``--daemon`` did not come up, else e.g.
    ``"context_too_large"``), ``field`` the request field at fault when the service names one.

    Examples
    --------
    >>> err = AttributionServiceError("'answer' is empty", status=400, code="empty_answer", field="answer")
    >>> (err.status, err.code, err.field, str(err))
    (400, 'empty_answer', 'answer', "'answer' is empty")
    """

    def __init__(self, message: str, *, status: int | None = None, code: str = "unreachable", field: str | None = None) -> None:
        super().__init__(message)
        self.status, self.code, self.field = status, code, field

    def __str__(self) -> str:  # OSError's own __str__ would show the args tuple
        return str(self.args[0]) if self.args else ""
