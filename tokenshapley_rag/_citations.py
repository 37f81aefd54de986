"""Citation assembly: from the token game's values to each keyword's status, its cited
sources and its answer sentence's verdict (docs/method.md §5-§8). Pure functions of their
arguments; the statuses follow the match rule on facts of ``_support``."""

from __future__ import annotations

import bisect
import dataclasses
import functools
import re
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

import numpy as np

from tokenshapley_rag._context_game import context_weight_rows, span_games
from tokenshapley_rag._context_view import ContextView
from tokenshapley_rag._datastore import Datastore, SentenceRecord
from tokenshapley_rag._encoder import TokenizedText
from tokenshapley_rag._kernels import ordered_product
from tokenshapley_rag._names import fold, is_numeral
from tokenshapley_rag._negation import negation_heads, negation_scopes
from tokenshapley_rag._question_documents import documents_stating
from tokenshapley_rag._result import AttributionResult, TokenScores
from tokenshapley_rag._segment import _NON_KEYWORDS, SECTION_HEADING, Keyword, find_keywords, split_sentences
from tokenshapley_rag._sources import document_index
from tokenshapley_rag._support import (
    PREDICATE_AGREEMENT,
    PREDICATE_TOLERANCE,
    PRONOUN_OPENER,
    VALUE_KINDS,
    WORD_ANCHOR_MINIMUM,
    KeywordFacts,
    SentenceFacts,
    abbreviated_species,
    holding_mask,
    holding_masks,
    is_heading,
    is_name,
    keyword_facts,
    keyword_status,
    locate_keyword,
    opens_like_a_name,
    outside_longer_names,
    asked_facts,
    asks_a_predicate,
    denied_by,
    sentence_facts,
    sentence_verdict,
    source_topics,
    states_other_value,
    value_neighbours,
    with_implied_subjects,
)
from tokenshapley_rag._text_search import SentenceTexts, span_words
from tokenshapley_rag._timing import step
from tokenshapley_rag._token_game import TokenValues
from tokenshapley_rag._types import (
    KeywordCitation,
    SentenceScore,
    SentenceVerdict,
    Source,
    SourceAttribution,
    display_name,
    page_of,
)
from tokenshapley_rag._values import number_hedge, range_hedges, states_change

__all__ = [
    "assemble_citations",
    "assign_sentences",
    "assign_tokens",
    "document_leads",
    "fallback_citation",
    "keyword_statuses",
    "rank_sources",
    "result_without_sources",
    "sentence_verdicts",
    "source_attribution",
]


