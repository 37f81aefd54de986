"""Command-line options shared by the ``tokenshapley`` subcommands (no model, no torch).

The benchmark harness and the chain evaluation declare their own subcommands with these
types, apart from :mod:`tokenshapley_rag.cli`, so that neither imports the other.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

from tokenshapley_rag._defaults import DEFAULT_QUESTION_EMBEDDER, QUESTION_EMBEDDERS

__all__ = [
    "QUESTION_EMBEDDER_CHOICES", "add_limit_options", "int_at_least", "limit_options", "positive_seconds",
    "question_embedder_option",
]

#: ``--question-embedder``'s values: a bundled embedder's name, or ``none`` (off).
QUESTION_EMBEDDER_CHOICES = (*QUESTION_EMBEDDERS, "none")


def question_embedder_option(args: argparse.Namespace) -> str | None:
    """``--question-embedder`` as ``TokenShapley(question_embedder=...)`` takes it:
    ``none`` is None, and a command without the option gets the default.

    >>> question_embedder_option(argparse.Namespace(question_embedder="none")) is None
    True
    >>> question_embedder_option(argparse.Namespace())
    'all-MiniLM-L6-v2'
    """
    value = getattr(args, "question_embedder", DEFAULT_QUESTION_EMBEDDER)
    return None if value == "none" else value


def int_at_least(minimum: int) -> Callable[[str], int]:
    """An argparse ``type``: an integer >= ``minimum``, refused with a message naming the
    expected and the actual value.

    >>> int_at_least(1)("3")
    3
    """

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer >= {minimum}, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"expected an integer >= {minimum}, got {value}")
        return value

    parse.__name__ = f"integer >= {minimum}"  # argparse names the type in its error
    return parse


def positive_seconds(text: str) -> float:
    """An argparse ``type``: a number of seconds above 0, refused with a message naming the
    expected and the actual value.

    >>> positive_seconds("1.5")
    1.5
    """
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds > 0, got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected a number of seconds > 0, got {value:g}")
    return value


def add_limit_options(p: argparse.ArgumentParser) -> None:
    """``--max-source-chars`` and ``--max-context-chars`` (read back by :func:`limit_options`)."""
    from tokenshapley_rag._limits import DEFAULT_MAX_CONTEXT_CHARS, DEFAULT_MAX_SOURCE_CHARS

    p.add_argument(
        "--max-source-chars", dest="engine_max_source_chars", type=int_at_least(0), default=None, metavar="N",
        help=f"refuse a source longer than N characters (default {DEFAULT_MAX_SOURCE_CHARS}; 0: no limit)",
    )
    p.add_argument(
        "--max-context-chars", dest="engine_max_context_chars", type=int_at_least(0), default=None, metavar="N",
        help=f"refuse sources longer than N characters in all (default {DEFAULT_MAX_CONTEXT_CHARS}; 0: no limit)",
    )


def limit_options(args: argparse.Namespace) -> dict[str, int | None]:
    """``TokenShapley``'s size limits given on the command line (``--max-source-chars``,
    ``--max-context-chars``; 0 disables one), as keyword arguments; the library's
    defaults for those not given."""
    out: dict[str, int | None] = {}
    for key in ("max_source_chars", "max_context_chars"):
        value = getattr(args, f"engine_{key}", None)
        if value is not None:
            out[key] = value or None
    return out
