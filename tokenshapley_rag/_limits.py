"""Bounded work: size limits on the sources, and cancellation checkpoints.

An attribution's cost grows with the context: every source token is encoded once (cold)
and searched for every answer token. :class:`~tokenshapley_rag.TokenShapley` therefore
refuses, before any work, a source longer than ``max_source_chars`` or sources longer than
``max_context_chars`` in all, with a :class:`~tokenshapley_rag.errors.TextTooLongError`
naming the field, its size and the limit. The defaults are set from measurements of a
cold ``attribute()`` on 2 CPU cores (docs/reports/performance.md, "Bounded work"); ``None``
disables a limit.

A long attribution can also be stopped from another thread: ``attribute(...,
cancel=event)`` and ``stream(..., cancel=event)`` check ``event.is_set()`` at each
checkpoint (between the encoder's forward passes over the sources, and between the steps
of an attribution) and raise :class:`~tokenshapley_rag.errors.AttributionCancelledError`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tokenshapley_rag.errors import AttributionCancelledError, InvalidInputError, InvalidInputTypeError, TextTooLongError

__all__ = [
    "DEFAULT_MAX_SOURCE_CHARS",
    "DEFAULT_MAX_CONTEXT_CHARS",
    "check_limit",
    "check_context_size",
    "check_cancel_event",
    "checkpoint",
]

#: One source (a retrieved chunk) may hold at most this many characters by default. The
#: longest source of the evaluation sets holds 5,188 (VeriGran); a cold attribution over one
#: 50,000-character source (16k tokens) took 36 CPU-seconds and 182 MB above the loaded
#: model on 2 CPU cores (docs/reports/performance.md, "Bounded work").
DEFAULT_MAX_SOURCE_CHARS = 50_000
#: All the sources of one attribution together, by default. The largest context of the
#: evaluation sets is 101,551 characters (a WiCE article); 119,089 characters in 12 sources
#: (39k tokens) took 90 CPU-seconds and 360 MB cold (docs/reports/performance.md, "Bounded work").
#: The probe's 200k-character source took 147 CPU-seconds and 457 MB: cost grows linearly.
DEFAULT_MAX_CONTEXT_CHARS = 120_000


def check_limit(value: Any, name: str) -> int | None:
    """``value`` if it is a positive integer or None (no limit); otherwise a typed error.

    Raises
    ------
    InvalidInputTypeError
        ``value`` is not an int (a bool is not one) or None.
    InvalidInputError
        ``value`` is 0 or negative.

    Examples
    --------
    >>> check_limit(1000, "max_source_chars"), check_limit(None, "max_source_chars")
    (1000, None)
    >>> check_limit(0, "max_source_chars")
    Traceback (most recent call last):
    ...
    tokenshapley_rag.errors.InvalidInputError: max_source_chars must be a positive integer or None (no limit), got 0
    """
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInputTypeError(f"{name} must be an int or None, got {type(value).__name__}")
    if value < 1:
        raise InvalidInputError(f"{name} must be a positive integer or None (no limit), got {value}")
    return value


def check_context_size(
    texts: Sequence[str],
    *,
    max_source_chars: int | None,
    max_context_chars: int | None,
    ids: Sequence[str] | None = None,
) -> None:
    """Refuse sources over the size limits, before any work is spent on them.

    Parameters
    ----------
    texts : list of str
        The sources' texts, in order (``sources[i].text``).
    max_source_chars, max_context_chars : int or None
        The longest one source and all sources together may be, in characters (code
        points); None: no limit.
    ids : list of str, optional
        The sources' ids, named in the message.

    Raises
    ------
    TextTooLongError
        With ``field`` ``"sources[i].text"`` (one source over ``max_source_chars``; the
        first such) or ``"sources"`` (the total over ``max_context_chars``), ``size`` and
        ``limit`` set.

    Examples
    --------
    >>> check_context_size(["abc", "de"], max_source_chars=3, max_context_chars=5)
    >>> check_context_size(["abcd"], max_source_chars=3, max_context_chars=None, ids=["big"])
    Traceback (most recent call last):
    ...
    tokenshapley_rag.errors.TextTooLongError: sources[0].text (id 'big') has 4 characters, over the limit max_source_chars=3: split it into smaller chunks or raise the limit (None disables it)
    >>> check_context_size(["abc", "def"], max_source_chars=None, max_context_chars=5)
    Traceback (most recent call last):
    ...
    tokenshapley_rag.errors.TextTooLongError: sources hold 6 characters in all (2 sources), over the limit max_context_chars=5: retrieve fewer or shorter chunks or raise the limit (None disables it)
    """
    if max_source_chars is not None:
        for i, text in enumerate(texts):
            if len(text) > max_source_chars:
                named = f" (id {ids[i]!r})" if ids is not None else ""
                raise TextTooLongError(
                    f"sources[{i}].text{named} has {len(text)} characters, over the limit "
                    f"max_source_chars={max_source_chars}: split it into smaller chunks or raise the limit "
                    "(None disables it)",
                    field=f"sources[{i}].text", size=len(text), limit=max_source_chars,
                )
    if max_context_chars is not None:
        total = sum(len(t) for t in texts)
        if total > max_context_chars:
            raise TextTooLongError(
                f"sources hold {total} characters in all ({len(texts)} sources), over the limit "
                f"max_context_chars={max_context_chars}: retrieve fewer or shorter chunks or raise the limit "
                "(None disables it)",
                field="sources", size=total, limit=max_context_chars,
            )


def check_cancel_event(cancel: Any) -> Any:
    """``cancel`` if it is None or has an ``is_set()`` method (a :class:`threading.Event`);
    otherwise :class:`~tokenshapley_rag.errors.InvalidInputTypeError`.

    >>> import threading
    >>> check_cancel_event(None) is None, isinstance(check_cancel_event(threading.Event()), threading.Event)
    (True, True)
    """
    if cancel is not None and not callable(getattr(cancel, "is_set", None)):
        raise InvalidInputTypeError(f"cancel must be a threading.Event (anything with is_set()) or None, got {type(cancel).__name__}")
    return cancel


def checkpoint(cancel: Any, where: str) -> None:
    """Raise :class:`~tokenshapley_rag.errors.AttributionCancelledError` if ``cancel`` is set.

    >>> import threading
    >>> event = threading.Event(); checkpoint(event, "encoding")
    >>> event.set(); checkpoint(event, "encoding the sources")
    Traceback (most recent call last):
    ...
    tokenshapley_rag.errors.AttributionCancelledError: the attribution was cancelled (its cancel event is set) while encoding the sources
    """
    if cancel is not None and cancel.is_set():
        raise AttributionCancelledError(f"the attribution was cancelled (its cancel event is set) while {where}")
