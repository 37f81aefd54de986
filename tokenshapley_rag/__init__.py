"""tokenshapley-rag: keyword-level citations for RAG answers with exact token Shapley values."""

from tokenshapley_rag._attribution import AttributionResult, TokenScores, TokenShapley, context_scores, context_weights
from tokenshapley_rag._generate import generate_chat, stream_chat
from tokenshapley_rag._render import footnote_numbers, render_html, render_markdown
from tokenshapley_rag._stream import AttributionStream
from tokenshapley_rag._types import (
    KeywordCitation,
    SentenceCitations,
    SentenceScore,
    SentenceVerdict,
    Source,
    SourceAttribution,
)
from tokenshapley_rag.errors import (
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
from tokenshapley_rag.shapley import knn_shapley, knn_shapley_batch

__version__ = "0.1.0"

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
    "Source",
    "SourceAttribution",
    "StreamStateError",
    "TextTooLongError",
    "InvalidTextError",
    "TokenShapleyError",
    "knn_shapley",
    "knn_shapley_batch",
]
