"""The causal LM side of the generation protocols: prompts, cached answers, log-probabilities.

:class:`ResponseLM` wraps a :class:`~tokenshapley_rag._models.LoadedModel` and speaks the
one prompt the project generates with (:func:`tokenshapley_rag._generate.rag_prompt` in
the chat template's user turn, as :func:`~tokenshapley_rag._generate.generate_answer`
builds it). It generates answers (NQ) and summaries (CNN/DM), scores the log-probability
of a response given some (possibly ablated) sources (CNN/DM metric, ContextCite), and
returns hidden states over prompt + response (HidSim).

:class:`GenerationCache` keeps generated responses on disk, keyed by task, example id,
model fingerprint, ``max_new_tokens`` and a hash of the prompt template, so reruns, resumed
runs and every method evaluate the same response.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from tokenshapley_rag._generate import generate_answer, rag_prompt
from tokenshapley_rag._models import LoadedModel, default_cache_dir
from tokenshapley_rag._types import Source
from tokenshapley_rag.errors import InvalidInputError, InvalidInputTypeError, TextTooLongError

__all__ = ["GenerationCache", "PromptTokens", "ResponseLM", "ResponseScores", "prompt_template_sha"]


def prompt_template_sha() -> str:
    """First 16 hex digits of the SHA-256 of the generation prompt, rendered on placeholders.

    It changes whenever :func:`~tokenshapley_rag._generate.rag_prompt` changes, which
    invalidates cached generations made with the old prompt.

    Examples
    --------
    >>> len(prompt_template_sha())
    16
    """
    text = rag_prompt("{query}", [Source("{id}", "{text}")])
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


@dataclass(frozen=True, slots=True)
class PromptTokens:
    """The prompt that precedes a response, tokenized, with where each source sits in it.

    Parameters
    ----------
    text : str
        The full prompt string (chat template included).
    ids : ndarray of shape (n,), dtype int64
    offsets : ndarray of shape (n, 2), dtype int64
        Character offsets of each token into ``text`` (special tokens: ``(0, 0)``).
    source_starts : tuple of int
        ``text[source_starts[j] : source_starts[j] + len(sources[j].text)] == sources[j].text``.
    """

    text: str
    ids: np.ndarray
    offsets: np.ndarray
    source_starts: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class ResponseScores:
    """Per-token scores of a teacher-forced response.

    Parameters
    ----------
    logprobs : ndarray of shape (n_tokens,), dtype float64
        ``log p(token | prompt, previous response tokens)``.
    logit_probs : ndarray of shape (n_tokens,), dtype float64
        ``log p - log(1 - p)`` of each token, computed as ContextCite computes it (the
        correct token's logit minus the log-sum-exp of all other logits).
    offsets : ndarray of shape (n_tokens, 2), dtype int64
        Character offsets of the tokens into the response.
    """

    logprobs: np.ndarray
    logit_probs: np.ndarray
    offsets: np.ndarray

    @property
    def total(self) -> float:
        """Log-probability of the whole response (sum over its tokens)."""
        return float(self.logprobs.sum())


class ResponseLM:
    """A causal LM used to generate and score responses over sources.

    Parameters
    ----------
    loaded : LoadedModel
        E.g. ``TokenShapley().loaded`` or ``load_causal_lm()`` (the default SmolLM2).
    memo_size : int, default=64
        :meth:`score_response` results kept per instance (LRU), keyed by query, source ids
        and texts, and response: the CNN/DM protocol scores the same full article for every
        method, and short articles often give the same ablated text.

    Examples
    --------
    >>> lm = ResponseLM(load_causal_lm())  # doctest: +SKIP
    >>> s = lm.score_response("Who?", [Source("a", "Ann did it.")], "Ann.")  # doctest: +SKIP
    >>> s.logprobs.shape  # doctest: +SKIP
    (2,)
    """

    def __init__(self, loaded: LoadedModel, *, memo_size: int = 64) -> None:
        if not isinstance(loaded, LoadedModel):
            raise InvalidInputTypeError(f"loaded must be a LoadedModel, got {type(loaded).__name__}")
        self.loaded = loaded
        self._lock = threading.Lock()
        self._memo: OrderedDict[tuple[Any, ...], ResponseScores] = OrderedDict()
        self._memo_lock = threading.Lock()
        self.memo_size = int(memo_size)

    @property
    def name(self) -> str:
        return self.loaded.name

    @property
    def fingerprint(self) -> str:
        return self.loaded.fingerprint

    # ------------------------------------------------------------------ prompt

    def prompt(self, query: str, sources: Sequence[Source]) -> PromptTokens:
        """The tokens :func:`generate_answer` feeds the model, with source positions."""
        tok = self.loaded.tokenizer
        content = rag_prompt(query, sources)
        if getattr(tok, "chat_template", None):
            text = tok.apply_chat_template([{"role": "user", "content": content}], add_generation_prompt=True, tokenize=False)
            special = False
        else:
            text = content + "\nAnswer:"
            special = True
        base = text.find(content)
        if base < 0:
            raise InvalidInputError("the chat template altered the prompt text; cannot locate the sources in it")
        starts = []
        cursor = base
        for s in sources:
            head = f"Passage {s.id}: "
            at = text.find(head + s.text, cursor)
            if at < 0:
                raise InvalidInputError(f"source {s.id!r} not found verbatim in the prompt (rag_prompt changed?)")
            starts.append(at + len(head))
            cursor = at + len(head) + len(s.text)
        enc = tok(text, add_special_tokens=special, return_offsets_mapping=True)
        ids = np.asarray(enc["input_ids"], dtype=np.int64)
        offsets = np.asarray(enc["offset_mapping"], dtype=np.int64).reshape(-1, 2)
        return PromptTokens(text, ids, offsets, tuple(starts))

    def response_tokens(self, response: str) -> tuple[np.ndarray, np.ndarray]:
        """Ids and character offsets of ``response`` (no special tokens)."""
        enc = self.loaded.tokenizer(response, add_special_tokens=False, return_offsets_mapping=True)
        return (
            np.asarray(enc["input_ids"], dtype=np.int64),
            np.asarray(enc["offset_mapping"], dtype=np.int64).reshape(-1, 2),
        )

    def _check_length(self, n: int) -> None:
        if n > self.loaded.max_length:
            raise TextTooLongError(
                f"prompt + response take {n} tokens, over the model's context of {self.loaded.max_length} tokens"
            )

    # ------------------------------------------------------------------ generation

    def generate(self, query: str, sources: Sequence[Source], *, max_new_tokens: int = 64) -> str:
        """Greedy response (:func:`~tokenshapley_rag._generate.generate_answer`)."""
        self._check_length(len(self.prompt(query, sources).ids) + max_new_tokens)
        with self._lock:
            return generate_answer(self.loaded, query, list(sources), max_new_tokens=max_new_tokens)

    # ------------------------------------------------------------------ scoring

    def score_response(self, query: str, sources: Sequence[Source], response: str) -> ResponseScores:
        """Per-token log-probabilities of ``response`` after the prompt over ``sources``.

        Raises
        ------
        InvalidInputError
            ``response`` has no token.
        TextTooLongError
            Prompt + response exceed the model's context.
        """
        key = (query, tuple((s.id, s.text) for s in sources), response)
        with self._memo_lock:
            hit = self._memo.get(key)
            if hit is not None:
                self._memo.move_to_end(key)
                return hit
        scores = self._score_response(query, sources, response)
        with self._memo_lock:
            self._memo[key] = scores
            while len(self._memo) > self.memo_size:
                self._memo.popitem(last=False)
        return scores

    @torch.inference_mode()
    def _score_response(self, query: str, sources: Sequence[Source], response: str) -> ResponseScores:
        prompt = self.prompt(query, sources)
        rids, roffs = self.response_tokens(response)
        if len(rids) == 0:
            raise InvalidInputError("response has no token to score")
        ids = np.concatenate([prompt.ids, rids])
        self._check_length(len(ids))
        x = torch.as_tensor(ids, dtype=torch.long)[None, :].to(self.loaded.model.device)
        n = len(rids)
        with self._lock:
            try:
                out = self.loaded.model(input_ids=x, attention_mask=torch.ones_like(x), use_cache=False, logits_to_keep=n + 1)
                logits = out.logits[0, -(n + 1) : -1]
            except TypeError:  # a model without logits_to_keep
                out = self.loaded.model(input_ids=x, attention_mask=torch.ones_like(x), use_cache=False)
                logits = out.logits[0, len(prompt.ids) - 1 : len(ids) - 1]
        logits = logits.float()
        labels = torch.as_tensor(rids, dtype=torch.long, device=logits.device)
        correct = logits.gather(-1, labels[:, None])[:, 0]
        logprobs = correct - torch.logsumexp(logits, dim=-1)
        others = logits.clone()
        others.scatter_(-1, labels[:, None], -torch.inf)
        logit_probs = correct - torch.logsumexp(others, dim=-1)
        return ResponseScores(
            logprobs.double().cpu().numpy(), logit_probs.double().cpu().numpy(), roffs
        )

    @torch.inference_mode()
    def hidden_states(
        self, query: str, sources: Sequence[Source], response: str, layer: int
    ) -> tuple[PromptTokens, np.ndarray, np.ndarray, np.ndarray]:
        """Hidden states at ``layer`` (0 = embeddings) over prompt + teacher-forced response.

        Returns
        -------
        prompt : PromptTokens
        prompt_states : ndarray of shape (n_prompt, hidden), float32
        response_states : ndarray of shape (n_response, hidden), float32
            State *at* each response token (the token is the last input).
        response_offsets : ndarray of shape (n_response, 2), int64
        """
        n_layers = self.loaded.num_layers
        if isinstance(layer, bool) or not isinstance(layer, int) or not 0 <= layer <= n_layers:
            raise InvalidInputError(f"layer must be an int in [0, {n_layers}], got {layer!r}")
        prompt = self.prompt(query, sources)
        rids, roffs = self.response_tokens(response)
        ids = np.concatenate([prompt.ids, rids])
        self._check_length(len(ids))
        x = torch.as_tensor(ids, dtype=torch.long)[None, :].to(self.loaded.model.device)
        with self._lock:
            out = self.loaded.model(input_ids=x, attention_mask=torch.ones_like(x), use_cache=False, output_hidden_states=True)
        h = out.hidden_states[layer][0].float().cpu().numpy()
        n = len(prompt.ids)
        return prompt, h[:n], h[n:], roffs


# --------------------------------------------------------------------------- cache


class GenerationCache:
    """Generated responses on disk (JSON lines), keyed by what determines them.

    A row is ``{"task", "id", "fingerprint", "max_new_tokens", "prompt_sha", "response"}``;
    a response is reused only when all five keys match. Rows are appended and flushed one
    at a time; a truncated last line (a killed run) is ignored.

    Parameters
    ----------
    path : str, path-like or None
        The JSONL file; None keeps responses in memory only.

    Examples
    --------
    >>> c = GenerationCache(None)
    >>> c.put("nq", "q1", "fp", 64, "ans"); c.get("nq", "q1", "fp", 64)
    'ans'
    >>> c.get("nq", "q1", "other-model", 64) is None
    True
    """

    def __init__(self, path: str | os.PathLike[str] | None) -> None:
        self.path = Path(path) if path is not None else None
        self._rows: dict[tuple[str, str, str, int, str], str] = {}
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0
        if self.path is not None and self.path.exists():
            for line in self.path.read_text(encoding="utf-8").split("\n"):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                    key = (row["task"], row["id"], row["fingerprint"], int(row["max_new_tokens"]), row["prompt_sha"])
                    self._rows[key] = str(row["response"])
                except (json.JSONDecodeError, KeyError, TypeError, ValueError):
                    continue  # a truncated or foreign line

    @staticmethod
    def default_path(task: str) -> Path:
        """``<TokenShapley cache>/generations/<task>.jsonl``."""
        return default_cache_dir() / "generations" / f"{task}.jsonl"

    def get(self, task: str, example_id: str, fingerprint: str, max_new_tokens: int) -> str | None:
        """The cached response, or None."""
        return self._rows.get((task, example_id, fingerprint, int(max_new_tokens), prompt_template_sha()))

    def put(self, task: str, example_id: str, fingerprint: str, max_new_tokens: int, response: str) -> None:
        """Store a response (appended to the file when there is one)."""
        key = (task, example_id, fingerprint, int(max_new_tokens), prompt_template_sha())
        with self._lock:
            self._rows[key] = response
            if self.path is not None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                row = dict(zip(("task", "id", "fingerprint", "max_new_tokens", "prompt_sha"), key), response=response)
                with self.path.open("a", encoding="utf-8") as fh:
                    fh.write(json.dumps(row, ensure_ascii=False) + "\n")
                    fh.flush()

    def get_or_generate(
        self,
        lm: Any,
        task: str,
        example_id: str,
        query: str,
        sources: Sequence[Source],
        *,
        max_new_tokens: int,
    ) -> str:
        """The cached response of ``lm`` for this example, generating (and storing) it once.

        ``lm`` needs ``fingerprint`` and ``generate(query, sources, max_new_tokens=...)``
        (a :class:`ResponseLM`, or a stand-in in tests).
        """
        hit = self.get(task, example_id, lm.fingerprint, max_new_tokens)
        if hit is not None:
            self.hits += 1
            return hit
        self.misses += 1
        text = lm.generate(query, sources, max_new_tokens=max_new_tokens)
        self.put(task, example_id, lm.fingerprint, max_new_tokens, text)
        return text
