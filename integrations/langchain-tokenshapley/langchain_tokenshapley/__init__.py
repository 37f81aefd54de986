"""LangChain integration of tokenshapley-rag: keyword-level citations for retrieval chains.

- :class:`TokenShapleyCitations`: a Runnable for ``chain.assign(citations=...)`` on a
  ``create_retrieval_chain``-style chain.
- :class:`TokenShapleySentenceSources`: a Runnable for ``chain.assign(sentence_sources=...)``:
  the document each answer sentence comes from.
- :class:`TokenShapleyCallbackHandler`: a callback handler that cites the answer of any
  chain with a retriever and an LLM, keyed by root run id.
- :class:`ChatTokenShapley`: the bundled model (the one that encodes for attribution) as
  a chat model, for a fully local chain.
"""

from langchain_tokenshapley.callbacks import TokenShapleyCallbackHandler
from langchain_tokenshapley.chat_models import ChatTokenShapley
from langchain_tokenshapley.runnables import TokenShapleyCitations, TokenShapleySentenceSources

__all__ = ["ChatTokenShapley", "TokenShapleyCallbackHandler", "TokenShapleyCitations", "TokenShapleySentenceSources"]