def assemble_citations(
    query: str,
    response: str,
    sources: list[Source],
    store: Datastore,
    answer_tokens: TokenizedText,
    values: TokenValues,
    facts: Sequence[SentenceFacts],
    *,
    verbatim: bool,
    context_weight: float,
    context_scale: float,
    support_threshold: float | None,
    config: Mapping[str, Any],
    normalized: Sequence[str] | None = None,
    question_predicate: Callable[[], tuple[np.ndarray, float]] | None = None,
    context: ContextView | None = None,
    question_similarity: Callable[[], np.ndarray] | None = None,
) -> AttributionResult:
    """The :class:`AttributionResult` of ``response`` (its ``answer_tokens`` and their token game
    ``values`` over ``store``, the datastore of ``sources``): each keyword's status and
    cited sources, each answer sentence's verdict, and the scores summed per sentence and
    source. ``facts``: :func:`sentence_facts` of each datastore sentence; ``normalized``,
    optionally, their :func:`normalize_text` (else computed here); ``question_predicate``,
    the question's game over ``store`` when a claim needs it (:func:`keyword_statuses`), and
    ``question_similarity``, optionally, the cosine of the question with each of its
    sentences under a sentence embedder (likewise);
    ``context``, optionally, what is read of ``store``'s sentences, kept per source
    (:class:`ContextView`: its facts are then ``facts`` with implied subjects, and
    ``normalized`` is not read).
    The parameters are
    :class:`TokenShapley`'s; ``config`` is recorded in the result."""
    scores, carries, classes = values
    keywords = species_names(
        find_keywords(response), response, context.species if context is not None else abbreviated_species(facts)
    )
    token_kw = assign_tokens(answer_tokens.offsets, keywords)
    answer_spans = split_sentences(response)
    answer_sentence = assign_sentences(answer_tokens.offsets, answer_spans)
    n_sent = len(store.sentences)
    sentence_source = np.array([r.source_index for r in store.sentences], dtype=np.int64)
    # Each keyword's tokens: token_kw grouped by keyword (ascending token order within).
    by_kw = np.argsort(token_kw, kind="stable")
    bounds = np.searchsorted(token_kw[by_kw], np.arange(len(keywords) + 1))
    cited = [
        (kw, by_kw[bounds[ki] : bounds[ki + 1]])
        for ki, kw in enumerate(keywords)
        if kw.citable and bounds[ki + 1] > bounds[ki]
    ]
    # Support is checked per document: chunks cut from one document back each other.
    source_document = np.asarray(document_index(sources), dtype=np.int64)
    sentence_document = source_document[sentence_source]
    with step("holding"):
        # A capitalised word opening an answer sentence is a name when a source, or the
        # question, writes it as one mid-sentence ("Tell me about Toulouse." "Toulouse is
        # the third-largest city in France.": the claim's subject, though its page only
        # opens sentences with it).
        asked = [sentence_facts(query)] if query.strip() else []
        leads = [f for f, record in zip(facts, store.sentences) if record.sentence_index == 0]
        # A source sentence opening with a pronoun stands for its page's topic.
        positions = [r.sentence_index for r in store.sentences]
        sources_of = sentence_source.tolist()
        if context is None:
            topics = source_topics(facts, sources_of, positions)
            facts = with_implied_subjects(facts, [r.text for r in store.sentences], sources_of, positions, topics)
        else:  # the same, kept per source
            topics, facts = context.topics, context.facts
        sentence_topic = [topics.get(src, "") for src in sources_of]
        # A word is also a name, whatever case the answer writes it in, when the question
        # names it alone ("What are the atomic numbers of Iron and Cobalt?" "... and cobalt
        # has atomic number 27.": cobalt is the second claim's subject, not a word of the
        # first), or when the sources write it only so, as a page's topic (`opens_like_a_name`:
        # "What is the atomic number of iron?" "Iron is ... atomic number 28.", over pages
        # opening "Iron is a chemical element ..." and "Nickel is ...").
        asked_names = {name for f in asked for name in f.names}
        retyped = {
            r for r, (kw, _) in enumerate(cited)
            if kw.kind == "word" and (
                is_name(kw.text, facts) or is_name(kw.text, asked)
                or opens_like_a_name(kw.text, leads, facts)
                or (kw.text[:1].islower() and fold(kw.text) in asked_names)
            )
        }
        cited = [
            (Keyword(kw.start, kw.end, kw.text, "name") if r in retyped else kw, m) for r, (kw, m) in enumerate(cited)
        ]
        # A hedge qualifies a count ("about 870,000"); two counts may state a range together
        # ("between $4 billion and $4.5 billion").
        ranges = range_hedges(response, [(kw.start, kw.end) for kw, _ in cited if kw.kind == "number"])
        kfacts = [
            keyword_facts(
                kw.text, kw.kind, (ranges.get(kw.start) or number_hedge(response, kw.start)) if kw.kind == "number" else "",
                change=kw.kind == "number" and states_change(response, kw.start),
            )
            for kw, _ in cited
        ]
        held = outside_longer_names(
            kfacts, [kw.text for kw, _ in cited], [int(answer_sentence[m[0]]) for _, m in cited], facts,
            holding_masks(kfacts, facts, sentence_document, None if context is None else context.fact_keys),
        )
    # Ranked by each keyword's game in its answer context; support is judged on the
    # keyword's own tokens only, so context cannot make an invented keyword supported.
    word_for_word = sentence_texts = None
    with step("verbatim"):
        if verbatim and n_sent and cited:
            sentence_texts = (
                context.texts if context is not None
                else SentenceTexts.of([r.text for r in store.sentences]) if normalized is None
                else SentenceTexts.joined(normalized)
            )
            word_for_word = store.sentences_with_sequences([classes[members] for _, members in cited])
            # A held number, date or name keeps only its holders (below): its text is looked
            # for in them alone, not in the whole context.
            within = [
                held[r] if kw.kind in VALUE_KINDS and held[r].any() else None for r, (kw, _) in enumerate(cited)
            ]
            word_for_word |= sentence_texts.holding_many([kw.text for kw, _ in cited], within)
            for r, (kw, _) in enumerate(cited):
                # A number, date or name plays among the sentences holding its value: the
                # verbatim holders among them when any, else all of them.
                if kw.kind in VALUE_KINDS and held[r].any():
                    both = word_for_word[r] & held[r]
                    word_for_word[r] = both if both.any() else held[r]
    with step("context_games"):
        per_sentence, own, holds = span_games(
            scores, carries, sentence_source, answer_sentence, [members for _, members in cited],
            context_weight, context_scale, word_for_word,
            None if word_for_word is None else [
                None if found else span_words(response, answer_tokens.offsets, kw.start, kw.end)
                for found, (kw, _) in zip(word_for_word.any(axis=1).tolist(), cited)
            ],
        )
    # The predicate game stays inside the keyword's clause: a semicolon joins two claims
    # that may come from two sources ("X is 330 metres tall; Big Ben dates from 1859").
    clause_starts = [i + 1 for i, ch in enumerate(response) if ch == ";"]
    answer_clause = answer_sentence * (len(clause_starts) + 1) + np.searchsorted(
        np.asarray(clause_starts, dtype=np.int64), answer_tokens.offsets[:, 0], side="right"
    ) if clause_starts else answer_sentence
    with step("statuses"):
        # Whether a document's first sentence is a title or heading line, asked only of the
        # few that hold a keyword (a long context has hundreds of documents).
        heading = functools.cache(lambda j: is_heading(store.sentences[j].text))
        statuses, allowed, rivals = keyword_statuses(
            cited, kfacts, held, scores, answer_sentence, answer_spans, response, sentence_document, facts,
            int(source_document.max()) + 1, retyped, answer_clause, context_scale, query, question_predicate,
            keywords=keywords, sentence_topic=sentence_topic, question_similarity=question_similarity,
            sentence_lead=document_leads(sentence_document), heading=heading,
        )
    with step("citations"):
        # A keyword is ranked among the sources it may be cited by (a source's score sums
        # all its sentences, as in span_scores), quoted by a sentence that holds it.
        citable = np.zeros((len(cited), len(sources)), dtype=bool)
        rows, cols = np.nonzero(allowed)
        citable[rows, sentence_source[cols]] = True
        ranked = rank_sources(
            sources, store.sentences, sentence_source, np.where(citable[:, sentence_source], per_sentence, -np.inf),
            holds & allowed, [kw for kw, _ in cited], [k.hedge for k in kfacts],
        )
        citations: list[KeywordCitation] = []
        for r, (kw, members) in enumerate(cited):
            status = statuses[r]
            support = float(own[r][allowed[r]].max()) / len(members) if allowed[r].any() else 0.0
            if status == "supported" and support_threshold is not None and support <= support_threshold:
                status = "unsupported"
            cited_by: tuple[SourceAttribution, ...] = ()
            if status == "supported":
                cited_by = ranked[r] or fallback_citation(sources, store.sentences, own[r], allowed[r], kw)
            conflict = (
                source_attribution(sources, store.sentences[rivals[r]], 0.0) if rivals[r] >= 0 else None
            )
            citations.append(
                KeywordCitation(
                    text=kw.text,
                    start=kw.start,
                    end=kw.end,
                    sources=cited_by,
                    supported=status == "supported",
                    support=support,
                    status=status,
                    kind=kw.kind,
                    conflict=conflict,
                )
            )
        verdicts = sentence_verdicts(response, answer_spans, citations)
    with step("scores"):
        totals = scores.sum(axis=0) if n_sent else np.zeros(0)
        keyword_totals = np.where(np.isfinite(per_sentence), per_sentence, 0.0).sum(axis=0) if n_sent else totals
        ids = [s.id for s in sources]
        # Each source's sentences summed in their order, as adding them one by one does
        # (np.bincount accumulates its weights in index order).
        source_scores = dict(zip(ids, np.bincount(sentence_source, totals, minlength=len(sources)).tolist()))
        sentence_scores = sentence_score_rows(
            [ids[rec.source_index] for rec in store.sentences], store.sentences, totals.tolist(), keyword_totals.tolist()
        )
        token_scores = TokenScores(
            texts=[response[a:b] for a, b in answer_tokens.offsets.tolist()],
            offsets=answer_tokens.offsets.copy(),
            scores=scores,
            keyword=token_kw,
            answer_sentence=answer_sentence,
            carries=carries,
            sentence_source=sentence_source,
            classes=classes,
            context_classes=store.token_class,
            context_sentence=store.sentence_of,
        )
        result = AttributionResult(
            query=query,
            response=response,
            sources=sources,
            citations=citations,
            source_scores=source_scores,
            sentence_scores=sentence_scores,
            tokens=token_scores,
            config=dict(config),
            sentences=verdicts,
        )
        if sentence_texts is not None:
            result.__dict__["_sentence_texts"] = sentence_texts  # span_scores' cache: the same sentences
    return result


# SentenceScore's fields, set one by one by sentence_score_rows (tests check the list is whole).
SENTENCE_SCORE_FIELDS = (
    "source_id", "sentence_index", "sentence", "sentence_start", "sentence_end", "score", "keyword_score",
)


def sentence_score_rows(
    source_ids: Sequence[str], records: Sequence[SentenceRecord], scores: Sequence[float],
    keyword_scores: Sequence[float],
) -> list[SentenceScore]:
    """``SentenceScore(source_ids[i], records[i]..., scores[i], keyword_scores[i])`` for each
    sentence: objects equal to the constructor's, each field set through its slot. A long
    context has thousands of sentences, and the frozen dataclass's ``__init__`` (one
    ``object.__setattr__`` call per field) took ~2.5 us per object, more than the rest of
    the result together."""
    new = object.__new__
    setters = [getattr(SentenceScore, f).__set__ for f in SENTENCE_SCORE_FIELDS]
    sid, index, text, start, end, score, keyword_score = setters
    out = []
    for source_id, rec, value, keyword_value in zip(source_ids, records, scores, keyword_scores):
        obj = new(SentenceScore)
        sid(obj, source_id)
        index(obj, rec.sentence_index)
        text(obj, rec.text)
        start(obj, rec.start)
        end(obj, rec.end)
        score(obj, value)
        keyword_score(obj, keyword_value)
        out.append(obj)
    return out


def document_leads(sentence_document: np.ndarray) -> np.ndarray:
    """Each sentence's document's first sentence (its index), from each sentence's document
    (a source, or the chunks cut from one document, in order).

    >>> document_leads(np.array([0, 0, 0, 1, 1])).tolist()
    [0, 0, 0, 3, 3]
    """
    n = len(sentence_document)
    first = np.full(int(sentence_document.max()) + 1 if n else 0, n, dtype=np.int64)
    np.minimum.at(first, sentence_document, np.arange(n, dtype=np.int64))
    return first[sentence_document]


