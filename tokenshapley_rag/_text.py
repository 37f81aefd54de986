"""Text hygiene for every public entry (core, stream, CLI, server, chain evaluation).

One rule, applied the same way everywhere: a text must be a ``str`` of valid Unicode
(no lone surrogates, which cannot be encoded, hashed for the cache or tokenized). Text is
never rewritten (offsets into the caller's string stay exact); invisible characters and the
combining marks of decomposed text are handled where words are read (``_segment._visible``,
and the fact rule in ``_support``, which compares words composed).
"""

from __future__ import annotations

import re
from typing import Any

from tokenshapley_rag.errors import InvalidInputTypeError, InvalidTextError

__all__ = ["check_text", "decode_utf8"]

_SURROGATE = re.compile("[\ud800-\udfff]")


def check_text(value: Any, field: str) -> str:
    """``value`` if it is a ``str`` of valid Unicode; otherwise a typed error naming ``field``.

    Raises
    ------
    InvalidInputTypeError
        ``value`` is not a ``str``.
    InvalidTextError
        ``value`` holds a lone surrogate (e.g. from decoding with ``surrogateescape``).

    Examples
    --------
    >>> check_text("ok", "response")
    'ok'
    >>> check_text("It is \\ud800 ok.", "response")
    Traceback (most recent call last):
    ...
    tokenshapley_rag.errors.InvalidTextError: response holds a lone surrogate U+D800 at index 6: not valid Unicode text (decode it with errors='replace')
    """
    if not isinstance(value, str):
        raise InvalidInputTypeError(f"{field} must be a str, got {type(value).__name__}")
    if value.isascii():  # known without reading the text (CPython keeps the flag): no surrogate
        return value
    bad = _SURROGATE.search(value)
    if bad is not None:
        raise InvalidTextError(
            f"{field} holds a lone surrogate U+{ord(bad.group()):04X} at index {bad.start()}: "
            "not valid Unicode text (decode it with errors='replace')"
        )
    return value


def decode_utf8(data: bytes, field: str) -> str:
    """``data`` decoded as UTF-8 (a BOM is dropped), or :class:`InvalidTextError` naming
    ``field`` and the first bad byte's offset."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise InvalidTextError(f"{field} is not UTF-8 text (byte {err.start}: {data[err.start:err.start + 1]!r})") from None
