"""tokenshapley-rag: keyword-level citations for RAG answers with exact token Shapley values.

The light parts (result types, errors, renderers) import at once; the attribution engine
(torch, numba, the encoder) is imported on first use of a name that needs it, so
``import tokenshapley_rag`` stays fast (docs/reports/performance.md, "Start-up").

>>> import tokenshapley_rag as ts
>>> ts.Source("a", "The Eiffel Tower is in Paris.").id
'a'
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tokenshapley_rag._lazy import lazy_attributes

from tokenshapley_rag._render import footnote_numbers, render_html, render_markdown
from tokenshapley_rag._types import (
    AnswerSentenceSources,
    EvidenceSentence,
    KeywordCitation,
    SentenceCitations,
    SentenceScore,
    SentenceSource,
    SentenceVerdict,
    Source,
    SourceAttribution,
)
from tokenshapley_rag.errors import (
    AttributionCancelledError,
    DuplicateSourceIdError,
    EmptyTextError,
    InvalidInputError,
    InvalidInputTypeError,
    InvalidTextError,
    ModelLoadError,
    ModelNotFoundError,
    StreamStateError,
    TextTooLongError,
    TokenShapleyError,
)

if TYPE_CHECKING:
    from tokenshapley_rag._attribution import TokenShapley
    from tokenshapley_rag._context_game import context_scores, context_weights
    from tokenshapley_rag._generate import generate_chat, stream_chat
    from tokenshapley_rag._result import AttributionResult, TokenScores
    from tokenshapley_rag._stream import AttributionStream
    from tokenshapley_rag.shapley import knn_shapley, knn_shapley_batch

__version__ = "0.1.0"

# Names whose modules import torch or numba: loaded on first access (PEP 562).
_LAZY = {
    "AttributionResult": "tokenshapley_rag._result",
    "TokenScores": "tokenshapley_rag._result",
    "TokenShapley": "tokenshapley_rag._attribution",
    "context_scores": "tokenshapley_rag._context_game",
    "context_weights": "tokenshapley_rag._context_game",
    "AttributionStream": "tokenshapley_rag._stream",
    "generate_chat": "tokenshapley_rag._generate",
    "stream_chat": "tokenshapley_rag._generate",
    "knn_shapley": "tokenshapley_rag.shapley",
    "knn_shapley_batch": "tokenshapley_rag.shapley",
}


__getattr__, __dir__ = lazy_attributes(globals(), _LAZY)


__all__ = [
    "AttributionResult",
    "AttributionStream",
    "TokenScores",
    "TokenShapley",
    "context_scores",
    "context_weights",
    "footnote_numbers",
    "generate_chat",
    "stream_chat",
    "render_html",
    "render_markdown",
    "AttributionCancelledError",
    "DuplicateSourceIdError",
    "EmptyTextError",
    "InvalidInputError",
    "InvalidInputTypeError",
    "KeywordCitation",
    "ModelLoadError",
    "ModelNotFoundError",
    "SentenceCitations",
    "SentenceVerdict",
    "SentenceScore",
    "EvidenceSentence",
    "AnswerSentenceSources",
    "SentenceSource",
    "Source",
    "SourceAttribution",
    "StreamStateError",
    "TextTooLongError",
    "InvalidTextError",
    "TokenShapleyError",
    "knn_shapley",
    "knn_shapley_batch",
]