def keyword_statuses(
    cited: list[tuple[Keyword, np.ndarray]],
    kfacts: list[Any],
    held: np.ndarray,
    scores: np.ndarray,
    answer_sentence: np.ndarray,
    answer_spans: list[tuple[int, int]],
    response: str,
    sentence_document: np.ndarray,
    facts: list[SentenceFacts],
    n_documents: int,
    retyped: Collection[int] = (),
    answer_clause: np.ndarray | None = None,
    context_scale: float = 16.0,
    query: str = "",
    question_predicate: Callable[[], tuple[np.ndarray, float]] | None = None,
    *,
    keywords: Sequence[Keyword],
    sentence_topic: Sequence[str] = (),
    question_similarity: Callable[[], np.ndarray] | None = None,
    sentence_lead: np.ndarray | None = None,
    heading: Callable[[int], bool] | None = None,
) -> tuple[list[str], np.ndarray, list[int]]:
    """Each keyword's status, the sentences it may be cited by, and its conflicting sentence
    (-1: none): :func:`keyword_status` with the predicate game's values. ``retyped``: the
    keywords that open their sentence and are names only because a source or the question
    spells them as one (no context agreement check for them). ``answer_clause``: each answer
    token's clause (sentences cut at semicolons; default: its sentence), the span of the
    predicate game. ``sentence_document``: each sentence's document (chunks of one document
    are one source here: the anchor and the holding sources are documents).
    ``context_scale``: that of the predicate game (as in :class:`TokenShapley`). ``query``:
    the user's question. Each keyword is judged within its claim (:func:`claim_subjects`); a
    claim's subject that the question names is its topic: supported when held, and the
    claim's values are judged with ``topic=True`` (:func:`keyword_status`). A number, date
    or name the answer denies, or that the anchor holds only in denials, is judged by
    :func:`_denial_status`. ``question_predicate``: called once, when some answer sentence says nothing but numbers,
    dates and names (a bare answer, "Wilhelm Conrad Röntgen"), it gives the question's game
    (each sentence's value summed over the question's tokens) and its total weight: the
    question is that sentence's predicate. ``question_similarity``: called at most once,
    when such a sentence answers a question that names nothing a source holds, it gives the
    cosine of the question with each sentence under a sentence embedder; the documents that
    state the question (:func:`documents_stating`) are then that sentence's anchor, as the
    documents holding what a question names are. ``sentence_lead``: each sentence's
    document's first sentence (:func:`document_leads`), and ``heading``: whether sentence
    ``j`` is a title or heading line (:func:`is_heading`); a document whose first sentence is
    a heading, or opens with a name, is about what it names. ``keywords``: every unit of
    ``response`` (:func:`find_keywords`, stopwords included), for what stands beside each
    value (:func:`value_neighbours`)."""
    n_kw, n_sent = held.shape
    if n_kw == 0:
        return [], held.copy(), []
    if n_sent == 0:
        return ["unsupported"] * n_kw, held.copy(), [-1] * n_kw
    # The predicate game: the context game of each keyword's answer sentence over the
    # tokens of no number, date or name keyword (what is said of the subject), whose
    # exact Shapley values are `weights @ scores` (linearity), summed in a fixed order so
    # that no status depends on the BLAS's thread count.
    clause = answer_sentence if answer_clause is None else answer_clause
    weights = context_weight_rows(clause, [m for _, m in cited], 1.0, context_scale)
    value_tokens = np.concatenate(
        [m for kw, m in cited if kw.kind in VALUE_KINDS] or [np.zeros(0, dtype=np.int64)]
    )
    weights[:, value_tokens] = 0.0
    for r, (_, members) in enumerate(cited):
        weights[r, members] = 0.0
    predicate = np.empty((n_kw, n_sent), dtype=np.float64)
    ordered_product(weights, np.ascontiguousarray(scores, dtype=np.float64), predicate)
    predicate_weight = weights.sum(axis=1)
    kw_sentence = [int(answer_sentence[m[0]]) for _, m in cited]
    held_by_document = documents_holding(held, sentence_document, n_documents)
    statuses: list[str] = []
    allowed = np.zeros_like(held)
    rivals: list[int] = []
    # Items of one list ("A, B and C") are alternatives an answer may take from
    # different sources: they are not each other's anchor.
    # But ", and" before a name that a word follows, after a claim that has said something
    # before the first, opens a clause: "Lionel Messi won the Golden Ball, and Mbappé won the
    # Golden Boot" is two claims, "Saint Helena, Ascension and Tristan da Cunha drive on the
    # left" and "starred Aoi as Sakuya, ..., and Waku Sakaguchi and Tomonori Suzuki as Ken" one.
    group = list(range(n_kw))
    for r in range(1, n_kw):
        a, b = cited[r - 1][0], cited[r][0]
        joiner = response[a.end : b.start]
        if a.kind == b.kind and a.kind in VALUE_KINDS and LIST_JOINER.fullmatch(joiner) and not (
            CLAUSE_JOINER.fullmatch(joiner)
            and r + 1 < n_kw and kw_sentence[r + 1] == kw_sentence[r]
            # a word follows the name, or a number or date whose verb the clause leaves out
            # ("Microsoft was founded in 1975 by Bill Gates, and Apple in 1976 by Steve Jobs.")
            and (cited[r + 1][0].kind == "word" or (b.kind == "name" and cited[r + 1][0].kind in ("number", "date")))
            and any(cited[o][0].kind == "word" for o in range(group[r - 1]) if kw_sentence[o] == kw_sentence[r])
        ):
            group[r] = group[r - 1]
    # Each keyword's claim and the claim's subject: a value's anchor is the documents holding
    # the subject; the subject's, those holding the most of the claim's other values (below).
    kw_claim, subject, topic = claim_subjects(
        [kw for kw, _ in cited], kfacts, kw_sentence, group, answer_spans, response, query
    )
    # What each claim states: a rival must state another number or date than its claim's
    # own, not than its sentence's ("The Brooklyn Bridge opened in 1937 and the Golden Gate
    # Bridge in 1883.": 1883 is not the first claim's, so the Brooklyn Bridge's "opened in
    # 1883" states another date), and another name than its sentence's (a claim cut from a
    # list, "a satire of British monarchy and Imperialism, and its main idea is ...", is still
    # about the sentence's "Gulliver's Travels").
    said = {i: sentence_facts(response[a:b]) for i, (a, b) in enumerate(answer_spans)}
    claim_facts = {}
    for c, span in enumerate(claim_spans([kw for kw, _ in cited], kw_claim, kw_sentence, answer_spans)):
        i = kw_sentence[kw_claim.index(c)]
        if span == answer_spans[i]:  # the claim is its whole sentence
            claim_facts[c] = said[i]
        else:
            own = sentence_facts(response[span[0] : span[1]])
            claim_facts[c] = dataclasses.replace(own, words=said[i].words, names=said[i].names)
        s = subject.get(c)
        if s is not None and kw_sentence[s] != i:
            # A claim that goes on about an earlier sentence's subject ("It was completed in
            # 1889 by Zorblat.") names it too: its page's "It ... was completed in 1889" states
            # no other name.
            name = kfacts[s].words
            claim_facts[c] = dataclasses.replace(
                claim_facts[c], words=claim_facts[c].words | frozenset(name), names=(*claim_facts[c].names, " ".join(name))
            )
    # What stands beside each number, date and name in its answer sentence (value_neighbours),
    # read among all of the sentence's units, its stopwords too, as a source sentence's are (a
    # pronoun or a conjunction between breaks the link), with the cited keywords' kinds.
    neighbours: list[tuple[str, ...]] = [()] * n_kw
    row_of = {(kw.start, kw.end): r for r, (kw, _) in enumerate(cited)}
    units = [cited[row_of[k.start, k.end]][0] if (k.start, k.end) in row_of else k for k in keywords]
    starts = [k.start for k in units]
    for a, b in answer_spans:
        sentence = units[bisect.bisect_left(starts, a) : bisect.bisect_left(starts, b)]
        for k, near in zip(sentence, value_neighbours(sentence)):
            if (k.start, k.end) in row_of:
                neighbours[row_of[k.start, k.end]] = near
    # How many of each claim's keywords every sentence holds ("completed" and "Eiffel Tower"
    # in "The Eiffel Tower was completed in 1815."): a sentence stating the claim with
    # another value holds more of them than the one a wrong value was taken from.
    claim_members = {c: [r for r in range(n_kw) if kw_claim[r] == c] for c in set(kw_claim)}
    claim_held_total = {c: held[members].sum(axis=0) for c, members in claim_members.items()}
    # ... and its words: the keywords that are not numbers, dates or names
    claim_words = {
        c: [r for r in members if cited[r][0].kind not in VALUE_KINDS] for c, members in claim_members.items()
    }
    # Denials (docs/method.md §8): a number, date or name in a negation's scope ("Lise
    # Meitner never received a Nobel Prize."), and the sentences that hold one only in a
    # denial. Words are left to the steps below: a common word in a denied clause ("it is
    # not the fracking process itself that causes them") is rarely what the clause denies.
    scopes = negation_scopes(response)
    in_denial = [any(a <= kw.start < b for a, b in scopes) for kw, _ in cited]
    denied_kw = [in_denial[r] and kw.kind in VALUE_KINDS for r, (kw, _) in enumerate(cited)]
    denying = np.zeros_like(held)
    # A word's denial is read at the word a denial denies first, its verb (negation_heads):
    # "paid" against "It did not pay a dividend.", "did not sell" against "It sold two tankers."
    heads = negation_heads(response, scopes)
    denied_head = [any(a < kw.end and kw.start < b for a, b in heads) for kw, _ in cited]
    holding = np.flatnonzero(held.any(axis=0))
    denies = holding[[bool(facts[j].denied) for j in holding.tolist()]]  # most sentences deny nothing
    for r, j in zip(*np.nonzero(held[:, denies])):
        denying[r, denies[j]] = denied_by(kfacts[r], facts[denies[j]])
    # An answer sentence that says nothing but values ("Wilhelm Conrad Röntgen", "Paris and
    # Lyon") answers the question: the question states its predicate.
    says = {kw_sentence[r] for r, (kw, _) in enumerate(cited) if kw.kind not in VALUE_KINDS}
    bare = [r for r in range(n_kw) if kw_sentence[r] not in says] if question_predicate is not None else []
    bare_set = set(bare)
    # What the question asks about (its names, then its numbers and dates: asked_facts), and
    # the sentences holding each, found once and only when a rule below needs them.
    asked = asked_facts(query, facts) if query.strip() else []
    asked_holding = functools.cache(lambda: holding_masks(asked, facts, sentence_document))
    question_anchor = None
    if bare:
        question, question_weight = question_predicate()
        if not asks_a_predicate(query):
            # A request for an overview ("Acme facts?", "Tell me about Napoleon.") states no
            # predicate: its game only finds a sentence about the subject, any of them, and
            # "- CEO: Maria Lopez" must not be judged against the page's revenue sentence.
            question = np.zeros_like(question)
        predicate[bare] = question
        predicate_weight[bare] = question_weight
        # ... and the names it asks about are its subject, the topic: the documents holding
        # the most of them, and of the numbers and dates it names, are its anchor ("Where was
        # Marie Curie born?" "Vienna.": Vienna is Lise Meitner's birthplace; "Which city is
        # the second-largest in France?" "Lyon": Marseille's page holds France and the rank).
        if asked:
            question_anchor = documents_holding_most(documents_holding(asked_holding(), sentence_document, n_documents))
        if question_anchor is None and question_similarity is not None:
            # A question that names nothing a source holds ("who got the first nobel prize in
            # physics") is still about something: with a sentence embedder, the documents that
            # state it are the anchor, and a name only an unrelated passage holds ("America's
            # Got Talent", from a page on the show) is judged as one no source of it holds.
            saying = np.array([bool(f.lowercase - _NON_KEYWORDS) for f in facts], dtype=bool)
            question_anchor = documents_stating(question_similarity(), sentence_document, n_documents, saying=saying)
    held_anywhere = held_by_document.any(axis=1).tolist()
    asked_facts_of_query = [sentence_facts(query)] if query.strip() else []
    asked_value = [
        bool(asked_facts_of_query) and cited[r][0].kind in ("number", "date") and not denied_kw[r]
        and bool(holding_mask(kfacts[r], asked_facts_of_query, np.zeros(1, dtype=np.int64)).any())
        for r in range(n_kw)
    ]

    # The sentences that stand for a name: a pronoun sentence whose page's topic it is ("She
    # was born in 1867."), found in one pass over the context.
    implying: dict[str, list[int]] = {}
    for j, f in enumerate(facts):
        for name in f.implied:
            implying.setdefault(name, []).append(j)

    def standing_for(s: int) -> np.ndarray | None:
        at = implying.get(" ".join(kfacts[s].words))
        if not at:
            return None
        mask = np.zeros(len(facts), dtype=bool)
        mask[at] = True
        return mask

    @functools.cache
    def subject_sentences(s: int) -> np.ndarray:
        """The sentences holding keyword ``s`` (a claim's subject), and those that stand for it."""
        stand_ins = standing_for(s)
        return held[s] if stand_ins is None else held[s] | stand_ins

    for r in range(n_kw):
        others = [
            o for o in range(n_kw)
            if group[o] != group[r] and kw_claim[o] == kw_claim[r] and cited[o][0].kind in VALUE_KINDS
            and held_anywhere[o]
        ]
        subject_sources = narrowed = None
        the_subject = subject.get(kw_claim[r])
        if the_subject is not None and the_subject != r and group[r] == group[the_subject] and r not in bare_set:
            # An item of the subject's list is a subject too ("The Rhine and the Danube are
            # rivers.": the Danube is not checked against the Rhine's page); not in a bare
            # answer's list, whose items answer the question ("Nashville, Cleveland").
            the_subject = r
        on_topic = topic.get(kw_claim[r], False)
        if question_anchor is not None and r in bare_set:
            the_subject, on_topic = None, True
        if (on_topic and the_subject == r) or (asked_value[r] and held[r].any()):
            # The question's own subject is not checked against the answer's values, nor is
            # a number or date the question states and the answer does not deny ("When was
            # Python 3.12 released?": the answer's "3.12" is what was asked about, not what it
            # claims; "Marseille is not the oldest city" is judged as a denial).
            statuses.append("supported" if held[r].any() else "unsupported")
            allowed[r] = held[r]
            rivals.append(-1)
            continue
        if the_subject is None and on_topic:
            subject_sources = question_anchor
        elif the_subject is not None and the_subject != r and held_by_document[the_subject].any():
            subject_sources = held_by_document[the_subject]  # a value is checked against the subject
            # The claim's other values that tell the subject's documents apart (not held by all).
            values = [o for o in others if o != the_subject and not (held_by_document[o] | ~subject_sources).all()]
            if values and subject_sources.sum() > 1 and not (held_by_document[r] & held_by_document[values]).any():
                # Several documents hold the subject, and those holding this value hold none of
                # the claim's other values ("Facebook acquired Instagram in April 2012 for $19
                # billion.": $19 billion is WhatsApp's price, on another page about Facebook):
                # the documents holding the most of them state the claim, and may contradict it.
                narrowed = documents_holding_most(held_by_document[values] & subject_sources)
                # ... unless a sentence holding this value says more of the claim's words than
                # every sentence holding those values: then they are what is wrong ("Lise
                # Meitner died in Vienna in 1968.": "Lise Meitner died in 1968 in Cambridge."
                # says she died, her page holding Vienna that she was born there).
                words = claim_words[kw_claim[r]]
                if words and narrowed is not None:
                    words_held = held[words].sum(axis=0)
                    by_values = np.logical_or.reduce(held[values]) & narrowed[sentence_document]
                    by_value = held[r] & subject_sources[sentence_document]
                    if words_held[by_value].max(initial=0) > words_held[by_values].max(initial=0):
                        narrowed = None
        elif others and (the_subject == r or (the_subject is None and cited[r][0].kind in VALUE_KINDS)):
            # The subject is checked against the sources holding the most of the rest, and so
            # is each value of a claim that names nothing ("Revenue rose 8% to $4.2 billion in
            # the third quarter.").
            subject_sources = documents_holding_most(held_by_document[others])
        elif the_subject == r:
            # A claim with no other value ("Lise Meitner discovered polonium and radium."):
            # against the sources holding the most of its words.
            subject_sources = documents_holding_most(
                held_by_document[claim_words[kw_claim[r]]], at_least=WORD_ANCHOR_MINIMUM
            )
        in_anchor = np.ones(n_sent, dtype=bool) if subject_sources is None else subject_sources[sentence_document]
        affirmed_by = held[r] & ~denying[r]
        if cited[r][0].kind not in VALUE_KINDS and (
            judged := _head_denial_status(
                kfacts[r], in_denial[r], denied_head[r], held[r], in_anchor, facts, predicate[r],
                claim_held_total[kw_claim[r]] - held[r],
            )
        ) is not None:
            statuses.append(judged[0])
            allowed[r] = judged[1]
            rivals.append(judged[2])
            continue
        if cited[r][0].kind not in VALUE_KINDS:
            # A word is cited by the sentences that affirm it, when some do.
            affirmed_by = affirmed_by if affirmed_by.any() else held[r]
        elif denied_kw[r] or (held[r].any() and not (affirmed_by & in_anchor).any() and (
            (held[r] & in_anchor).any() or not affirmed_by.any()
        )):
            # A value the answer denies is decided here, and so is one it affirms that the
            # anchor holds only in denials (the subject's own page denies it) or every
            # holder does.
            status, ok, rival = _denial_status(
                r, denied_kw, denying, held, in_anchor, predicate[r],
                [o for o in range(n_kw) if kw_claim[o] == kw_claim[r] and denied_kw[o]],
            )
            statuses.append(status)
            allowed[r] = ok
            rivals.append(rival)
            continue
        claim_held, claim_size = (
            _claim_keywords_held(r, the_subject, claim_members[kw_claim[r]], claim_held_total[kw_claim[r]], held)
            if cited[r][0].kind in VALUE_KINDS else (None, 0)
        )
        judge = functools.partial(
            keyword_status, kfacts[r], affirmed_by, predicate=predicate[r], sentence_document=sentence_document,
            facts=facts, answer=claim_facts[kw_claim[r]],
            tolerance=1.0 / PREDICATE_TOLERANCE if the_subject == r else PREDICATE_TOLERANCE,
            agreement=None if r in retyped and r not in bare_set else PREDICATE_AGREEMENT,
            predicate_weight=float(predicate_weight[r]), topic=on_topic, neighbours=neighbours[r],
            claim_held=claim_held, claim_size=claim_size, is_subject=the_subject == r,
            subject_held=None if the_subject is None or the_subject == r else subject_sentences(the_subject),
            subject_words=() if the_subject is None or the_subject == r else kfacts[the_subject].words,
            subject_named=the_subject is None or the_subject in claim_members[kw_claim[r]],
            sentence_lead=sentence_lead, heading=heading, bare=r in bare_set,
            standing_for=standing_for(r) if cited[r][0].kind == "name" else None,
        )
        status, ok, rival = judge(subject_sources=subject_sources)
        if status == "supported" and narrowed is not None and not np.array_equal(narrowed, subject_sources):
            # Judged against the documents stating the claim, it is contradicted only by one
            # of their sentences: else the answer combined two pages about one subject.
            status_there, ok_there, rival_there = judge(subject_sources=narrowed)
            if status_there == "contradicted":
                status, ok, rival = status_there, ok_there, rival_there
        statuses.append(status)
        allowed[r] = ok
        rivals.append(rival)
    # A subject overturned while the page about it (its topic: the name opening the page)
    # contradicts a value of its claim: the value is what is wrong ("Inception grossed $701
    # million worldwide.": Inception's page says $837 million, and Interstellar's "It grossed
    # $701 million ..." does not make the claim Interstellar's). The subject stands, cited
    # where it is held. A page that only mentions it decides nothing ("Ar-Pharazôn forged the
    # One Ring.", against Sauron's page).
    for c, s in subject.items():
        if statuses[s] != "contradicted" or not held[s].any() or not sentence_topic:
            continue
        name = " ".join(kfacts[s].words)
        if any(
            statuses[r] == "contradicted" and rivals[r] >= 0 and sentence_topic[rivals[r]] == name
            for r in claim_members[c] if r != s and cited[r][0].kind in VALUE_KINDS
        ):
            statuses[s], rivals[s] = "supported", -1
            allowed[s] = held[s] & ~denying[s] if (held[s] & ~denying[s]).any() else held[s]
    # ... and the other way round: a subject the question does not ask about, whose pages
    # contradict a value of its claim (or state another value where the claim states one the
    # question asks for), while a sentence naming what the question asks about (and not the
    # subject) holds every value of the claim, is what is wrong ("When was Windows 10
    # released?" "Windows 11 was released on 29 July 2015.": the date is Windows 10's;
    # "Which gene is on chromosome 13?" "BRCA1 is located on chromosome 13."). The values are
    # supported there; the subject is contradicted by that sentence.
    if query.strip():
        # what the question asks about is its names with its numbers and dates ("Who won the
        # 1921 Nobel Prize in Physics?": Bohr's 1922 prize is not it)
        asked_names = [a for a in asked if a.kind == "name"]
        # A sentence with a claim about what the question asks does not swap it for another
        # subject in its other claims: "The Danube is more than twice as long as the Rhine
        # (2,850 km)." (How long is the Danube?) compares it with the Rhine, and the Rhine's
        # length is what is wrong.
        on_topic_sentences = {kw_sentence[s] for c, s in subject.items() if topic.get(c, False)}
        for c, s in subject.items():
            values = [r for r in claim_members[c] if r != s and cited[r][0].kind in VALUE_KINDS]
            if (
                statuses[s] != "supported" or topic.get(c, False) or not values or kw_sentence[s] in on_topic_sentences
                or any(denied_kw[r] for r in [s, *values])
            ):
                continue
            of_subject = held_by_document[s][sentence_document]
            wrong = [
                r for r in values
                if (asked_names and statuses[r] == "contradicted") or (
                    asked_value[r] and not (held[r] & of_subject).any()
                    and any(
                        states_other_value(kfacts[r], facts[j], claim_facts[kw_claim[r]])
                        for j in np.flatnonzero(held[s]).tolist()
                    )
                )
            ]
            if not wrong:
                continue
            stating = ~held[s] & np.logical_and.reduce(held[values] & ~denying[values])
            if asked:  # any sentence, when the question names nothing
                stating &= np.logical_and.reduce(asked_holding())
            if stating.any():
                j = int(np.flatnonzero(stating)[np.argmax(predicate[s][stating])])
                statuses[s], rivals[s], allowed[s] = "contradicted", j, False
                for r in values:
                    statuses[r], rivals[r], allowed[r] = "supported", -1, stating
    return statuses, allowed, rivals


