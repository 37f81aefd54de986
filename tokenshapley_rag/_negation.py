"""Denials: the spans of a sentence that a negation denies (docs/method.md §8, "Denials").

Pure functions over text. "She never received a Nobel Prize." denies "received a Nobel
Prize"; the support rule (:mod:`~tokenshapley_rag._support`) reads a keyword held only there
as denied, and a keyword of the answer inside such a span as a denial.
"""

from __future__ import annotations

import re

__all__ = ["negation_heads", "negation_scopes"]

# Words that deny what follows them in their clause ("She never received a Nobel Prize").
_NEGATION = re.compile(
    r"\b(?:not|never|no|none|neither|nor|nobody|nothing|nowhere|cannot|\w+n['\u2019]t)\b", re.IGNORECASE
)
# What denies nothing: "not only", "not just", a negated quantity or degree ("not every
# case", "not nearly as much") and a double negative ("not unusual"); an answer's opening
# "No," (it answers the question); advice,
# "should not", "must not" ("rescuers should not delay a shock because of what they saw on
# TV" states no fact about TV).
_NOT_A_DENIAL = re.compile(
    r"not\s+(?:only|just|every|all|always|necessarily|nearly|quite|much|many|exactly|entirely|as|so|un\w+)\b"
    r"|no\s*,|(?:shouldn|mustn|needn|oughtn)['\u2019]t\b",
    re.IGNORECASE,
)
_ADVICE_BEFORE = re.compile(r"\b(?:should|must|ought\s+to|shall|need)\s+$", re.IGNORECASE)
# A denial ends with its clause: punctuation, a conjunction, or a subordinate clause or
# phrase ("would not file a petition given their experience": the experience is not denied;
# "did not open until 1883": 1883 is not).
_CLAUSE_END = re.compile(
    r"[,;:()\u2013\u2014]|\s-\s|[.!?](?:\s|$)|\b(?:and|but|although|though|while|whereas|however|yet|because|since"
    r"|due|given|as|when|which|who|whom|whose|that|if|unless|until|after|before|so)\b",
    re.IGNORECASE,
)


def negation_scopes(text: str) -> list[tuple[int, int]]:
    """The spans of ``text`` that a negation denies: the words after each negation word
    ("not", "never", "no", "didn't", ...) up to the end of its clause (a comma, semicolon,
    colon, dash or bracket, "and", "but", "although", "because", "given", "until", "which",
    ..., or the sentence's end). "Not only", "not every", "not unusual", an opening "No,"
    and advice ("should not") deny nothing.

    >>> t = "She never received a Nobel Prize, but she won the Enrico Fermi Award."
    >>> [t[a:b] for a, b in negation_scopes(t)]
    ['received a Nobel Prize']
    >>> negation_scopes("No, it is not only tall."), negation_scopes("It isn't tall.")
    ([], [(9, 13)])
    """
    scopes = []
    for m in _NEGATION.finditer(text):
        if _NOT_A_DENIAL.match(text, m.start()) or _ADVICE_BEFORE.search(text, max(0, m.start() - 16), m.start()):
            continue
        end = _CLAUSE_END.search(text, m.end())
        start = len(text) - len(text[m.end():].lstrip())  # the words after the negation
        stop = len(text[: end.start()].rstrip()) if end else len(text)
        if stop > start:
            scopes.append((start, stop))
    return scopes


# Words that may stand between a negation and the word it denies ("has not been approved",
# "did not sell any tankers", "was never officially opened").
_BEFORE_HEAD = frozenset(
    "be been being is was were are am have has had do does did ever yet actually really also even officially "
    "formally publicly a an the any".split()
)
_WORD = re.compile(r"[^\W\d_][\w'\u2019-]*")


def negation_heads(text: str, scopes: list[tuple[int, int]] | None = None) -> list[tuple[int, int]]:
    """The word each denial denies first (:func:`negation_scopes`, or ``scopes`` when the
    caller has them): the first word of its scope that is not an auxiliary, an adverb like
    "ever" or an article, usually its verb.

    >>> t = "Halvorsen Shipping did not pay a dividend, and it has never been sold."
    >>> [t[a:b] for a, b in negation_heads(t)]
    ['pay', 'sold']
    """
    heads = []
    for a, b in negation_scopes(text) if scopes is None else scopes:
        for m in _WORD.finditer(text, a, b):
            if m.group().lower() not in _BEFORE_HEAD:
                heads.append(m.span())
                break
    return heads
