"""Hidden states of one layer of a causal LM: datastore keys and response queries."""

from __future__ import annotations

import inspect
import os
import threading
from dataclasses import dataclass
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from tokenshapley_rag._models import LoadedModel
from tokenshapley_rag.errors import InvalidInputError, TextTooLongError

__all__ = ["CausalLMEncoder", "ResponseEncoding", "TokenizedText"]


@dataclass(frozen=True, slots=True)
class TokenizedText:
    """Token ids and their ``(start, end)`` character offsets into the tokenized text."""

    ids: np.ndarray  # (n,) int64
    offsets: np.ndarray  # (n, 2) int64


class _StopForward(Exception):
    """Raised by the layer hook once the wanted layer has run (skips the rest)."""


def _decoder_layers(model: torch.nn.Module) -> torch.nn.ModuleList | None:
    """The model's list of decoder blocks, for the common HF layouts (None if unknown)."""
    for path in ("model.layers", "model.language_model.layers", "transformer.h", "gpt_neox.layers", "model.decoder.layers"):
        module: object = model
        for part in path.split("."):
            module = getattr(module, part, None)
            if module is None:
                break
        if isinstance(module, torch.nn.ModuleList):
            return module
    return None


class CausalLMEncoder:
    """Teacher-forced hidden states of a causal LM at one layer.

    ``layer`` indexes ``hidden_states`` as Hugging Face returns them: 0 is the embedding
    output, ``num_layers`` the last block (after the final norm); negative values count
    from the end. The forward pass stops after the wanted block, so a middle layer costs
    about half a full pass.

    The state *before* token ``j`` of a text (the paper's key ``h(x_j)``) is the state at
    position ``j - 1``; the first token's prefix is empty, which is encoded as the
    tokenizer's BOS token (EOS when the tokenizer has no BOS).
    """

    def __init__(
        self, loaded: LoadedModel, layer: int, *, max_batch_tokens: int = 8192, pack_tokens: int | None = 256
    ) -> None:
        n = loaded.num_layers
        if not -n - 1 <= layer <= n:
            raise InvalidInputError(f"layer must be in [{-n - 1}, {n}] for a {n}-layer model, got {layer}")
        self.loaded = loaded
        self.layer = layer % (n + 1)
        self.max_batch_tokens = max_batch_tokens
        self.pack_tokens = pack_tokens
        self._packing: bool | None = None  # whether the model honours packed position ids (checked once)
        tok = loaded.tokenizer
        start = tok.bos_token_id if tok.bos_token_id is not None else tok.eos_token_id
        if start is None:
            raise InvalidInputError("the tokenizer has neither a BOS nor an EOS token to start a sentence with")
        self.start_id = int(start)
        self.pad_id = int(tok.pad_token_id if tok.pad_token_id is not None else start)
        self._layers = _decoder_layers(loaded.model)
        # transformers 5.x names the key/value cache argument ``cache`` and warns on the
        # older ``past_key_values`` (to be removed); earlier versions know only the latter.
        forward_args = inspect.signature(loaded.model.forward).parameters
        self._cache_arg = "cache" if "cache" in forward_args else "past_key_values"
        # Forward passes are serialised: the early-exit hook is registered on the shared
        # model, so two concurrent passes could otherwise trip each other's hook.
        self._lock = threading.Lock()

    @property
    def cache_key(self) -> str:
        """Identifies what a datastore key means: the weights and the layer."""
        return f"{self.loaded.fingerprint}-layer{self.layer}"

    @property
    def max_length(self) -> int:
        return self.loaded.max_length

    # ------------------------------------------------------------------ tokenization

    def tokenize(self, text: str) -> TokenizedText:
        """Token ids and character offsets of ``text`` (no special tokens added)."""
        enc = self.loaded.tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
        ids = np.asarray(enc["input_ids"], dtype=np.int64)
        offsets = np.asarray(enc["offset_mapping"], dtype=np.int64).reshape(-1, 2)
        return TokenizedText(ids, offsets)

    def token_strings(self, ids: np.ndarray) -> list[str]:
        """Each id decoded on its own (a byte-level piece may decode to U+FFFD)."""
        tok = self.loaded.tokenizer
        return [tok.decode([int(i)]) for i in ids]

    def prompt_ids(self, query: str) -> np.ndarray:
        """Ids that precede the answer: the chat template's user turn with the query, or
        ``BOS + query + newline`` for a tokenizer without a chat template."""
        tok = self.loaded.tokenizer
        if getattr(tok, "chat_template", None):
            text = tok.apply_chat_template([{"role": "user", "content": query}], add_generation_prompt=True, tokenize=False)
            return np.asarray(tok(text, add_special_tokens=False)["input_ids"], dtype=np.int64)
        ids = tok((query + "\n") if query else "", add_special_tokens=False)["input_ids"]
        return np.asarray([self.start_id, *ids], dtype=np.int64)

    # ------------------------------------------------------------------ forward passes

    def _states(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None,
        cache: Any = None,
        position_ids: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """(batch, seq, hidden) states at ``self.layer``. With ``cache`` (a transformers
        ``Cache``), ``input_ids`` continue the sequence it holds and it is extended in place.
        With ``position_ids`` that restart at 0 inside a row (and no mask), the row holds
        several sequences that attend only within themselves (packed)."""
        with self._lock, torch.inference_mode():
            return self._states_unlocked(input_ids, attention_mask, cache, position_ids)

    def _states_unlocked(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None,
        cache: Any = None,
        position_ids: torch.Tensor | None = None,
    ) -> torch.Tensor:
        model = self.loaded.model
        n = self.loaded.num_layers
        kv: dict[str, Any] = {self._cache_arg: cache, "use_cache": True} if cache is not None else {"use_cache": False}
        if position_ids is not None:
            kv["position_ids"] = position_ids
        if self._layers is None or self.layer in (0, n):
            out = model(input_ids=input_ids, attention_mask=attention_mask, output_hidden_states=True, **kv)
            return out.hidden_states[self.layer]
        captured: list[torch.Tensor] = []
        # The hook sits on a model the caller may share (e.g. with a generator in another
        # thread): it acts only on this thread's forward pass.
        owner = threading.get_ident()

        def hook(_module, _inputs, output):
            if threading.get_ident() != owner:
                return None
            captured.append(output[0] if isinstance(output, tuple) else output)
            raise _StopForward

        # Stopping early also leaves the blocks above `layer` out of a cache: their keys and
        # values are never needed, since no state above `layer` is ever read.
        handle = self._layers[self.layer - 1].register_forward_hook(hook)
        try:
            model(input_ids=input_ids, attention_mask=attention_mask, **kv)
        except _StopForward:
            pass
        finally:
            handle.remove()
        return captured[0]

    def encode_before(
        self, token_lists: list[np.ndarray], on_tokens: Callable[[int], object] | None = None
    ) -> list[np.ndarray]:
        """For each token list, the states before each of its tokens: ``(n_i, hidden)`` float32.

        ``on_tokens(n)`` is called after each forward pass with the number of tokens it
        encoded (for a progress bar).

        Each sequence is encoded as ``[BOS] + tokens[:-1]``, on its own: no token attends to
        another sequence. Sequences are packed several to a row of ``pack_tokens`` tokens
        with positions restarting at each one (transformers then masks attention to each
        sequence's own block): almost no compute is spent on padding (measured 1.6-2x
        faster than padded batches on sentence-sized texts). Models that do not honour packed positions (checked once, on two
        short sequences) get length-sorted, right-padded batches instead.
        """
        results: list[np.ndarray | None] = [None] * len(token_lists)
        limit = self.max_length
        todo: list[int] = []
        for i, tl in enumerate(token_lists):
            if len(tl) == 0:
                results[i] = np.zeros((0, self.loaded.hidden_size), dtype=np.float32)
            elif len(tl) > limit:
                raise TextTooLongError(f"a sequence of {len(tl)} tokens exceeds the model's context of {limit} tokens")
            else:
                todo.append(i)
        seqs = {i: np.concatenate([[self.start_id], token_lists[i][:-1]]).astype(np.int64) for i in todo}
        if todo and self.pack_tokens and self._packing_works():
            self._encode_packed(seqs, results, on_tokens)
        else:
            self._encode_padded(seqs, results, on_tokens)
        return [r for r in results]  # type: ignore[misc]

    def _encode_padded(
        self,
        seqs: dict[int, np.ndarray],
        results: list[np.ndarray | None],
        on_tokens: Callable[[int], object] | None = None,
    ) -> None:
        """Length-sorted, right-padded batches (right padding leaves a causal model's states
        at real positions unchanged)."""
        order = sorted(seqs, key=lambda i: len(seqs[i]))
        batch: list[int] = []

        def flush() -> None:
            if not batch:
                return
            width = max(len(seqs[i]) for i in batch)
            ids = torch.full((len(batch), width), self.pad_id, dtype=torch.long)
            mask = torch.zeros((len(batch), width), dtype=torch.long)
            for row, i in enumerate(batch):
                ids[row, : len(seqs[i])] = torch.from_numpy(seqs[i])
                mask[row, : len(seqs[i])] = 1
            device = self.loaded.model.device
            states = self._states(ids.to(device), mask.to(device)).float().cpu().numpy()
            for row, i in enumerate(batch):
                results[i] = states[row, : len(seqs[i])].copy()
            if on_tokens is not None:
                on_tokens(sum(len(seqs[i]) for i in batch))
            batch.clear()

        for i in order:
            if batch and (len(batch) + 1) * len(seqs[i]) > self.max_batch_tokens:
                flush()
            batch.append(i)
        flush()

    def _encode_packed(
        self,
        seqs: dict[int, np.ndarray],
        results: list[np.ndarray | None],
        on_tokens: Callable[[int], object] | None = None,
    ) -> None:
        """Sequences packed into rows (first fit, longest first); a sequence longer than
        ``pack_tokens`` gets a row of its own."""
        assert self.pack_tokens
        rows: list[list[int]] = []
        room: list[int] = []
        for i in sorted(seqs, key=lambda i: -len(seqs[i])):
            n = len(seqs[i])
            slot = next((r for r, free in enumerate(room) if free >= n), None)
            if slot is None:
                rows.append([i])
                room.append(max(self.pack_tokens, n) - n)
            else:
                rows[slot].append(i)
                room[slot] -= n
        # Rows were opened longest first, so a batch of consecutive rows has similar widths.
        # Eight rows a pass: measured as fast as bigger batches (docs/reports/performance.md).
        budget = min(self.max_batch_tokens, 8 * self.pack_tokens)
        batch: list[list[int]] = []
        width = 0
        for row in rows:
            w = sum(len(seqs[i]) for i in row)
            if batch and (len(batch) + 1) * max(width, w) > budget:
                self._run_packed(batch, seqs, results, on_tokens)
                batch, width = [], 0
            batch.append(row)
            width = max(width, w)
        if batch:
            self._run_packed(batch, seqs, results, on_tokens)

    def _run_packed(
        self,
        batch: list[list[int]],
        seqs: dict[int, np.ndarray],
        results: list[np.ndarray | None],
        on_tokens: Callable[[int], object] | None = None,
    ) -> None:
        width = max(sum(len(seqs[i]) for i in row) for row in batch)
        ids = np.full((len(batch), width), self.pad_id, dtype=np.int64)
        pos = np.zeros((len(batch), width), dtype=np.int64)
        for r, row in enumerate(batch):
            a = 0
            for i in row:
                n = len(seqs[i])
                ids[r, a : a + n] = seqs[i]
                pos[r, a : a + n] = np.arange(n)
                a += n
            pos[r, a:] = np.arange(width - a)  # trailing padding: one more sequence of its own
        device = self.loaded.model.device
        states = self._states(torch.from_numpy(ids).to(device), None, position_ids=torch.from_numpy(pos).to(device))
        states = states.float().cpu().numpy()
        for r, row in enumerate(batch):
            a = 0
            for i in row:
                n = len(seqs[i])
                results[i] = states[r, a : a + n].copy()
                a += n
        if on_tokens is not None:
            on_tokens(sum(len(seqs[i]) for row in batch for i in row))

    def _packing_works(self) -> bool:
        """Whether packed rows give each sequence the states it has alone (they do when the
        model builds its attention mask from restarting position ids, as transformers'
        standard decoders do; a model that ignores them would let sequences see each other)."""
        if self._packing is None:
            probe = {0: np.array([self.start_id, 11, 12, 13, 14], np.int64), 1: np.array([self.start_id, 21, 22], np.int64)}
            packed: list[np.ndarray | None] = [None, None]
            alone: list[np.ndarray | None] = [None, None]
            try:
                self._run_packed([[0, 1]], probe, packed)
                for i in probe:
                    self._encode_padded({i: probe[i]}, alone)
                scale = max(float(np.abs(a).max()) for a in alone if a is not None) or 1.0
                err = max(float(np.abs(p - a).max()) for p, a in zip(packed, alone) if p is not None and a is not None)
                self._packing = err <= 1e-3 * scale
            except Exception:  # a model whose forward rejects position_ids without a mask
                self._packing = False
        return self._packing

    def _check_response_length(self, prompt: np.ndarray, n_response: int) -> None:
        n_total = len(prompt) + n_response
        if n_total > self.max_length:
            raise TextTooLongError(
                f"query + answer take {n_total} tokens ({len(prompt)} + {n_response}), over the model's "
                f"context of {self.max_length} tokens; shorten the answer or the query"
            )

    def encode_response(self, query: str, response: TokenizedText) -> np.ndarray:
        """States that predict each response token given the query and the answer so far
        (the paper's ``h(x̂_t)``): ``(n_response_tokens, hidden)`` float32."""
        return self.encode_response_and_prompt(query, response)[0]

    def encode_response_and_prompt(self, query: str, response: TokenizedText) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`encode_response`'s states, and the same pass's states at each prompt
        token (``(len(prompt_ids(query)), hidden)``: row ``i`` predicts prompt token
        ``i + 1``, the first answer token for the last row), from which
        :meth:`question_states` takes the question's."""
        prompt = self.prompt_ids(query)
        self._check_response_length(prompt, len(response.ids))
        seq = np.concatenate([prompt, response.ids[:-1]]) if len(response.ids) else prompt
        device = self.loaded.model.device
        ids = torch.as_tensor(seq, dtype=torch.long, device=device)[None, :]
        states = self._states(ids, torch.ones_like(ids))[0].float().cpu().numpy()
        # The answer's and the prompt's rows of the pass's own output (views, no copy).
        return states[len(prompt) - 1 :], states[: len(prompt)]

    def question_tokens(self, query: str) -> tuple[TokenizedText, np.ndarray] | None:
        """The question's tokens inside the prompt (:meth:`prompt_ids`), with offsets into
        ``query``, and each one's position in the prompt; None when the prompt does not hold
        the question verbatim as whole tokens (a template that rewrites it)."""
        tok = self.loaded.tokenizer
        if not query:
            return None
        if getattr(tok, "chat_template", None):
            def render(content: str) -> str:
                return tok.apply_chat_template([{"role": "user", "content": content}], add_generation_prompt=True, tokenize=False)

            text = render(query)
            # The user turn's content starts where the prompt with an empty question departs
            # from it: a system message before it may hold the question's words ("You ...").
            start = text.find(query, len(os.path.commonprefix([text, render("")])))
            lead = 0
        else:
            text = query + "\n"
            start = 0
            lead = 1  # the start token prompt_ids puts first
        if start < 0:
            return None
        enc = tok(text, add_special_tokens=False, return_offsets_mapping=True)
        offsets = np.asarray(enc["offset_mapping"], dtype=np.int64).reshape(-1, 2)
        inside = (offsets[:, 0] >= start) & (offsets[:, 1] <= start + len(query)) & (offsets[:, 1] > offsets[:, 0])
        positions = np.flatnonzero(inside)
        ids = np.asarray(enc["input_ids"], dtype=np.int64)
        covered = offsets[positions]
        # Whole tokens covering the question from its first to its last character.
        if not len(positions) or covered[0, 0] != start or covered[-1, 1] != start + len(query):
            return None
        return TokenizedText(ids[positions], covered - start), positions + lead

    def question_states(self, query: str, prompt_states: np.ndarray | None) -> tuple[TokenizedText, np.ndarray] | None:
        """The question's tokens (:meth:`question_tokens`) and the state before each, taken
        from ``prompt_states`` (:meth:`encode_response_and_prompt`'s, or a
        :class:`ResponseEncoding`'s): the answer's own pass has encoded the question already.
        None when the prompt does not hold the question as whole tokens, or no states are
        given."""
        found = None if prompt_states is None else self.question_tokens(query)
        if found is None:
            return None
        tokens, positions = found
        return tokens, prompt_states[positions - 1]

    def response_encoding(self, query: str) -> ResponseEncoding:
        """An encoding of an answer to ``query`` that grows as the answer streams in."""
        return ResponseEncoding(self, query)


class ResponseEncoding:
    """The states of :meth:`CausalLMEncoder.encode_response` for an answer that arrives
    in pieces: the query and the tokens seen so far are encoded once and kept as the
    model's past keys/values, so each call encodes only the new tokens.

    The states equal those of one pass over the whole answer up to float rounding (the
    same attention computed in pieces). If the answer's tokenization changes inside
    what was already encoded (a later piece merging with earlier text into another
    token), the encoding starts over from the query, so it is never stale.

    Not for concurrent use: one instance follows one answer.

    Examples
    --------
    >>> enc = encoder.response_encoding("Where is the Eiffel Tower?")  # doctest: +SKIP
    >>> enc.states(encoder.tokenize("It is in Paris.").ids).shape  # doctest: +SKIP
    (5, 576)
    """

    def __init__(self, encoder: CausalLMEncoder, query: str) -> None:
        self.encoder = encoder
        self.prompt = encoder.prompt_ids(query)
        self._fed = np.zeros(0, dtype=np.int64)  # answer tokens already in the cache
        self._pieces: list[np.ndarray] = []  # states before answer tokens 0..len(_fed)
        self._cache: Any = None
        self.restarts = 0  # times the tokenization changed under us (for tests, stats)
        # The states at the prompt's tokens (CausalLMEncoder.question_states reads the
        # question's there), known after the first call of states().
        self.prompt_states: np.ndarray | None = None

    @property
    def n_encoded(self) -> int:
        """Number of answer tokens whose states are known."""
        return sum(len(p) for p in self._pieces)

    def _run(self, ids: np.ndarray) -> np.ndarray:
        device = self.encoder.loaded.model.device
        tensor = torch.as_tensor(ids, dtype=torch.long)[None, :].to(device)
        return self.encoder._states(tensor, None, self._cache)[0].float().cpu().numpy()

    def states(self, ids: np.ndarray) -> np.ndarray:
        """States before each of the answer tokens ``ids`` (all of them, from the first):
        ``(len(ids), hidden)`` float32.

        Raises
        ------
        TextTooLongError
            Query and answer no longer fit the model's context.
        """
        from transformers import DynamicCache

        ids = np.asarray(ids, dtype=np.int64)
        self.encoder._check_response_length(self.prompt, len(ids))
        need = ids[:-1]  # the state before token j is the output at token j - 1
        common = min(len(self._fed), len(need))
        if not np.array_equal(self._fed[:common], need[:common]):
            self._cache, self._fed, self._pieces = None, self._fed[:0], []
            self.restarts += 1
        if self._cache is None:
            self._cache = DynamicCache(config=self.encoder.loaded.model.config)
            prompt_states = self._run(self.prompt)
            self.prompt_states = prompt_states.copy()
            self._pieces = [prompt_states[-1:].copy()]
        new = need[len(self._fed) :]
        if len(new):
            self._pieces.append(self._run(new).copy())
            self._fed = np.concatenate([self._fed, new])
        if len(ids) == 0:
            return np.zeros((0, self.encoder.loaded.hidden_size), dtype=np.float32)
        return np.concatenate(self._pieces)[: len(ids)]