def _claim_keywords_held(
    r: int, subject: int | None, members: list[int], total: np.ndarray, held: np.ndarray
) -> tuple[np.ndarray, int]:
    """For keyword ``r``: how many of its claim's other keywords each sentence holds, and how
    many there are, the claim's subject left out (the anchor checks it, and a source
    sentence often names it by a pronoun: "It is the oldest city in France.")."""
    counts = total - held[r]
    size = len(members) - 1
    if subject is not None and subject != r and subject in members:  # a pronoun's claim does not name it
        counts = counts - held[subject]
        size -= 1
    return counts, size


def _head_denial_status(
    k: KeywordFacts, in_denial: bool, denied_head: bool, held: np.ndarray, in_anchor: np.ndarray,
    facts: Sequence[SentenceFacts], predicate: np.ndarray, claim_held: np.ndarray,
) -> tuple[str, np.ndarray, int] | None:
    """The status of a word keyword when a denial decides it (docs/method.md §8, "Denials"),
    else None. ``held``: the sentences holding it; ``in_anchor``: its anchor's sentences. A
    word the answer affirms that every anchor sentence holding it states as what its denial
    denies ("paid" against "Halvorsen Shipping did not pay a dividend.") is contradicted by
    the one that states the predicate best, unless a sentence elsewhere affirms it with more
    of the claim's other keywords (``claim_held``: a sentence the answer copies); a word the
    answer denies first ("did not sell") is contradicted by an anchor sentence that affirms
    it, denies nothing of it and holds the most of the claim's other keywords ("It sold two
    tankers."), when no anchor sentence denies it."""
    holders = held & in_anchor
    if not k.stems or not holders.any():
        return None
    tried = np.flatnonzero(holders)
    heads = np.array([bool(k.stems & facts[j].denied_heads) for j in tried.tolist()])
    none = np.zeros_like(holders)
    if not in_denial and heads.all():
        affirming = [j for j in np.flatnonzero(held & ~in_anchor).tolist() if not k.stems & facts[j].denied]
        if not affirming or claim_held[affirming].max() <= claim_held[tried].max():
            return "contradicted", none, int(tried[np.argmax(predicate[tried])])
        return None
    if denied_head and not heads.any():
        affirming = tried[[not (k.stems & facts[j].denied) for j in tried.tolist()]]
        if len(affirming) == len(tried) and claim_held[affirming].max() >= max(1, int(claim_held.max())):
            best = affirming[claim_held[affirming] == claim_held[affirming].max()]
            return "contradicted", none, int(best[np.argmax(predicate[best])])
    return None


