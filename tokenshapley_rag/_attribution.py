"""TokenShapley: attribute every keyword of an answer to the source sentences it came from.

The class is a facade: it validates the parameters and the inputs, loads the encoder, and
runs the steps of :class:`~tokenshapley_rag._pipeline.Pipeline` (datastore, token game,
citation assembly), which :class:`~tokenshapley_rag._stream.AttributionStream` runs too.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from tokenshapley_rag._datastore import Datastore
from tokenshapley_rag._sentence_cache import SentenceCache
from tokenshapley_rag._defaults import DEFAULT_APPROXIMATE_ABOVE, DEFAULT_LAYER, DEFAULT_QUESTION_EMBEDDER
from tokenshapley_rag._encoder import CausalLMEncoder
from tokenshapley_rag._limits import (
    DEFAULT_MAX_CONTEXT_CHARS,
    DEFAULT_MAX_SOURCE_CHARS,
    check_cancel_event,
    check_context_size,
    check_limit,
    checkpoint,
)
from tokenshapley_rag._models import default_cache_dir, load_causal_lm
from tokenshapley_rag._params import NONE, Boolean, CallableObject, Interval, Options, validate_params
from tokenshapley_rag._question_documents import (
    QUESTION_EMBEDDERS,
    MiniLMEmbedder,
    embedder_name,
    resolve_question_embedder,
)
from tokenshapley_rag._pipeline import Pipeline
from tokenshapley_rag._result import AttributionResult
from tokenshapley_rag._sources import coerce_sources
from tokenshapley_rag._text import check_text
from tokenshapley_rag._timing import step
from tokenshapley_rag._token_game import CANDIDATE_MODES, MATCH_MODES
from tokenshapley_rag._sentence_game import EVIDENCE_RULES, evidence_ranking, sentence_source_scores
from tokenshapley_rag._types import AnswerSentenceSources, EvidenceSentence, SentenceSource, Source, display_name, page_of
from tokenshapley_rag.errors import (
    EmptyTextError,
    InvalidInputError,
    InvalidInputTypeError,
)

if TYPE_CHECKING:
    from tokenshapley_rag._stream import AttributionStream

__all__ = ["TokenShapley"]

_LOADING_PARAMETERS = frozenset(("self", "model", "tokenizer", "layer", "device", "dtype", "cache_dir"))


class TokenShapley:
    """Keyword-level citations with TokenShapley (exact KNN-Shapley over a token datastore).

    For every context token the datastore holds the encoder's hidden state before that
    token, with the prefix starting at the token's own sentence (so keys are cached per
    sentence), and the token itself. Each answer token is encoded teacher-forced after the
    query (the generator can be any model, an API model included); its ``m`` nearest
    datastore entries play the game ``U(S) = 1[sum of the top-k votes in S >= 0]`` with vote
    ``+s`` for an entry carrying the same token and ``-s`` otherwise, ``s`` an RBF
    similarity. Their exact Shapley values are summed per sentence, per keyword and per
    source.

    Parameters
    ----------
    model : CausalLMEncoder, str, path, transformers.PreTrainedModel or None, default=None
        The encoder: a built :class:`~tokenshapley_rag._encoder.CausalLMEncoder` (injected
        as it is: ``tokenizer``, ``layer``, ``device`` and ``dtype`` stay at their defaults;
        :meth:`from_pretrained` builds one), or what to load: None for the embedded
        SmolLM2-135M-Instruct, a local path / cached hub name, ``"gemma-3-270m"``, or a
        loaded causal LM (then pass ``tokenizer``).
    tokenizer : optional
        Tokenizer for a loaded ``model`` (must be a fast tokenizer).
    layer : int, default=8
        Which hidden state (0 = embeddings) keys and queries come from.
    k : int, default=1
        Neighbours that vote (the paper's K).
    m : int, default=10
        Candidates per answer token whose Shapley values are computed (the paper's M).
    gamma : float or "auto", default="auto"
        RBF width in ``s = exp(-gamma * d^2)``. "auto" uses ``1 / median(d^2)`` over each
        answer token's ``m`` candidates (with ``k=1`` only the nearest candidate's vote
        counts, so gamma has no effect). Similarities are computed as
        ``exp(-gamma * (d^2 - d^2_nearest))``: the vote game is unchanged by a common
        positive factor, and the nearest entry gets 1, so they cannot all underflow to 0.
    match : {"word", "word_or_token", "normalized", "exact"}, default="word"
        When a datastore token "equals" an answer token. "exact": same token id.
        "normalized": same decoded text after Unicode NFKC, case folding and stripping
        whitespace, so " Paris" (mid-sentence) matches "Paris" (sentence-initial).
        "word": same normalized text and the same word of the text, so the digits of 2010
        are no evidence for 2011. "word_or_token": "word" for answer words that occur in
        the sources, "normalized" for the others (a paraphrased or inflected word still
        finds its pieces).
    candidates : {"nearest", "mixed"}, default="mixed"
        "nearest": the ``m`` nearest entries (the paper). "mixed": the ``m // 2`` nearest
        entries carrying the answer token plus the nearest others, so evidence that carries
        the token is always among the players when the context has it.
    context_weight, context_scale : float, default=1.0 and 16.0
        The answer-context game: a keyword's score also counts the other tokens of its
        answer sentence, weighted ``context_weight * exp(-d / context_scale)`` (``d`` in
        tokens), for the sources that hold the keyword (:func:`context_scores`). 0 gives
        the paper's plain sum over the keyword's tokens.
    verbatim : bool, default=True
        When some sources hold a keyword word for word (the same token classes in a row,
        or its text, case-insensitively, as whole words: :class:`SentenceTexts`), only
        they are its candidate sources; otherwise the sources holding the most of its
        words are (a word is held when a sentence carries one of its tokens). Shared words
        alone then cannot outvote the source the phrase is from.
    support_threshold : float or None, default=None
        None (the default): the match rule and the status rule decide ``supported``
        (docs/method.md §8). A number demands more: a keyword found supported becomes
        ``unsupported`` unless its best source sentence's score, divided by its number of
        tokens, exceeds this (``KeywordCitation.support``).
    device : str, default="cpu"
        Where the encoder runs: ``"cpu"``, ``"cuda"``, ``"cuda:1"``, ``"mps"`` (checked before
        the model loads: an unknown or absent device is an ``InvalidInputError``). On CUDA a
        context of more than 2,048 tokens is also searched there, exactly: the same players
        and Shapley values as the host's search, bit for bit (docs/method.md §3). The
        Shapley values and the support rule run on the CPU.
    dtype : {"float32", "bfloat16", "float16"} or torch.dtype, default="float32"
        Weights and activations of the encoder. ``"bfloat16"`` measured the same span
        accuracy on QuoteSum (docs/reports/performance.md); its speed depends on the CPU's
        kernels: 2.6x faster than float32 on one 2-core AMD EPYC, ~0.7x the float32
        speed on an Intel Xeon with avx512_bf16 (both measured), so time it on yours.
        Keys are cached per dtype (the fingerprint includes it).
    cache_dir : path or None
        Where converted models and sentence keys are cached; defaults to
        ``$TOKENSHAPLEY_CACHE`` or ``~/.cache/tokenshapley-rag``.
    use_disk_cache : bool, default=True
        Keep sentence keys on disk (otherwise only in memory).
    max_sentence_tokens : int or None, default=None
        Longer source sentences are cut into consecutive pieces of at most this many
        tokens, each treated as a sentence; None means the model's context length.
    max_source_chars : int or None, default=50_000
        :meth:`attribute` and :meth:`stream` refuse a source longer than this (in
        characters) with :class:`~tokenshapley_rag.errors.TextTooLongError`, before any
        work. None: no limit.
    approximate_above : int or None, default=None
        Datastores of more context tokens than this search each answer token's
        candidates approximately: only the entries of the 32 lists (of 256 k-means
        centroids of the encoder's keys, trained once per model and layer and shipped
        with the package) nearest to its query, plus every entry of its match class, so
        its matched players and the sentences that carry it stay exact. The players found
        are measured and ordered exactly, so their Shapley values are exact; only which
        far entries are players can differ. At or below the threshold, or for an encoder
        without a shipped quantiser, the search is exact. Measured agreement with exact
        search and speed: docs/reports/performance.md. None (the default): always exact,
        which measured faster than the approximate search up to 128k context tokens on a
        2-core CPU. With the encoder on a CUDA device, contexts over 2,048 tokens are
        searched exactly there instead (``device``), whatever this is.
    question_embedder : "all-MiniLM-L6-v2", callable or None, default="all-MiniLM-L6-v2"
        A sentence embedder for bare answers ("Wilhelm Conrad Röntgen") to a question that
        names nothing a source holds ("who got the first nobel prize in physics"): the
        answer may then only be supported by the documents that state the question, those
        whose sentence nearest the question is within 0.2 (cosine) of the nearest of all
        (docs/method.md §8). ``"all-MiniLM-L6-v2"`` (the default) is the bundled model,
        loaded on the first answer that needs it; a callable takes a list of texts and
        returns one row per text (the 0.2 margin was chosen for MiniLM's cosine). None:
        the question's token game alone judges such answers. On NQ dev the embedder
        flagged 40 of 45 names swapped in from another passage, against 14 without it,
        and no correct name (docs/reports/support.md).
    max_context_chars : int or None, default=120_000
        The same for all sources together. The defaults bound a cold attribution to
        about 90 CPU-seconds and 0.4 GB above the loaded model on 2 CPU cores
        (docs/reports/performance.md, "Bounded work") and admit every context of the evaluation
        sets; raise them for longer contexts (time and memory grow linearly), or pass
        None to disable them. :meth:`prepare` and :meth:`build_datastore` are not limited.

    Notes
    -----
    ``KeywordCitation.support`` is ``max_sentence(sum of the keyword tokens' Shapley values
    from that sentence) / n_tokens``: how far some single source sentence holds, on balance,
    evidence that votes for the keyword's tokens. 1 means every token's game is won by that
    sentence's entries; values slightly above 1 occur when other sentences' entries have
    negative values; 0 means no entry near any of the keyword's tokens carries it.

    One instance may be shared by several threads (framework callbacks, ``batch``): forward
    passes are serialised by the encoder, and the token-class table and sentence cache are
    guarded by locks.

    Examples
    --------
    >>> from tokenshapley_rag import TokenShapley
    >>> ts = TokenShapley()  # doctest: +SKIP
    >>> res = ts.attribute(query="Where is the Eiffel Tower?",
    ...                    sources=["The Eiffel Tower is in Paris.", "Big Ben is in London."],
    ...                    response="It is in Paris.")  # doctest: +SKIP
    >>> [(c.text, c.best.source_id) for c in res.citations]  # doctest: +SKIP
    [('Paris', '0')]
    """

    #: The method's parameters and what each may be (checked by :func:`validate_params`
    #: before anything loads; the size limits by :func:`check_limit`).
    _parameter_constraints: ClassVar[dict[str, list[Any]]] = {
        "k": [Interval(int, 1, None)],
        "m": [Interval(int, 1, None)],
        "gamma": [Options(("auto",)), Interval(float, 0, None, closed="neither")],
        "match": [Options(MATCH_MODES)],
        "candidates": [Options(CANDIDATE_MODES)],
        "context_weight": [Interval(float, 0, None)],
        "context_scale": [Interval(float, 0, None, closed="neither")],  # a distance in tokens
        "verbatim": [Boolean()],
        "support_threshold": [NONE, Interval(float, None, None)],
        "use_disk_cache": [Boolean()],
        "max_sentence_tokens": [NONE, Interval(int, 1, None)],
        "approximate_above": [NONE, Interval(int, 0, None)],
        "question_embedder": [NONE, Options(QUESTION_EMBEDDERS), CallableObject()],
    }

    def __init__(
        self,
        model: Any = None,
        tokenizer: Any = None,
        *,
        layer: int = DEFAULT_LAYER,
        k: int = 1,
        m: int = 10,
        gamma: float | str = "auto",
        match: str = "word",
        candidates: str = "mixed",
        context_weight: float = 1.0,
        context_scale: float = 16.0,
        verbatim: bool = True,
        support_threshold: float | None = None,
        device: str = "cpu",
        dtype: str | Any = "float32",
        cache_dir: str | os.PathLike | None = None,
        use_disk_cache: bool = True,
        max_sentence_tokens: int | None = None,
        max_source_chars: int | None = DEFAULT_MAX_SOURCE_CHARS,
        max_context_chars: int | None = DEFAULT_MAX_CONTEXT_CHARS,
        approximate_above: int | None = DEFAULT_APPROXIMATE_ABOVE,
        question_embedder: str | Callable[[Sequence[str]], np.ndarray] | None = DEFAULT_QUESTION_EMBEDDER,
    ) -> None:
        validate_params(self._parameter_constraints, {
            "approximate_above": approximate_above, "question_embedder": question_embedder,
            "k": k, "m": m, "gamma": gamma, "match": match, "candidates": candidates,
            "context_weight": context_weight, "context_scale": context_scale, "verbatim": verbatim,
            "support_threshold": support_threshold, "use_disk_cache": use_disk_cache,
            "max_sentence_tokens": max_sentence_tokens,
        })
        self.k, self.m, self.gamma = k, m, gamma
        self.match, self.candidates, self.verbatim = match, candidates, verbatim
        self.context_weight, self.context_scale = float(context_weight), float(context_scale)
        self.support_threshold = None if support_threshold is None else float(support_threshold)
        self.max_source_chars = check_limit(max_source_chars, "max_source_chars")
        self.max_context_chars = check_limit(max_context_chars, "max_context_chars")
        cache_root = default_cache_dir() if cache_dir is None else cache_dir
        if isinstance(model, CausalLMEncoder):
            given = {"tokenizer": tokenizer is not None, "layer": layer != DEFAULT_LAYER, "device": device != "cpu",
                     "dtype": dtype != "float32"}
            if any(given.values()):
                raise InvalidInputError(
                    f"model is a built encoder (its model, layer {model.layer}, device and dtype are set); "
                    f"got {[name for name, set_ in given.items() if set_]} too: pass them to from_pretrained() instead"
                )
            self.encoder = model
        else:
            loaded = load_causal_lm(model, tokenizer, cache_dir=cache_root, device=device, dtype=_torch_dtype(dtype))
            self.encoder = CausalLMEncoder(loaded, layer)
        self.loaded = self.encoder.loaded
        # The model's dtype, read once (``model.dtype`` walks the parameters on every call).
        self._dtype_name = str(self.loaded.model.dtype).removeprefix("torch.")
        self.cache = SentenceCache(
            os.path.join(cache_root, "datastore") if use_disk_cache else None, width=self.loaded.hidden_size
        )
        limit = self.encoder.max_length - 1  # one position goes to the BOS that starts a sentence
        self.max_sentence_tokens = min(max_sentence_tokens or limit, limit)
        self.pipeline = Pipeline(
            self.encoder, self.cache, k=k, m=m, gamma=gamma, match=match, candidates=candidates,
            context_weight=self.context_weight, context_scale=self.context_scale, verbatim=verbatim,
            support_threshold=self.support_threshold, max_sentence_tokens=self.max_sentence_tokens,
            approximate_above=approximate_above, question_embedder=resolve_question_embedder(question_embedder),
        )
        self.approximate_above = approximate_above
        # rank_evidence's sentence embedder: the question embedder, else MiniLM on first use
        self._evidence_embedder: Any = None

    @classmethod
    def from_pretrained(
        cls,
        model: Any = None,
        tokenizer: Any = None,
        *,
        layer: int = DEFAULT_LAYER,
        device: str = "cpu",
        dtype: str | Any = "float32",
        cache_dir: str | os.PathLike | None = None,
        **params: Any,
    ) -> TokenShapley:
        """Load an encoder model and build a :class:`TokenShapley` over it.

        The loading options come first (which model, its layer, device, dtype and cache);
        ``params`` are the method's parameters (``k``, ``m``, ``gamma``, ``match``,
        ``candidates``, ``context_weight``, ``context_scale``, ``verbatim``,
        ``support_threshold``, ``use_disk_cache``, ``max_sentence_tokens``,
        ``max_source_chars``, ``max_context_chars``, ``approximate_above``,
        ``question_embedder``), validated as the constructor does.

        Parameters
        ----------
        model : str, path, PreTrainedModel or None
            An alias (``"smollm2-135m-instruct"``, the default when None, or
            ``"gemma-3-270m"``), a local checkpoint folder or ``.gguf`` file, a hub id in
            the local cache, or a loaded causal LM (then pass its ``tokenizer``).
        tokenizer : tokenizer or None
            The fast tokenizer of a loaded ``model``.
        layer, device, dtype, cache_dir
            As in :class:`TokenShapley`.
        **params
            The method's parameters.

        Raises
        ------
        InvalidInputTypeError
            A keyword that is neither a loading option nor a method parameter.

        Examples
        --------
        >>> from tokenshapley_rag import TokenShapley
        >>> ts = TokenShapley.from_pretrained("smollm2-135m-instruct", layer=8, m=10)  # doctest: +SKIP
        >>> ts.config["m"]  # doctest: +SKIP
        10
        """
        # The method's parameters are the constructor's keywords that are not loading options.
        method = [p for p in inspect.signature(cls.__init__).parameters if p not in _LOADING_PARAMETERS]
        unknown = sorted(set(params) - set(method))
        if unknown:
            raise InvalidInputTypeError(
                f"from_pretrained() got unexpected keyword(s) {unknown}; expected loading options "
                f"(layer, device, dtype, cache_dir) or method parameters {method}"
            )
        validate_params(cls._parameter_constraints, params)  # before the model loads
        cache_root = default_cache_dir() if cache_dir is None else cache_dir
        loaded = load_causal_lm(model, tokenizer, cache_dir=cache_root, device=device, dtype=_torch_dtype(dtype))
        return cls(CausalLMEncoder(loaded, layer), cache_dir=cache_dir, **params)

    # ------------------------------------------------------------------ configuration

    @property
    def config(self) -> dict[str, Any]:
        return {
            "model": self.loaded.name,
            "fingerprint": self.loaded.fingerprint,
            "dtype": self._dtype_name,
            "layer": self.encoder.layer,
            "k": self.k,
            "m": self.m,
            "gamma": self.gamma,
            "match": self.match,
            "candidates": self.candidates,
            "context_weight": self.context_weight,
            "context_scale": self.context_scale,
            "verbatim": self.verbatim,
            "support_threshold": self.support_threshold,
            "max_sentence_tokens": self.max_sentence_tokens,
            "max_source_chars": self.max_source_chars,
            "max_context_chars": self.max_context_chars,
            "approximate_above": self.approximate_above,
            "question_embedder": embedder_name(self.pipeline.question_embedder),
        }

    # ------------------------------------------------------------------ datastore

    def build_datastore(self, sources: Sequence[Any], *, progress: bool = False, cancel: Any = None) -> Datastore:
        """Encode (or load from cache) the keys of every sentence of ``sources``; with
        ``progress``, a progress bar of the tokens to encode on stderr. ``cancel`` (a
        :class:`threading.Event`) is checked after each forward pass of the encoder
        (:class:`~tokenshapley_rag.errors.AttributionCancelledError` when set). No size
        limit applies here: this also encodes whole corpora ahead of time."""
        return self.pipeline.build_datastore(coerce_sources(sources), progress=progress, cancel=cancel)

    def prepare(self, sources: Sequence[Any], *, progress: bool = False) -> None:
        """Encode and cache the sources' sentence keys ahead of :meth:`attribute`
        (``progress``: show a progress bar of the tokens to encode)."""
        self.build_datastore(sources, progress=progress)

    def check_context(self, sources: Sequence[Any]) -> list[Source]:
        """``sources`` as validated :class:`Source` objects, or the error :meth:`attribute`
        would raise for them, without encoding anything (a server can refuse a request
        before it takes a worker).

        Raises
        ------
        TextTooLongError
            A source is over ``max_source_chars``, or all of them over ``max_context_chars``.
        InvalidInputTypeError, EmptyTextError, DuplicateSourceIdError, InvalidTextError
            As :meth:`attribute`.
        """
        srcs = coerce_sources(sources)
        check_context_size([s.text for s in srcs], max_source_chars=self.max_source_chars,
                           max_context_chars=self.max_context_chars, ids=[s.id for s in srcs])
        return srcs

    # ------------------------------------------------------------------ attribution

    def attribute(
        self, query: str = "", sources: Sequence[Any] = (), response: str = "", *, cancel: Any = None
    ) -> AttributionResult:
        """Attribute every keyword of ``response`` to the sentences of ``sources``.

        Parameters
        ----------
        query : str
            The user's question ("" when there is none).
        sources : list of str, Source, mapping or object with id/text
            The retrieved chunks the answer was generated from.
        response : str
            The answer, from any generator.
        cancel : threading.Event, optional
            Checked at each checkpoint (after each forward pass over the sources, and
            between the steps below): once set, the call stops there with
            :class:`~tokenshapley_rag.errors.AttributionCancelledError`.

        Returns
        -------
        AttributionResult

        Raises
        ------
        TextTooLongError
            A source over ``max_source_chars``, the sources over ``max_context_chars``
            (checked before any work), or query + answer over the model's context.
        """
        check_text(query, "query")
        check_text(response, "response")
        check_cancel_event(cancel)
        if not response.strip():
            raise EmptyTextError("response is empty or only whitespace: there is nothing to attribute")
        srcs = self.check_context(sources)
        resp_tok = self.encoder.tokenize(response)
        # Query + answer over the model's context: refused before the sources are encoded.
        self.encoder._check_response_length(self.encoder.prompt_ids(query), len(resp_tok.ids))
        checkpoint(cancel, "starting")
        store = self.pipeline.datastore_for(srcs, cancel=cancel)
        checkpoint(cancel, "encoding the answer")
        with step("encode_answer"):
            queries, prompt_states = self.encoder.encode_response_and_prompt(query, resp_tok)
        checkpoint(cancel, "scoring the answer")
        question_game = self.pipeline.question_game_for(
            store, query, lambda: self.encoder.question_states(query, prompt_states)
        )
        return self.pipeline.attribute(query, response, srcs, store, resp_tok, queries, self.config, question_game)

    def rank_evidence(
        self, result: AttributionResult, *, rule: str = "question-sentence-game", top_k: int | None = None
    ) -> list[EvidenceSentence]:
        """The source sentences of ``result`` ranked as evidence for its answer, best first.

        ``attribute()`` ranks nothing beyond ``SentenceScore.keyword_score``: what the
        answer's keywords cite from each sentence. Where the answer paraphrases its sources,
        or is a bare value whose claim only its question states ("Taylor Swift."), few
        keywords cite anything, and the ranking rule adds the sentence game: source
        sentences keyed by a sentence embedding, one exact KNN-Shapley vote per content word
        of each answer sentence (docs/method.md §9), then the best score of each sentence's
        source (evidence comes as passages).

        Parameters
        ----------
        result : AttributionResult
            What :meth:`attribute` (or a stream) returned; its query, answer and sentence
            scores are read.
        rule : {"question-sentence-game", "sentence-game", "keyword"}, default="question-sentence-game"
            ``"keyword"``: ``keyword_score`` alone (nothing is embedded).
            ``"sentence-game"``: ``keyword_score + 4 × game``, plus the source's best.
            ``"question-sentence-game"``: the game of the claim each answer sentence makes
            with the question (weight 64); without a question it is ``"sentence-game"``.
            On the dev sets (docs/reports/paraphrase.md, halves not used to choose):
            NQ F1@5 0.496 for ``"question-sentence-game"`` against 0.280 for
            ``"keyword"`` and EmbSim's 0.421; WiCE (no question) 0.588 against 0.498.
        top_k : int or None, default=None
            Keep the first ``top_k`` sentences (None: all of them).

        Returns
        -------
        list of EvidenceSentence
            Every sentence of ``result.sentence_scores``, by descending ``score`` (ties in
            the result's order).

        The embeddings are those of the engine's ``question_embedder`` (the bundled
        all-MiniLM-L6-v2 by default, which chose the weights; with ``question_embedder=None``
        it is loaded here, once). Each sentence's row is remembered, so ranking another
        answer over the same sources embeds only the answer. Scores and citations of
        ``result`` are not changed.

        Examples
        --------
        >>> sources = ["The Eiffel Tower was completed in 1889. It stands on the Champ de Mars in Paris.",
        ...            "Big Ben is the nickname of the Great Bell of the clock in London.",
        ...            "Gustave Eiffel's company designed and built the tower for the 1889 World's Fair."]
        >>> res = ts.attribute("Which company designed the tower in Paris?", sources,
        ...                    "Gustave Eiffel's firm drew up the plans.")  # doctest: +SKIP
        >>> [(e.source_id, e.sentence_index) for e in ts.rank_evidence(res, top_k=2)]  # doctest: +SKIP
        [('2', 0), ('0', 1)]
        """
        if not isinstance(result, AttributionResult):
            raise InvalidInputTypeError(f"result must be an AttributionResult, got {type(result).__name__}")
        validate_params(
            {"rule": [Options(EVIDENCE_RULES)], "top_k": [NONE, Interval(int, 1, None)]}, {"rule": rule, "top_k": top_k}
        )
        rows = result.sentence_scores
        source_index = {s.id: i for i, s in enumerate(result.sources)}
        scores, game = evidence_ranking(
            [s.keyword_score for s in rows], [s.sentence for s in rows], [source_index[s.source_id] for s in rows],
            result.response, result.query, self._sentence_embedder if rule != "keyword" else None, rule=rule,
        )
        order = np.argsort(-scores, kind="stable")[:top_k]
        return [
            EvidenceSentence(
                source_id=rows[i].source_id, sentence_index=rows[i].sentence_index, sentence=rows[i].sentence,
                sentence_start=rows[i].sentence_start, sentence_end=rows[i].sentence_end, score=float(scores[i]),
                keyword_score=float(rows[i].keyword_score), game=float(game[i]),
            )
            for i in order.tolist()
        ]

    def sentence_sources(self, result: AttributionResult, *, top_k: int | None = None) -> list[AnswerSentenceSources]:
        """The sources of each sentence of ``result``'s answer, best first.

        A keyword's citation says which sentence holds *that* word. Which source an answer
        sentence comes from is another question where the sentence paraphrases its source:
        few of its words are cited, and the sources that hold them may be the wrong ones.
        Each answer sentence plays the sentence game (docs/method.md §9, §11): every source
        sentence is a player, keyed by a sentence embedding; each content word of the answer
        sentence is one exact KNN-Shapley vote (K = 1) among the sentences, nearest in meaning
        first, that hold it. A source's score is the sum of its sentences' values.

        On real LLM answer sentences cited by humans to one of their answer's 2-8 passages
        (``tokenshapley eval --dataset support-sentences``, docs/reports/paraphrase.md), the
        best source is the cited one for 91.8% of 110 sentences (order-controlled), against
        73.6% for the span scores, 82.1% for word overlap and 85.5% for EmbSim.

        Parameters
        ----------
        result : AttributionResult
            What :meth:`attribute` (or a stream) returned; its answer sentences
            (:attr:`AttributionResult.sentences`) and source sentences are read.
        top_k : int or None, default=None
            Keep the first ``top_k`` sources of each answer sentence (None: all of them).

        Returns
        -------
        list of AnswerSentenceSources
            One per answer sentence, in answer order; ``.best`` is the top source when its
            score is positive.

        The embeddings are those of :meth:`rank_evidence` (the engine's ``question_embedder``,
        the bundled all-MiniLM-L6-v2 by default), each sentence's row remembered. Scores and
        citations of ``result`` are not changed.

        Examples
        --------
        >>> sources = ["The Eiffel Tower was completed in 1889 for the World's Fair.",
        ...            "Gustave Eiffel's company designed and built the tower."]
        >>> res = ts.attribute("Tell me about the Eiffel Tower.", sources,
        ...                    "It was finished in 1889. Eiffel's firm drew it up and built it.")  # doctest: +SKIP
        >>> [s.best.source_id for s in ts.sentence_sources(res)]  # doctest: +SKIP
        ['0', '1']
        """
        if not isinstance(result, AttributionResult):
            raise InvalidInputTypeError(f"result must be an AttributionResult, got {type(result).__name__}")
        validate_params({"top_k": [NONE, Interval(int, 1, None)]}, {"top_k": top_k})
        rows = result.sentence_scores
        if not rows or not result.sentences:  # no source sentence (nothing retrieved): nothing to embed or rank
            return [AnswerSentenceSources(v.index, v.start, v.end, v.text, ()) for v in result.sentences]
        embed = self._sentence_embedder
        source_index = {s.id: i for i, s in enumerate(result.sources)}
        texts = [s.sentence for s in rows]
        answers = [v.text for v in result.sentences]
        all_scores, all_values = sentence_source_scores(
            answers, embed(answers), texts, embed(texts),
            [source_index[s.source_id] for s in rows], len(result.sources),
        )
        out = []
        for verdict, scores, values in zip(result.sentences, all_scores, all_values):
            best_of: dict[str, int] = {}
            for j, s in enumerate(rows):  # the first sentence of the highest value in each source
                if s.source_id not in best_of or values[j] > values[best_of[s.source_id]]:
                    best_of[s.source_id] = j
            # A source with no sentence (nothing to cite) is not ranked.
            order = [i for i in np.argsort(-scores, kind="stable").tolist() if result.sources[i].id in best_of]
            ranked = []
            for i in order[:top_k]:
                src = result.sources[i]
                j = best_of[src.id]
                ranked.append(SentenceSource(
                    source_id=src.id, score=float(scores[i]), sentence_index=rows[j].sentence_index,
                    sentence=rows[j].sentence, sentence_start=rows[j].sentence_start, sentence_end=rows[j].sentence_end,
                    sentence_value=float(values[j]), display_name=display_name(src.id, src.metadata, src.document),
                    page=page_of(src.metadata),
                ))
            out.append(AnswerSentenceSources(verdict.index, verdict.start, verdict.end, verdict.text, tuple(ranked)))
        return out

    @property
    def _sentence_embedder(self) -> Callable[[Sequence[str]], np.ndarray]:
        """The sentence game's embedder (rank_evidence, sentence_sources): the engine's
        question embedder, else the bundled MiniLM, loaded here once."""
        if self._evidence_embedder is None:
            self._evidence_embedder = self.pipeline.question_embedder or MiniLMEmbedder()
        return self._evidence_embedder

    def stream(self, query: str = "", sources: Sequence[Any] = (), *, cancel: Any = None) -> AttributionStream:
        """Attribute an answer while it streams: citations of each sentence as soon as it ends.

        The sources' datastore is built here; :meth:`AttributionStream.feed` takes the
        answer's text deltas and returns the sentences they complete, each with its keyword
        citations, encoding only the new tokens (the query and earlier sentences stay in
        the encoder's past keys/values). :meth:`AttributionStream.finish` ends the answer;
        ``stream.result`` then equals ``attribute(query, sources, answer)`` (same
        citations, scores equal up to float rounding). The sources' size limits are those
        of :meth:`attribute`; ``cancel`` (a :class:`threading.Event`) stops the datastore's
        build and any later ``feed`` or ``finish`` at their next checkpoint.

        Examples
        --------
        >>> stream = ts.stream(query="Where is the Eiffel Tower?",
        ...                    sources=["The Eiffel Tower is in Paris.", "Big Ben is in London."])  # doctest: +SKIP
        >>> [c.text for s in stream.feed("It is in Paris. And ") for c in s.citations]  # doctest: +SKIP
        ['Paris']
        >>> tail = stream.finish(); stream.result.response  # doctest: +SKIP
        'It is in Paris. And '
        """
        from tokenshapley_rag._stream import AttributionStream

        return AttributionStream(self, query, sources, cancel=cancel)


_DTYPES = ("float32", "bfloat16", "float16")


def _torch_dtype(dtype: Any) -> Any:
    """``dtype`` as a torch.dtype (a name from :data:`_DTYPES` or a torch.dtype)."""
    import torch

    if isinstance(dtype, torch.dtype):
        return dtype
    if isinstance(dtype, str) and dtype in _DTYPES:
        return getattr(torch, dtype)
    raise InvalidInputError(f"dtype must be one of {_DTYPES} or a torch.dtype, got {dtype!r}")
