"""Answer a question over sources with a local causal LM (for the demo and evaluation).

Attribution never needs this: it re-encodes any answer. It exists so that the demo and
the generation-based benchmarks (NQ, CNN/DM) can run with nothing but the embedded model.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from tokenshapley_rag._models import LoadedModel
from tokenshapley_rag._types import Source

__all__ = ["rag_prompt", "generate_answer"]


def rag_prompt(query: str, sources: Sequence[Source]) -> str:
    """The user turn given to the generator: numbered passages, then the question.

    Examples
    --------
    >>> print(rag_prompt("Who?", [Source("a", "Ann did it.")]))
    Answer the question in one or two sentences using only the passages.
    <BLANKLINE>
    Passage a: Ann did it.
    <BLANKLINE>
    Question: Who?
    """
    passages = "\n".join(f"Passage {s.id}: {s.text}" for s in sources)
    return (
        "Answer the question in one or two sentences using only the passages.\n\n"
        f"{passages}\n\nQuestion: {query}"
    )


@torch.inference_mode()
def generate_answer(loaded: LoadedModel, query: str, sources: Sequence[Source], *, max_new_tokens: int = 64) -> str:
    """Greedy answer of ``loaded`` with the question (and passages) in the user turn of the
    chat template (the instruct model answers sensibly only that way)."""
    tok = loaded.tokenizer
    content = rag_prompt(query, sources)
    if getattr(tok, "chat_template", None):
        ids = tok.apply_chat_template(
            [{"role": "user", "content": content}], add_generation_prompt=True, return_tensors="pt", return_dict=True
        )["input_ids"]
    else:
        ids = tok(content + "\nAnswer:", return_tensors="pt")["input_ids"]
    ids = ids.to(loaded.model.device)
    out = loaded.model.generate(
        ids,
        attention_mask=torch.ones_like(ids),
        max_new_tokens=max_new_tokens,
        do_sample=False,
        pad_token_id=tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id,
    )
    return tok.decode(out[0, ids.shape[1] :], skip_special_tokens=True).strip()