def _denial_status(
    r: int, denied_kw: Sequence[bool], denying: np.ndarray, held: np.ndarray, in_anchor: np.ndarray,
    predicate: np.ndarray, claim_denials: Sequence[int],
) -> tuple[str, np.ndarray, int]:
    """The status, citable sentences and conflict of value keyword ``r`` (a number, date or
    name) when a negation decides it (docs/method.md §8, "Denials"): one the answer denies is
    supported by an anchor sentence that denies it too, contradicted by one that affirms all
    its claim denies (``claim_denials``), else supported where the anchor holds it (no
    rival judges it) and unsupported where not; one the answer affirms that the anchor holds only in
    denials (or that every holder denies) is contradicted by the anchor's denying sentence
    that states the predicate best, else unsupported (another document's denial is not the
    claim's)."""
    none = np.zeros_like(held[r])
    if denied_kw[r]:
        ok = denying[r] & in_anchor
        if ok.any():
            return "supported", ok, -1
        against = in_anchor.copy()
        for o in claim_denials:
            against &= held[o] & ~denying[o]
    else:
        against = denying[r] & in_anchor
    if against.any():
        candidates = np.flatnonzero(against)
        return "contradicted", none, int(candidates[np.argmax(predicate[candidates])])
    if denied_kw[r]:
        # No source denies it and none affirms the whole denial: a value the anchor holds
        # stands as copied ("a slight shrug, not the jolt seen on TV"), and no other value is
        # a rival (a denied value is not a claim of that value). Another subject's page is
        # no support ("Marie Curie was not born in Vienna.": Vienna is Lise Meitner's).
        ok = held[r] & in_anchor
        return ("supported" if ok.any() else "unsupported"), ok, -1
    return "unsupported", none, -1


