"""LlamaIndex integration of tokenshapley-rag: keyword-level citations via TokenShapley."""

from llama_index.postprocessor.tokenshapley.base import (
    TokenShapleyCallbackHandler,
    TokenShapleyPostprocessor,
    TokenShapleySpanHandler,
    render_response_html,
    render_response_markdown,
)
from llama_index.postprocessor.tokenshapley.llm import TokenShapleyLLM

__all__ = [
    "TokenShapleyPostprocessor",
    "TokenShapleyCallbackHandler",
    "TokenShapleySpanHandler",
    "TokenShapleyLLM",
    "render_response_markdown",
    "render_response_html",
]
