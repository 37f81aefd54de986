"""The paraphrase check: real LLM answer sentences, each ranked against its own evidence
mixed with other claims' evidence (``tokenshapley eval --dataset paraphrase``).

Built from the ``support`` set (AttributionBench dev claims: answer sentences of real LLM
answers and the passages they cite, labelled by humans). Only claims labelled
``supported`` are used: a human judged that the passage supports the sentence, and these
sentences mostly *paraphrase* their evidence (Stanford-GenSearch, ExpertQA, LFQA) rather than
copy it. Each claim becomes one sentence-ranking example:

* response: the claim (one answer sentence); query: its question;
* sources: the claim's own passages plus the passages of ``n_distractors`` other supported
  claims whose questions share the most content words with this one (ties: file order;
  claims with the same question text are skipped), every passage cut to its first
  sentences within ``max_source_chars`` characters
  (:func:`~tokenshapley_rag.benchmark._support.truncate_source`), in an order fixed by a
  hash of the claim id and the passage id (so the gold passage is not always first);
* gold: every sentence of the claim's own passages (as NQ's gold passage).

The protocol is the sentence ranking of :func:`~tokenshapley_rag.benchmark.run_ranking_eval`:
every method ranks every sentence of every passage; headline F1@5, and precision@1 (the
answer sentence's best source sentence is in one of its own passages). Deterministic: no
randomness beyond the sha1 order. Pure (no model, no I/O besides reading the set).
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Sequence

from tokenshapley_rag._segment import STOPWORDS
from tokenshapley_rag._types import Source
from tokenshapley_rag.benchmark._data import AttributionExample, GoldEvidence, GoldSpan
from tokenshapley_rag.benchmark._support import SupportClaim, load_support_set, truncate_source
from tokenshapley_rag.errors import InvalidInputError

__all__ = [
    "PARAPHRASE_DISTRACTORS", "PARAPHRASE_SOURCE_CHARS", "load_paraphrase_set", "load_support_sentences_set",
    "paraphrase_examples", "support_sentence_examples",
]

#: Other claims' passages mixed into each example.
PARAPHRASE_DISTRACTORS = 3
#: Each passage is cut to its first sentences within this many characters.
PARAPHRASE_SOURCE_CHARS = 1200

_WORD = re.compile(r"\w+")


def _content_words(text: str) -> frozenset[str]:
    return frozenset(w for w in (x.lower() for x in _WORD.findall(text)) if w not in STOPWORDS and len(w) > 1)


def _order_key(claim_id: str, source_id: str) -> str:
    return hashlib.sha1(f"{claim_id}\x00{source_id}".encode("utf-8")).hexdigest()


def paraphrase_examples(
    claims: Sequence[SupportClaim],
    *,
    n_distractors: int = PARAPHRASE_DISTRACTORS,
    max_source_chars: int | None = PARAPHRASE_SOURCE_CHARS,
    limit: int | None = None,
) -> list[AttributionExample]:
    """The paraphrase-check examples of ``claims`` (module docstring), in claim order.

    Parameters
    ----------
    claims : sequence of SupportClaim
        Rows of the support set; those not labelled ``supported`` are skipped (but their
        passages are never distractors either).
    n_distractors : int, default=3
    max_source_chars : int or None, default=1200
        None keeps passages whole.
    limit : int or None
        Keep the first ``limit`` examples.

    Examples
    --------
    >>> mk = lambda i, q, t: SupportClaim(i, q, (Source("1", t),), t, 0, len(t), "supported")
    >>> cs = [mk("a", "Who built the Eiffel tower?", "Gustave Eiffel's company built it."),
    ...       mk("b", "How tall is the Eiffel tower?", "It is 330 metres tall."),
    ...       mk("c", "What is rust?", "Iron oxide.")]
    >>> ex = paraphrase_examples(cs, n_distractors=1)[0]
    >>> ex.answer, sorted(s.id for s in ex.sources), ex.gold
    ("Gustave Eiffel's company built it.", ['b:1', 'own:1'], (GoldEvidence(source_id='own:1', start=0, end=34),))
    """
    if isinstance(n_distractors, bool) or not isinstance(n_distractors, int) or n_distractors < 0:
        raise InvalidInputError(f"n_distractors must be an int >= 0, got {n_distractors!r}")
    supported = [c for c in claims if c.label == "supported"]
    words = [_content_words(c.question) for c in supported]
    out: list[AttributionExample] = []
    for i, c in enumerate(supported):
        if limit is not None and len(out) >= limit:
            break
        ranked = sorted(
            (j for j in range(len(supported)) if j != i and supported[j].question.strip().lower() != c.question.strip().lower()),
            key=lambda j: (-len(words[i] & words[j]), j),
        )
        picked = ranked[:n_distractors]
        sources: list[tuple[str, Source]] = []
        for sid_prefix, owner in [("own", c), *((supported[j].id, supported[j]) for j in picked)]:
            for s in owner.sources:
                text = truncate_source(s.text, max_source_chars)
                if not text.strip():
                    continue
                sid = f"{sid_prefix}:{s.id}"
                sources.append((_order_key(c.id, sid), Source(sid, text, {"title": None, "text_offset": 0})))
        sources.sort(key=lambda x: x[0])
        srcs = tuple(s for _k, s in sources)
        gold = tuple(GoldEvidence(s.id, 0, len(s.text)) for s in srcs if s.id.startswith("own:"))
        if not gold:
            continue
        out.append(
            AttributionExample(
                id=c.id, question=c.question, sources=srcs, answer=c.claim, spans=(), gold=gold,
                meta={"label": c.label, "subset": c.meta.get("subset") if c.meta else None,
                      "distractors": [supported[j].id for j in picked]},
            )
        )
    return out


def load_paraphrase_set(
    data_dir: str | os.PathLike[str] | None = None, *, limit: int | None = None
) -> list[AttributionExample]:
    """:func:`paraphrase_examples` of ``<data_dir>/support/dev.jsonl`` (all of it is read,
    so the distractors do not depend on ``limit``)."""
    return paraphrase_examples(load_support_set(data_dir), limit=limit)


def _passage_key(text: str) -> str:
    return " ".join(text.split())


def support_sentence_examples(claims: Sequence[SupportClaim], *, limit: int | None = None) -> list[AttributionExample]:
    """The answer-sentence attribution check (``tokenshapley eval --dataset support-sentences``):
    which of its answer's passages does a real LLM answer sentence come from?

    The claims of the support set that share one answer (same question and answer text:
    ExpertQA and Stanford-GenSearch answers are judged sentence by sentence) become one span
    example:

    * answer: the answer; query: its question;
    * sources: every distinct passage (whitespace-normalised text) cited by any of its claims,
      whatever their label, ids ``p1, p2, ...`` in first-seen order, in an order fixed by a
      hash of the first claim's id and the passage id;
    * spans: each claim labelled ``supported`` (a human judged that its own passages support
      it), gold = its own passages, kept only when some passage of the answer is not its own
      (otherwise every source is right).

    The spans are whole answer sentences that mostly paraphrase their passage, and the other
    passages are on the same topic (the same answer's other references): the shape of
    human-cited answers, where a sentence must be told apart from its neighbours' sources.
    Deterministic; pure (no model).

    Examples
    --------
    >>> src = lambda t: (Source("1", t),)
    >>> a = "Paris is the capital. It has 2 million people."
    >>> cs = [SupportClaim("x", "Paris?", src("Paris is France's capital."), a, 0, 21, "supported"),
    ...       SupportClaim("y", "Paris?", src("About 2.1 million live in Paris."), a, 22, 46, "supported")]
    >>> ex = support_sentence_examples(cs)[0]
    >>> sorted(s.id for s in ex.sources), [(sp.text, sp.source_ids) for sp in ex.spans]
    (['p1', 'p2'], [('Paris is the capital.', ('p1',)), ('It has 2 million people.', ('p2',))])
    """
    groups: dict[tuple[str, str], list[SupportClaim]] = {}
    for c in claims:
        groups.setdefault((c.question, c.answer), []).append(c)
    out: list[AttributionExample] = []
    for members in groups.values():
        if limit is not None and len(out) >= limit:
            break
        passages: dict[str, str] = {}  # normalised text -> id
        texts: dict[str, str] = {}
        for c in members:
            for s in c.sources:
                key = _passage_key(s.text)
                if key and key not in passages:
                    passages[key] = f"p{len(passages) + 1}"
                    texts[passages[key]] = s.text
        spans = []
        for c in members:
            if c.label != "supported":
                continue
            own = sorted({passages[k] for k in (_passage_key(s.text) for s in c.sources) if k}, key=lambda i: int(i[1:]))
            if own and len(own) < len(passages):
                spans.append(GoldSpan(c.start, c.end, c.claim, tuple(own)))
        if not spans:
            continue
        first = members[0].id
        ids = sorted(texts, key=lambda i: _order_key(first, i))
        out.append(
            AttributionExample(
                id=first, question=members[0].question,
                sources=tuple(Source(i, texts[i], {"title": None, "text_offset": 0}) for i in ids),
                answer=members[0].answer, spans=tuple(sorted(spans, key=lambda sp: sp.start)), gold=(),
                meta={"subset": members[0].meta.get("subset") if members[0].meta else None,
                      "claims": [c.id for c in members]},
            )
        )
    return out


def load_support_sentences_set(
    data_dir: str | os.PathLike[str] | None = None, *, limit: int | None = None
) -> list[AttributionExample]:
    """:func:`support_sentence_examples` of ``<data_dir>/support/dev.jsonl`` (all of it is
    read, so an answer's claims are grouped whatever ``limit`` is)."""
    return support_sentence_examples(load_support_set(data_dir), limit=limit)