def documents_holding(held: np.ndarray, sentence_document: np.ndarray, n_documents: int) -> np.ndarray:
    """``(n_keywords, n_documents)`` bool: whether some sentence of the document holds the
    keyword (``held``: ``(n_keywords, n_sentences)``)."""
    by_document = np.zeros((len(held), n_documents), dtype=bool)
    rows, cols = np.nonzero(held)
    by_document[rows, sentence_document[cols]] = True
    return by_document


def documents_holding_most(by_document: np.ndarray, at_least: int = 1) -> np.ndarray | None:
    """The documents that hold the most of the keywords (``(n_keywords, n_documents)`` bool,
    :func:`documents_holding`); None when none holds ``at_least`` of them.

    >>> documents_holding_most(np.array([[True, False, True], [True, False, False]]))
    array([ True, False, False])
    >>> documents_holding_most(np.zeros((2, 3), dtype=bool)) is None
    True
    """
    count = by_document.sum(axis=0)
    return count == count.max() if len(count) and count.max() >= max(at_least, 1) else None


def claim_subjects(
    keywords: Sequence[Keyword],
    kfacts: Sequence[Any],
    kw_sentence: Sequence[int],
    group: Sequence[int],
    answer_spans: Sequence[tuple[int, int]],
    response: str,
    query: str = "",
) -> tuple[list[int], dict[int, int], dict[int, bool]]:
    """Each cited keyword's claim, each claim's subject (a keyword's index) and whether that
    subject is the question's topic (docs/method.md §8).

    A claim is an answer sentence, or its part after a clause break (";", "and", "but",
    "while", "whereas", "than" or ", or", not followed by a pronoun) that opens a new name, when the
    claim before it says something (has a keyword other than a name) and the name is not an
    item of a list with the value before it: "The Eiffel Tower is 330 metres tall and Big
    Ben was completed in 1859." makes two claims; "Lise Meitner and Otto Hahn discovered
    protactinium" and "The Haves and the Have Nots premiered in 2013" one each. A claim's
    subject is its first name. A claim with no name, and a sentence that opens with a
    personal pronoun ("She died in 1934 in Warsaw."), go on about the previous claim's
    subject, unless a section's heading stands between them
    (:data:`~tokenshapley_rag._segment.SECTION_HEADING`). A subject is the topic when
    ``query`` holds it (the match rule) and no number, date or name comes before it in its
    claim ("According to my sources, for the 2022-23 NBA season, Stephen Curry
    ..." is not a claim about the NBA).

    >>> text = "The city of Lyon is on the Rhône, and Marseille is a port. It is old. In 2020 it had 870,321 people."
    >>> kws, spans = [k for k in find_keywords(text) if k.citable], split_sentences(text)
    >>> sentences = [next(i for i, (a, b) in enumerate(spans) if a <= k.start < b) for k in kws]
    >>> claims, subject, topic = claim_subjects(kws, [keyword_facts(k.text, k.kind) for k in kws], sentences,
    ...     list(range(len(kws))), spans, text, "Where is Lyon?")
    >>> [(k.text, c) for k, c in zip(kws, claims)]
    [('city', 0), ('Lyon', 0), ('Rhône', 0), ('Marseille', 1), ('port', 1), ('old', 2), ('2020', 3), ('870,321', 3), ('people', 3)]
    >>> {c: kws[r].text for c, r in subject.items()}, topic
    ({0: 'Lyon', 1: 'Marseille', 2: 'Marseille', 3: 'Marseille'}, {0: True, 1: False, 2: False, 3: False})
    """
    query_facts = sentence_facts(query) if query.strip() else None
    asked_words = {w for name in query_facts.names for w in name.split()} if query_facts is not None else set()
    kw_claim: list[int] = []
    claim_opens_sentence: list[bool] = []
    said = False  # whether the claim so far has a keyword other than a name (it says something)
    for r, kw in enumerate(keywords):
        if r == 0 or kw_sentence[r] != kw_sentence[r - 1]:
            claim_opens_sentence.append(True)
            said = False
        elif (
            said and kw.kind == "name" and group[r] != group[r - 1]
            and (
                CLAUSE_BREAK.search(response, keywords[r - 1].end, kw.start) is not None
                # what a comparison compares with is a claim of its own ("... is more than twice
                # as long as the Rhine (1,230 km)": the Rhine's length is the Rhine's)
                or COMPARED_WITH.search(response, max(0, kw.start - 60), kw.start) is not None
            )
        ):
            claim_opens_sentence.append(False)
            said = False
        said = said or kw.kind != "name"
        kw_claim.append(len(claim_opens_sentence) - 1)
    members: list[list[int]] = [[] for _ in claim_opens_sentence]
    for r, c in enumerate(kw_claim):
        members[c].append(r)
    subject: dict[int, int] = {}
    topic: dict[int, bool] = {}
    for c, opens_sentence in enumerate(claim_opens_sentence):
        own = next((r for r in members[c] if keywords[r].kind == "name"), None)
        a, b = answer_spans[kw_sentence[members[c][0]]]
        goes_on = opens_sentence and PRONOUN_OPENER.match(response[a:b]) is not None
        # A section's heading ("## Acme Corp") ends what the claims before it were about.
        after_heading = c > 0 and SECTION_HEADING.search(
            response, keywords[members[c - 1][-1]].end, keywords[members[c][0]].start
        ) is not None
        if c - 1 in subject and (own is None or goes_on) and not after_heading:
            subject[c], topic[c] = subject[c - 1], topic[c - 1]
        elif own is not None:
            subject[c] = own
            first_value = next(r for r in members[c] if keywords[r].kind in VALUE_KINDS)
            topic[c] = (
                query_facts is not None and first_value == own
                and (
                    bool(holding_mask(kfacts[own], [query_facts], np.zeros(1, dtype=np.int64)).any())
                    # the question names it by one of its words ("How many employees does
                    # Halvorsen have?" for "Halvorsen Shipping"), and by its number if it has one
                    # ("Windows 10" does not name "Windows 11", nor "Artemis" "Artemis II")
                    or any(w in asked_words for w in kfacts[own].words if not is_numeral(w))
                    and all(w in asked_words for w in kfacts[own].words if is_numeral(w))
                )
            )
    return kw_claim, subject, topic


def claim_spans(
    keywords: Sequence[Keyword], kw_claim: Sequence[int], kw_sentence: Sequence[int],
    answer_spans: Sequence[tuple[int, int]],
) -> list[tuple[int, int]]:
    """Each claim's character span (:func:`claim_subjects`' claims, numbered in order): from
    its sentence's start, or from its first keyword when it opens after a clause break, to
    the next claim's first keyword in the same sentence, or to the sentence's end.

    >>> text = "The Brooklyn Bridge opened in 1937 and the Golden Gate Bridge in 1883. It is long."
    >>> kws, spans = [k for k in find_keywords(text) if k.citable], split_sentences(text)
    >>> sentences = [next(i for i, (a, b) in enumerate(spans) if a <= k.start < b) for k in kws]
    >>> [text[a:b] for a, b in claim_spans(kws, [0, 0, 0, 1, 1, 2], sentences, spans)]
    ['The Brooklyn Bridge opened in 1937 and the ', 'Golden Gate Bridge in 1883.', 'It is long.']
    """
    first: dict[int, int] = {}
    for r, c in enumerate(kw_claim):
        first.setdefault(c, r)
    spans: list[tuple[int, int]] = []
    for c in range(len(first)):
        r = first[c]
        a, b = answer_spans[kw_sentence[r]]
        if c > 0 and kw_sentence[first[c - 1]] == kw_sentence[r]:
            a = keywords[r].start
        nxt = first.get(c + 1)
        if nxt is not None and kw_sentence[nxt] == kw_sentence[r]:
            b = keywords[nxt].start
        spans.append((a, b))
    return spans


# ", and" or ", or" between two items: a list's last item, or a new clause (keyword_statuses).
CLAUSE_JOINER = re.compile(r"\s*,\s*(?:and|or)\s+(?:(?:the|a|an)\s+)?", re.IGNORECASE)
# A comparison's second term is a claim of its own ("Acme, with 14,300 employees, is
# smaller than Globex, which has 22,000.": 22,000 is Globex's).
CLAUSE_BREAK = re.compile(
    r";|(?:,\s*|\s+)(?:and|but|while|whereas|than)\s+(?!(?:he|she|it|they)\b)|,\s*or\s+(?!(?:he|she|it|they)\b)",
    re.IGNORECASE,
)
# The words before what a comparison compares with: "as long as (the)", "as many as", "twice
# the size of (the)", "three times the population of" ("than" is a clause break; "the
# population of Lyon" alone compares nothing).
COMPARED_WITH = re.compile(
    r"\bas\s+(?:[\w-]+\s+){1,2}as\s+(?:(?:the|a|an)\s+)?$"
    r"|\b(?:twice|half|[\w-]+\s+times)\s+the\s+(?:size|length|height|area|population)\s+of\s+(?:(?:the|a|an)\s+)?$",
    re.IGNORECASE,
)
LIST_JOINER = re.compile(r"\s*(?:,|;|&|,?\s*(?:and|or))\s*(?:(?:the|a|an)\s+)?", re.IGNORECASE)


def fallback_citation(
    sources: list[Source], records: list[SentenceRecord], own: np.ndarray, allowed: np.ndarray, keyword: Keyword
) -> tuple[SourceAttribution, ...]:
    """A supported keyword whose game gives no source a positive score is cited by the
    holding sentence with the best own score (it holds the keyword's value)."""
    j = int(np.flatnonzero(allowed)[np.argmax(own[allowed])])
    return (source_attribution(sources, records[j], float(own[j]), keyword),)


def result_without_sources(query: str, response: str, config: Mapping[str, Any] | None = None) -> AttributionResult:
    """The result of an answer no source was retrieved for: every citable keyword of
    ``response`` is ``unsupported`` (nothing supports it), and so is every sentence with one.
    No model runs. An integration returns it when its retriever found nothing, so that an
    answer written from memory is flagged rather than shown without citations.

    >>> res = result_without_sources("When?", "Big Ben was completed in 1859.")
    >>> [(c.text, c.status) for c in res.citations], [v.verdict for v in res.sentences]
    ([('Big Ben', 'unsupported'), ('completed', 'unsupported'), ('1859', 'unsupported')], ['unsupported'])
    """
    citations = [
        KeywordCitation(k.text, k.start, k.end, (), supported=False, status="unsupported", kind=k.kind)
        for k in find_keywords(response) if k.citable
    ]
    verdicts = sentence_verdicts(response, split_sentences(response), citations)
    return AttributionResult(query, response, [], citations, {}, [], TokenScores.empty(), dict(config or {}), verdicts)


def sentence_verdicts(
    response: str, spans: list[tuple[int, int]], citations: list[KeywordCitation]
) -> list[SentenceVerdict]:
    """Each answer sentence's verdict from its keywords (:func:`sentence_verdict`) and its
    score: the mean over its keywords of 0.5 + 0.5 * clip(support, 0, 1) when supported,
    0 when unsupported and -1 when contradicted (1.0 for a sentence with no keyword)."""
    out = []
    for i, (a, b) in enumerate(spans):
        inside = [c for c in citations if a <= c.start < b]
        values = [
            0.5 + 0.5 * min(max(c.support, 0.0), 1.0) if c.status == "supported" else (-1.0 if c.status == "contradicted" else 0.0)
            for c in inside
        ]
        out.append(
            SentenceVerdict(
                index=i,
                start=a,
                end=b,
                text=response[a:b],
                verdict=sentence_verdict([c.status for c in inside]),
                score=float(np.mean(values)) if values else 1.0,
                n_keywords=len(inside),
            )
        )
    return out


def rank_sources(
    sources: list[Source],
    records: list[SentenceRecord],
    sentence_source: np.ndarray,
    per_sentence: np.ndarray,
    holds: np.ndarray,
    keywords: Sequence[Keyword] | None = None,
    hedges: Sequence[str] | None = None,
) -> list[tuple[SourceAttribution, ...]]:
    """Each keyword's sources, best first (one row of ``per_sentence`` and ``holds`` per
    keyword): each candidate source scores the sum of its sentences' values (what
    :meth:`AttributionResult.span_scores` gives it) and is listed when that is positive,
    with the sentence it is cited by: its best-scoring sentence among those that hold the
    keyword (``holds``), so the quoted sentence contains the keyword whenever the source
    does; its best sentence otherwise. ``hedges``: each keyword's :func:`number_hedge`, for
    finding a rounded count in the quoted sentence."""
    n_kw, n_sent = per_sentence.shape
    if n_sent == 0:
        return [()] * n_kw
    # Columns grouped by source (stable: each source's sentences in their order), so that
    # every per-source sum, any and argmax is one reduction over runs of columns.
    by_source = np.argsort(sentence_source, kind="stable")
    src_sorted = sentence_source[by_source]
    new_run = np.ones(n_sent, dtype=bool)
    new_run[1:] = src_sorted[1:] != src_sorted[:-1]
    first = np.flatnonzero(new_run)
    present = src_sorted[first]  # sources that have sentences
    run = np.cumsum(new_run) - 1  # each sorted column's run
    values = per_sentence[:, by_source]
    ok = np.isfinite(values)
    totals = np.zeros((n_kw, len(sources)))  # a source that is no candidate stays at 0: never listed
    totals[:, present] = np.add.reduceat(np.where(ok, values, 0.0), first, axis=1)
    held = holds[:, by_source] & ok
    pool = np.where(np.logical_or.reduceat(held, first, axis=1)[:, run], held, ok)
    # Each run's best column, the first of equals (np.argmax's rule): the lowest position
    # holding the run's maximum.
    key = np.where(pool, values, -np.inf)
    best = key == np.maximum.reduceat(key, first, axis=1)[:, run]
    position = np.where(best, np.arange(n_sent)[None, :], n_sent)
    cited_by = np.zeros((n_kw, len(sources)), dtype=np.int64)
    cited_by[:, present] = by_source[np.minimum.reduceat(position, first, axis=1)]
    # Best first (ties: source order); the positive totals lead each row of that order.
    order = np.argsort(-totals, axis=1, kind="stable").tolist()
    n_listed = (totals > 0).sum(axis=1).tolist()
    totals_of, cited_of = totals.tolist(), cited_by.tolist()
    return [
        tuple(
            source_attribution(
                sources, records[cited_of[r][src]], totals_of[r][src], keywords[r] if keywords else None,
                hedges[r] if hedges else "",
            )
            for src in order[r][: n_listed[r]]
        )
        for r in range(n_kw)
    ]


def source_attribution(
    sources: list[Source], rec: SentenceRecord, score: float, keyword: Keyword | None = None, hedge: str = ""
) -> SourceAttribution:
    """The citation of one source sentence, named for a reader, with the keyword's own
    range in the source text when the sentence holds it (``hedge``: the keyword's
    :func:`number_hedge`)."""
    src = sources[rec.source_index]
    at = locate_keyword(keyword.text, keyword.kind, rec.text, hedge) if keyword is not None else None
    return SourceAttribution(
        source_id=src.id,
        score=score,
        sentence=rec.text,
        sentence_start=rec.start,
        sentence_end=rec.end,
        sentence_index=rec.sentence_index,
        display_name=display_name(src.id, src.metadata, src.document),
        page=page_of(src.metadata),
        keyword_start=None if at is None else rec.start + at[0],
        keyword_end=None if at is None else rec.start + at[1],
    )


def species_names(keywords: list[Keyword], response: str, abbreviated: Collection[str]) -> list[Keyword]:
    """``keywords`` (:func:`find_keywords` of ``response``) with a genus and the species
    after it joined into one name when a source names that species under its abbreviated
    genus (``abbreviated``: :func:`abbreviated_species` of the sources' sentences):
    "Escherichia coli" over "E. coli causes ..." is one name, held there (the genus by its
    initial), not the word "Escherichia" and the word "coli". The segmenter alone cannot
    tell "Escherichia coli" from "Paris hosts".

    >>> text = "Escherichia coli causes them."
    >>> [k.text for k in species_names(find_keywords(text), text, {"e coli"})]
    ['Escherichia coli', 'causes', 'them']
    >>> [k.text for k in species_names(find_keywords(text), text, set())]
    ['Escherichia', 'coli', 'causes', 'them']
    """
    pairs = [
        i for i in range(len(keywords) - 1)
        if keywords[i].kind in ("name", "word") and keywords[i + 1].kind == "word"
        and keywords[i].text[:1].isupper() and keywords[i].text.isalpha()
        and keywords[i + 1].text.isalpha() and keywords[i + 1].text.islower()
        and response[keywords[i].end : keywords[i + 1].start] == " "
    ]
    if not pairs or not abbreviated:
        return keywords
    joined: list[int] = []
    for i in pairs:
        if fold(f"{keywords[i].text[0]} {keywords[i + 1].text}") in abbreviated and (not joined or joined[-1] != i - 1):
            joined.append(i)
    if not joined:
        return keywords
    out = list(keywords)
    for i in reversed(joined):
        a, b = keywords[i], keywords[i + 1]
        out[i : i + 2] = [Keyword(a.start, b.end, response[a.start : b.end], "name")]
    return out


def assign_tokens(offsets: np.ndarray, keywords: list[Keyword]) -> np.ndarray:
    """Index of the keyword each token overlaps most (-1: punctuation or space only)."""
    out = np.full(len(offsets), -1, dtype=np.int64)
    if not keywords or not len(offsets):
        return out
    starts = np.array([k.start for k in keywords])
    ends = np.array([k.end for k in keywords])
    overlap = np.minimum(ends[None, :], offsets[:, 1:2]) - np.maximum(starts[None, :], offsets[:, 0:1])
    best = np.argmax(overlap, axis=1)
    ok = (offsets[:, 1] > offsets[:, 0]) & (overlap[np.arange(len(offsets)), best] > 0)
    out[ok] = best[ok]
    return out


def assign_sentences(offsets: np.ndarray, sentences: list[tuple[int, int]]) -> np.ndarray:
    """Index of the answer sentence each token belongs to: the last sentence starting at
    or before the token's last character (a token's leading space can precede its
    sentence's start)."""
    starts = np.array([a for a, _ in sentences] or [0])
    last_char = np.maximum(offsets[:, 1] - 1, offsets[:, 0])
    return np.maximum(np.searchsorted(starts, last_char, side="right") - 1, 0).astype(np.int64)
