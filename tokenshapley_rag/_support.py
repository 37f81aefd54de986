"""The support rule: which source sentences *hold* a keyword's value, and the keyword's status.

Pure functions over text and arrays (no model). A keyword is a unit of fact
(:func:`~tokenshapley_rag._segment.find_keywords`); what it states is compared with a
source sentence through normalised *facts*:

* numbers by value (:mod:`~tokenshapley_rag._values`: "2,850" = "2850", "-3,5" = "-3.5",
  "2.9 million" = "2,900,000"), never by unit or neighbours ("2,580 kilometres" is not held
  by "2,850 kilometres"); a count only by a count ("two" is not "second"), a rank with the
  superlative it ranks by ("the largest" is rank 1, not held by "the oldest"); a hedged
  count also by what it rounds or bounds ("about 870,000" by 870,321);
* dates by their numbers (day, year) and month (names and abbreviations folded to 1-12);
* names by their words (case, accents and a possessive "'s" folded; joiners such as "of"
  ignored; a word also by its stem): a sentence holds a name when it holds all of its words,
  or its last word while its source holds all of them ("Curie" in a page about Marie Curie);
  an acronym in capitals and a name whose initials spell it hold each other ("IPL"; how a
  name may be written is :mod:`~tokenshapley_rag._names`);
* other words by a light stem, so copied words are held whatever their case or
  inflection ("flows" = "flow", "Physics" = "physics").

:func:`keyword_status` combines that match rule with the context game's values (docs/method.md
§8): a value held only by a source that lacks the claim's subject, while the subject's source
states the same predicate with another value, is *contradicted*, never supported; so is one
taken from the wrong sentence of the right page, when the page's sentence stating the claim
holds another value in its place.
"""

from __future__ import annotations

import dataclasses
import re
import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from tokenshapley_rag._negation import negation_heads, negation_scopes
from tokenshapley_rag._segment import (
    _CJK,
    _EMPHASIS_UNDERSCORE,
    _INVISIBLE,
    _NON_KEYWORDS,
    Keyword,
    composed,
    find_keywords,
    is_rank_superlative,
    value_spans,
    word_pieces,
)
from tokenshapley_rag._measures import (
    DIMENSIONS,
    Measure,
    derived_change,
    fraction_measures,
    measures,
    rounds_measure,
    same_measure,
    same_unit_and_value,
)
from tokenshapley_rag._names import (
    DOTTED_INITIALS,
    aliases,
    fold,
    initials,
    initials_agree,
    is_acronym,
    is_dotted_acronym,
    name_words,
    period_words,
    renumbered,
    spelled_acronyms,
    stem_aliases,
    word_aliases,
)
from tokenshapley_rag._values import (
    MONTHS,
    PLAIN_NUMBER,
    all_values,
    cardinal_values,
    date_readings,
    is_year,
    near_value,
    rank_values,
    spell_numeric_dates,
    year_range,
)

__all__ = [
    "SentenceFacts",
    "KeywordFacts",
    "sentence_facts",
    "keyword_facts",
    "holding_mask",
    "holding_masks",
    "light_stem",
    "STATUSES",
    "VERDICTS",
    "WORD_ANCHOR_MINIMUM",
]

STATUSES = ("supported", "unsupported", "contradicted")
VERDICTS = ("supported", "partly", "unsupported", "contradicted")
VALUE_KINDS = ("number", "date", "name")
# The rival states the claim's predicate "as well as" a holder when its predicate game value
# is at least this share of the holder's: a shared predicate ("was born in") is played
# almost equally by both, and which sentence wins its token games then depends on the
# words around it, not on the claim (chosen on dev, docs/method.md §8).
PREDICATE_TOLERANCE = 0.75
# A value is supported only when a source holding it states the claim's predicate at least
# this share as well as the sentence that states it best: a name that a source holds in an
# unrelated sentence ("Samoa" for "Melbourne" in "games were played in Melbourne and
# Sydney") leaves the predicate to another source (chosen on dev, docs/method.md §8).
PREDICATE_AGREEMENT = 0.3
# ... once some sentence states the claim's predicate: its predicate value is at least this
# share of the predicate game's total weight. Below it the predicate is generic ("It was
# completed on", which a page about another tower states as well) or absent (a bare answer,
# "the President of India"), and the best sentence is noise, not a better source (chosen on
# dev, docs/method.md §8).
PREDICATE_MINIMUM = 0.2
# A subject with no other value in its claim is checked against the documents holding the
# most of the claim's words only when they hold at least this many of them: "Lise Meitner
# discovered polonium and radium." (Curie's page holds three), not "The Danube is 1,000
# miles long." (only the Rhine's page says "long": one word does not outweigh a name).
WORD_ANCHOR_MINIMUM = 2

_WORD = re.compile(r"\w+")


_VOWELS = frozenset("aeiouy")
# Endings whose final e English drops before -ing / -ed whatever precedes them
# (believe / believing, trouble / troubled, continue / continuing).
_SOFT_E = ("ce", "ge", "se", "ve", "ze", "ue", "le", "re")


def _drops_e(w: str) -> bool:
    """Whether the final e of ``w`` is one English drops before -ing / -ed: after a soft
    ending, or after one consonant that follows one vowel (make / making). Not after a vowel
    pair ("Maine" is not "main")."""
    if w.endswith(_SOFT_E):
        return True
    return w[-2] not in _VOWELS and w[-3] in _VOWELS and w[-4] not in _VOWELS


# Irregular past forms and participles, folded to their verb before stemming: "won" is held
# by "wins", "written" by "writes", "held" by "holds". (Only forms that are rarely another
# word: not "left", "rose", "saw", "found", ...)
_IRREGULAR = {
    form: verb
    for verb, forms in {
        "see": "seen", "write": "wrote written", "take": "took taken", "give": "gave given", "know": "knew known",
        "begin": "began begun", "build": "built", "hold": "held", "win": "won", "lose": "lost", "pay": "paid",
        "sell": "sold", "tell": "told", "think": "thought", "bring": "brought", "buy": "bought", "catch": "caught",
        "teach": "taught", "fight": "fought", "seek": "sought", "keep": "kept", "meet": "met", "run": "ran",
        "speak": "spoke spoken", "choose": "chose chosen", "rise": "risen", "fall": "fell fallen", "grow": "grew grown",
        "draw": "drew drawn", "fly": "flew flown", "throw": "threw thrown", "wear": "wore worn", "break": "broke broken",
        "freeze": "froze frozen", "steal": "stole stolen", "drive": "drove driven", "ride": "rode ridden",
        "eat": "ate eaten", "go": "went gone", "come": "came", "become": "became", "sing": "sang sung",
        "swim": "swam swum", "sink": "sank sunk", "shoot": "shot", "feel": "felt", "send": "sent", "spend": "spent",
        "lend": "lent", "hide": "hid hidden", "forget": "forgot forgotten", "get": "got gotten", "sit": "sat",
        "stand": "stood", "understand": "understood", "dig": "dug", "strike": "struck", "swear": "swore sworn",
        "shake": "shook shaken", "wake": "woke woken", "forbid": "forbade forbidden", "lead": "led", "flee": "fled",
        "feed": "fed", "bleed": "bled", "breed": "bred", "slay": "slew slain", "tear": "tore torn",
    }.items()
    for form in forms.split()
}


def light_stem(word: str) -> str:
    """A conservative inflection folder for English (plural, -ed, -ing, -ly, possessive;
    irregular past forms by their verb).

    >>> [light_stem(w) for w in ["flows", "flowed", "flowing", "cities", "making", "Physics", "long", "running", "bus"]]
    ['flow', 'flow', 'flow', 'city', 'mak', 'physic', 'long', 'run', 'bus']
    >>> [light_stem(w) for w in ["believe", "believing", "troubled", "trouble", "Maine", "main"]]
    ['believ', 'believ', 'troubl', 'troubl', 'maine', 'main']
    >>> [light_stem(w) for w in ["won", "wins", "written", "writes", "held", "holding", "aged", "age", "used", "uses"]]
    ['win', 'win', 'writ', 'writ', 'hold', 'hold', 'age', 'age', 'use', 'use']
    """
    w = fold(word)
    w = _IRREGULAR.get(w, w)
    for suffix in ("'s", "\u2019s"):
        if w.endswith(suffix):
            w = w[: -len(suffix)]
    if len(w) > 4 and w.endswith("ies"):
        w = w[:-3] + "y"
    elif len(w) > 3 and w.endswith("sses"):
        w = w[:-2]
    elif len(w) > 3 and w.endswith("s") and not w.endswith(("ss", "us", "is")):
        w = w[:-1]
    if len(w) == 4 and w.endswith("ed") and w[1] != "e" and w not in ("shed", "sled"):
        w = w[:3]  # aged / age, used / use, died / die: four letters, the -ed rule below needs five
    for suffix in ("ing", "ed", "ly"):
        if len(w) > len(suffix) + 2 and w.endswith(suffix):
            w = w[: -len(suffix)]
            if len(w) > 2 and w[-1] == w[-2] and w[-1] not in "aeiouls":
                w = w[:-1]  # running -> run
            break
    if len(w) > 3 and w.endswith("e") and _drops_e(w):
        w = w[:-1]  # make / making
    return w


@dataclass(frozen=True, slots=True)
class SentenceFacts:
    """What a sentence states, normalised for the match rule."""

    numbers: frozenset[str]  # number values (number_value)
    months: frozenset[int]
    words: frozenset[str]  # folded words
    stems: frozenset[str]  # light stems of the words
    names: tuple[str, ...]  # folded names (their words joined by a space)
    acronyms: frozenset[str] = frozenset()  # folded words written in capitals ("IPL" -> "ipl")
    # The acronyms its names may be written as ("indian premier league" -> "ipl"; :func:`spelled_acronyms`).
    spelled: frozenset[str] = frozenset()
    # Each date's (year, month) as written together ("September 29, 2017" -> ("2017", 9));
    # year None for a date that names a month and no year ("from January 17 to ...").
    year_months: frozenset[tuple[str | None, int]] = frozenset()
    # The number values written as counts somewhere in the sentence (cardinal_values):
    # "two" is not held by a sentence whose only 2 is "second-longest".
    cardinals: frozenset[str] = frozenset()
    # The values of its number keywords (not its dates), as counts and as ranks: what a
    # sentence states as another count or another rank (states_other_value).
    counts: frozenset[str] = frozenset()
    ranks: frozenset[str] = frozenset()
    # The number values of its date keywords: what it states as another date.
    dates: frozenset[str] = frozenset()
    # The folded words, their light stems and the number values it denies (in a negation's
    # scope, :func:`negation_scopes`): "She never received a Nobel Prize." denies "received"
    # and "Nobel Prize".
    denied: frozenset[str] = frozenset()
    # The light stem of the word each of its denials denies first, usually the verb
    # (:func:`~tokenshapley_rag._negation.negation_heads`): "pay" in "It did not pay a dividend."
    denied_heads: frozenset[str] = frozenset()
    # Its measurements (:func:`~tokenshapley_rag._measures.measures`): a number with a unit
    # the match rule converts ("330 metres" holds "1,083 feet").
    measures: frozenset[Measure] = frozenset()
    # Its number keywords written as two values joined by a dash, in order ("4–2"): a score
    # or a range, which the same values the other way round ("2-4") do not match.
    pairs: frozenset[tuple[str, ...]] = frozenset()
    # Each number, date and name with what stands beside it (:func:`value_neighbours`), as
    # ``(kind, neighbour, value)``: its keyword kind, and its values (a number or a date) or
    # its folded words (a name). "Maria Gómez, aged 54" gives ("number", "<age", ("54",))
    # and ("name", ">age", ("maria gomez",)). A sentence stating another value where the answer
    # states its own ("aged 45") is a rival for it (:func:`keyword_status`).
    placed: frozenset[tuple[str, str, tuple[str, ...]]] = frozenset()
    # Its first word, folded, when written with a capital (else ""), and the words it writes
    # in lower case: a word that the sources write only capitalised, opening a source's first
    # sentence, is a name (:func:`opens_like_a_name`: "Inception is a 2010 film ...").
    opening: str = ""
    lowercase: frozenset[str] = frozenset()
    # The values each clause states of its own subject, in a sentence of two or more
    # clauses about different names (:func:`clause_values`), as ``(subject, kind, values)``:
    # the light stem of the subject's last word, and a number's or a date's values.
    # "BRCA1 is on chromosome 17, and BRCA2 on chromosome 13." gives ("brca1", "number",
    # ("17",)) and ("brca2", "number", ("13",)).
    clauses: frozenset[tuple[str, str, tuple[str, ...]]] = frozenset()
    # The name a sentence opening with a personal pronoun stands for, when it is set
    # (:func:`with_implied_subjects`): its source's topic, the first name of the source's
    # first sentence ("It is 330 metres tall." on the Eiffel Tower's page). A sentence states
    # it as another name (:func:`states_other_value`); it holds nothing by it.
    implied: tuple[str, ...] = ()
    # Each capitalised word and the lowercase word after it as an abbreviated species, folded
    # ("Escherichia coli" -> "e coli"): a sentence naming a species holds its abbreviation
    # ("E. coli"). Only looked up for such a name, so "Paris hosts" -> "p hosts" matters not.
    species: frozenset[str] = frozenset()
    # Each clause of a sentence of two or more clauses stating values (:func:`worded_clauses`),
    # whatever its subject: the light stems of its words (no value's, no stopword), all its
    # folded words, and its numbers', dates' and names' values as ``(kind, values)``. "The
    # right to erasure is in Article 17, and the right to data portability is in Article
    # 20." gives ({"right", "erasur"}, {"the", "right", ..., "17"}, {("name", ("article",)),
    # ("number", ("17",))}) and ({"right", "data", "portability"}, ...).
    worded: tuple[tuple[frozenset[str], frozenset[str], frozenset[tuple[str, tuple[str, ...]]]], ...] = ()
    # The facts above that the match rule looks a keyword up by, as 32-bit keys
    # (:func:`fact_keys`), derived once per sentence: :func:`holding_masks` finds the
    # sentences that may hold a keyword from them instead of testing every sentence.
    keys: np.ndarray = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "keys", fact_keys(self))


def sentence_facts(text: str) -> SentenceFacts:
    """The :class:`SentenceFacts` of one sentence.

    >>> f = sentence_facts("Lise Meitner was born in Vienna on 7 November 1878.")
    >>> sorted(f.numbers), sorted(f.months), f.names
    (['1878', '7'], [11], ('lise meitner', 'vienna'))
    """
    text = spell_numeric_dates(_EMPHASIS_UNDERSCORE.sub(" ", _INVISIBLE.sub("", composed(text))))
    pieces = word_pieces(text)  # CJK: characters and neighbour pairs
    words = [fold(w) for w in pieces]
    # Dotted initials are also the acronym they spell, wherever they stand ("The U.S.
    # Army" holds "US").
    dotted = [fold(m.group().replace(".", "")) for m in DOTTED_INITIALS.finditer(text) if m.group().isupper()]
    words += dotted
    keywords = find_keywords(text, skip_markup=False)  # a source's heading names its topic
    names = tuple(" ".join(name_words(k.text)) for k in keywords if k.kind == "name" and name_words(k.text))
    values = all_values(text)
    scopes = negation_scopes(text)
    return SentenceFacts(
        numbers=frozenset(v for _, _, v in values),
        months=frozenset(MONTHS[w.rstrip(".")] for w in words if w.rstrip(".") in MONTHS and len(w) >= 3),
        words=frozenset(words),
        stems=frozenset(light_stem(w) for w in words),
        names=names,
        acronyms=frozenset(
            [fold(w) for w in _WORD.findall(text) if w.isupper() and is_acronym(w)] + dotted
        ),
        spelled=spelled_acronyms(text),
        year_months=frozenset(pair for k in keywords if k.kind == "date" for pair in _year_months(k.text)),
        cardinals=cardinal_values(text),
        counts=frozenset(v for k in keywords if k.kind == "number" for v in cardinal_values(k.text)),
        ranks=frozenset(v for k in keywords if k.kind == "number" for v in rank_values(k.text)),
        dates=frozenset(v for k in keywords if k.kind == "date" for _, _, v in all_values(k.text)),
        denied=_denied(text, scopes),
        denied_heads=frozenset(light_stem(fold(text[a:b])) for a, b in negation_heads(text, scopes)),
        measures=frozenset(m for _, _, m in measures(text, values=values)) | fraction_measures(text),
        pairs=frozenset(p for k in keywords if k.kind == "number" and (p := _dash_pair(k.text)) is not None),
        placed=_placed(keywords, values),
        opening=words[0] if pieces and pieces[0][:1].isupper() else "",
        lowercase=frozenset(w for piece, w in zip(pieces, words) if piece[:1].islower()),
        clauses=clause_values(text, keywords, values),
        species=frozenset(fold(f"{m[1]} {m[2]}") for m in _SPECIES.finditer(text)),
        worded=worded_clauses(text, keywords, values),
    )


_SPECIES = re.compile(r"(?<![\w'’\-])([A-Z])[a-z]+\s+([a-z]{3,})(?![\w'’\-])")


# Where a source sentence goes on to another subject's clause: ", and", ", while", ", whereas",
# ", but", a semicolon. Narrower than the answer's claims (``_citations.CLAUSE_BREAK``, which
# also breaks at a bare "and" or "than" after a claim that said something): a source's "Lise
# Meitner and Otto Hahn discovered protactinium in 1917" is one clause about both.
_CLAUSE_BREAK = re.compile(r",\s+(?:and|while|whereas|but)\s+|;\s+|\s+(?:while|whereas)\s+")


def clause_values(
    text: str, keywords: Sequence[Keyword], values: Sequence[tuple[int, int, str]]
) -> frozenset[tuple[str, str, tuple[str, ...]]]:
    """:attr:`SentenceFacts.clauses`: the numbers and dates of each clause of ``text`` with
    the clause's subject, its first citable keyword (after any dates: "In 2019, Apple ...")
    when that is a name or a capitalised word opening the sentence. Empty unless two
    clauses have subjects, and different ones.

    >>> sorted(clause_values(*(lambda t: (t, find_keywords(t), all_values(t)))(
    ...     "Uranus has 28 known moons, and Neptune has 16.")))
    [('neptun', 'number', ('16',)), ('uranus', 'number', ('28',))]
    """
    bounds = [0] + [m.end() for m in _CLAUSE_BREAK.finditer(text)] + [len(text) + 1]
    if len(bounds) < 3:
        return frozenset()
    out = set()
    subjects = set()
    for a, b in zip(bounds, bounds[1:]):
        inside = [k for k in keywords if a <= k.start < b and k.citable]
        lead = next((k for k in inside if k.kind != "date"), None)
        if lead is None or not (lead.kind == "name" or (a == 0 and lead.text[:1].isupper())):
            continue
        subject = light_stem(fold(lead.text.split()[-1]))
        subjects.add(subject)
        for k in inside:
            if k.kind in ("number", "date") and (held := _placed_value(k, values)):
                out.add((subject, k.kind, held))
    return frozenset(out) if len(subjects) > 1 else frozenset()


def worded_clauses(
    text: str, keywords: Sequence[Keyword], values: Sequence[tuple[int, int, str]]
) -> tuple[tuple[frozenset[str], frozenset[str], frozenset[tuple[str, tuple[str, ...]]]], ...]:
    """:attr:`SentenceFacts.worded`: each clause's words (light stems of its word keywords,
    and its numbers' and dates' values as ``#value``: "type 1" is not "type 2"), all its
    folded words, and its values (its numbers', dates' and names' :func:`_placed_value`),
    when two clauses or more state a value; else empty.

    >>> t = "The right to erasure is in Article 17, and the right to data portability is in Article 20."
    >>> [(sorted(w), sorted(v)) for w, _, v in worded_clauses(t, find_keywords(t), all_values(t))]
    [(['#17', 'erasur', 'right'], [('name', ('article',)), ('number', ('17',))]), (['#20', 'data', 'portability', 'right'], [('name', ('article',)), ('number', ('20',))])]
    """
    bounds = [0] + [m.end() for m in _CLAUSE_BREAK.finditer(text)] + [len(text) + 1]
    if len(bounds) < 3:
        return ()
    out = []
    for a, b in zip(bounds, bounds[1:]):
        inside = [k for k in keywords if a <= k.start < b]
        stated = frozenset(
            (k.kind, held) for k in inside if k.kind in VALUE_KINDS and (held := _placed_value(k, values))
        )
        out.append((
            frozenset(light_stem(fold(k.text)) for k in inside if k.kind == "word")
            | {f"#{v}" for k in inside if k.kind in ("number", "date") for v in _placed_value(k, values)},
            frozenset(fold(w) for k in inside for w in _WORD.findall(k.text)),
            stated,
        ))
    return tuple(out) if sum(1 for *_, stated in out if stated) > 1 else ()


def _placed(
    keywords: Sequence[Keyword], values: Sequence[tuple[int, int, str]]
) -> frozenset[tuple[str, str, tuple[str, ...]]]:
    """:attr:`SentenceFacts.placed` of a sentence from its keywords and :func:`all_values`."""
    out = set()
    for k, neighbours in zip(keywords, value_neighbours(keywords)):
        if neighbours:
            held = _placed_value(k, values)
            out.update((k.kind, stem, held) for stem in neighbours)
    return frozenset(out)


# Words a value or a name is not beside a word across: a pronoun, which may stand for
# another subject ("Together with Otto Hahn she discovered protactinium": Otto Hahn did
# not), and a conjunction, which starts another clause ("It rises in the Swiss Alps and
# flows into the North Sea": the Alps do not flow).
_NOT_ACROSS = frozenset("i you he she it we they and or but".split())


def value_neighbours(keywords: Sequence[Keyword]) -> list[tuple[str, ...]]:
    """For each number, date or name keyword, what stands beside it in its sentence: the
    citable keywords right before it and right after it, when no pronoun or conjunction
    stands between, that are words or names (for a name, also numbers or dates). A word is
    kept as its light stem (of its last word before, its first after) marked with its side
    ("<" before, ">" after); a name as its light stem and a number or a date as its values
    ("#"), both marked "=" whatever the side. () for any other keyword. (Opening the
    sentence was tried as a place too: a page's topic opens many sentences that state other
    claims.)

    >>> [n for n in value_neighbours(find_keywords("Maria Gómez, aged 54, has led the bank.")) if n]
    [('>age',), ('<age', '>lead')]
    >>> [n for n in value_neighbours(find_keywords("Neil Armstrong was the first person.")) if n]
    [('=#1',), ('=armstrong', '>person')]
    >>> value_neighbours(find_keywords("It was founded in 1865 in Tampere."))[4:]
    [('<found', '=tamper'), (), ('=#1865',)]
    >>> [n for n in value_neighbours(find_keywords("Together with Otto Hahn she discovered it.")) if n]
    [('<together',)]

    A name after "by" and a word also stands where that word's subject does (a passive's
    agent):

    >>> value_neighbours(find_keywords("It was developed by Edward Jenner."))[4]
    ('<develop', '>develop')
    """
    out: list[tuple[str, ...]] = []
    cited = [i for i, k in enumerate(keywords) if k.citable]
    rank = {n: i for i, n in enumerate(cited)}
    for n, k in enumerate(keywords):
        if k.kind not in VALUE_KINDS:
            out.append(())
            continue
        i = rank[n]
        found = []
        sides = [("<", cited[i - 1] if i > 0 else None, -1), (">", cited[i + 1] if i + 1 < len(cited) else None, 0)]
        # A name's place may be a number ("Neil Armstrong was the first person"); a value's
        # is a word or a name.
        kinds = ("word", "name", "number", "date") if k.kind == "name" else ("word", "name")
        for side, m, word in sides:
            if m is None or keywords[m].kind not in kinds:
                continue
            between = keywords[m + 1 : n] if side == "<" else keywords[n + 1 : m]
            if any(b.text.lower() in _NOT_ACROSS for b in between):
                continue
            # A word says which side it stands on ("followed" before "Armstrong" is not after
            # "Buzz Aldrin"); a name or a value does not ("in Tampere in 1989", "in 1989 in
            # Tampere").
            if keywords[m].kind == "name":
                found.append("=" + light_stem(fold(keywords[m].text.split()[word])))
            elif keywords[m].kind == "word":
                found.append(side + light_stem(fold(keywords[m].text.split()[word])))
                if side == "<" and k.kind == "name" and any(b.text.lower() == "by" for b in between):
                    # A passive's agent stands where the active's subject does: "developed by
                    # Edward Jenner" places him as "Edward Jenner developed" does.
                    found.append(">" + light_stem(fold(keywords[m].text.split()[word])))
            else:
                found.append("=#" + ",".join(_placed_value(keywords[m])))
        out.append(tuple(found))
    return out


def _placed_value(k: Keyword, values: Sequence[tuple[int, int, str]] | None = None) -> tuple[str, ...]:
    """What a number, date or name keyword states, as :attr:`SentenceFacts.placed` keeps
    it: a name's folded words; a number's or a date's values (from ``values``, the
    sentence's :func:`all_values`, when given)."""
    if k.kind == "name":
        return (" ".join(name_words(k.text)),)
    if values is None:
        return tuple(sorted({v for _, _, v in all_values(k.text)}))
    return tuple(sorted({v for a, _, v in values if k.start <= a < k.end}))


_DASH_PAIR = re.compile(r"[^\d]*\d[\d.,]*\s?[-–—]\s?[^\d]*\d|\d{4}/\d{2}(?!\d)")


def _dash_pair(text: str) -> tuple[str, ...] | None:
    """The two values of a number keyword written "X-Y" ("4–2", "$700-$1000", and a season
    "2019/20"), in order."""
    if not _DASH_PAIR.match(text):
        return None
    values = tuple(v for _, _, v in all_values(text))
    return values if len(values) == 2 else None


def _denied(text: str, scopes: list[tuple[int, int]]) -> frozenset[str]:
    """The facts ``text`` states inside its negation scopes (:func:`negation_scopes`):
    folded words, light stems, values."""
    out: set[str] = set()
    for a, b in scopes:
        part = text[a:b]
        words = [fold(w) for w in word_pieces(part)]
        out.update(words)
        out.update(light_stem(w) for w in words)
        out.update(v for _, _, v in all_values(part))
    return frozenset(out)


def denied_by(k: KeywordFacts, f: SentenceFacts) -> bool:
    """Whether sentence ``f`` holds keyword ``k`` inside a negation ("Nobel Prize" in "She
    never received a Nobel Prize."): every fact ``k`` is looked up by is in a denied span.

    >>> k = keyword_facts("Nobel Prize", "name")
    >>> [denied_by(k, sentence_facts(t)) for t in ("She never received a Nobel Prize.", "She won a Nobel Prize.")]
    [True, False]
    """
    if k.kind in ("number", "date") and k.numbers:
        parts = k.numbers
    elif k.kind == "name":
        parts = frozenset(k.words)
    else:
        parts = k.stems
    return bool(parts) and parts <= f.denied


def _year_months(date: str) -> set[tuple[str | None, int]]:
    """The (year, month) pairs one date states: its years (four-digit values) with each of its
    months, or (None, month) when it names months and no year; empty without a month name.

    >>> sorted(_year_months("September 29, 2017")), sorted(_year_months("January 17"))
    ([('2017', 9)], [(None, 1)])
    """
    months = {MONTHS[w] for w in (fold(x).rstrip(".") for x in _WORD.findall(date)) if w in MONTHS and len(w) >= 3}
    years = {v for _, _, v in value_spans(date) if is_year(v)} or {None}
    return {(y, m) for y in years for m in months}


@dataclass(frozen=True, slots=True)
class KeywordFacts:
    """The facts a sentence must hold to hold a keyword (see :func:`keyword_facts`)."""

    kind: str
    numbers: frozenset[str]
    months: frozenset[int]
    words: tuple[str, ...]  # name words, in order
    stems: frozenset[str]
    # The name's words written in capitals ("US" and "CDC" in "US CDC"): each may be held as
    # an acronym of a source name (:attr:`SentenceFacts.spelled`).
    capitals: frozenset[str] = frozenset()
    # A number keyword's values written as counts ("two", "2,850"), which a sentence must
    # hold as counts too (cardinal_values); a date's are left out ("5 May" = "5th May").
    cardinals: frozenset[str] = frozenset()
    # A rank's dimension, the superlative it ranks by ("largest" in "the largest" and in
    # "second-largest"), as light stems: rank 1 by age is not rank 1 by size.
    dimensions: frozenset[str] = frozenset()
    # How the answer qualifies a count (:func:`number_hedge`): "" (exact), "about", "at
    # least" or "at most". A hedged count is also held by the values it rounds or bounds.
    hedge: str = ""
    # A number with a unit the match rule converts (:func:`~tokenshapley_rag._measures.measures`,
    # under ``hedge``): also held by a sentence measuring the same in another unit.
    measure: Measure | None = None
    # A decade's or a century's years, first and last (:func:`~tokenshapley_rag._values.year_range`):
    # "the 1880s" is held by a sentence dating something 1889.
    years: tuple[int, int] | None = None
    # Its two values when written "X-Y" (a score or a range: :func:`_dash_pair`).
    pair: tuple[str, ...] | None = None
    # A slashed date whose day and month could be swapped ("03/04/2022"): its facts as
    # written and those of both dates it may be, any of which holds it.
    readings: tuple[KeywordFacts, ...] = ()
    # A measurement the answer states as a change ("rose by $400 million", "up 10.5%":
    # :func:`~tokenshapley_rag._values.states_change`): also held by a sentence stating two
    # measurements it is the change between (:func:`~tokenshapley_rag._measures.derived_change`).
    change: bool = False
    # The light stem of each name word (in ``words``' order), derived once: every sentence
    # of the context is checked against it (:func:`holding_mask`).
    word_stems: tuple[str, ...] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "word_stems", tuple(light_stem(w) for w in self.words))


def keyword_facts(text: str, kind: str, hedge: str = "", change: bool = False) -> KeywordFacts:
    """What holding the keyword ``text`` of ``kind`` requires; ``hedge`` (:func:`number_hedge`)
    qualifies a count ("about 870,000"), and is ignored for anything else; ``change``: the
    answer states the number as a change (:func:`states_change`; a measurement's only).

    >>> k = keyword_facts("2,580 kilometres", "number"); sorted(k.numbers)
    ['2580']
    >>> keyword_facts("Golden Gate Bridge's", "name").words
    ('golden', 'gate', 'bridge')
    """
    text = _INVISIBLE.sub("", composed(text))
    if kind == "date":
        text = spell_numeric_dates(text)
    values = all_values(text) if kind in ("number", "date") else []
    numbers = frozenset(v for _, _, v in values)
    if kind == "number":
        numbers |= rank_values(text)  # "largest", cut from its "the" by find_keywords, is rank 1
    months = frozenset(
        MONTHS[w] for w in (fold(x).rstrip(".") for x in _WORD.findall(text)) if w in MONTHS and len(w) >= 3
    ) if kind == "date" else frozenset()
    words = tuple(name_words(text)) if kind == "name" else ()
    if kind == "name" and is_dotted_acronym(text):
        words = (fold(text.strip().replace(".", "")),)  # "U.S." is the acronym "us"
    stems = frozenset(light_stem(w) for w in word_pieces(text) if fold(w) not in _NON_KEYWORDS)
    cardinals = cardinal_values(text) if kind == "number" else frozenset()
    dimensions = frozenset(
        light_stem(w) for w in word_pieces(text) if is_rank_superlative(w)
    ) if kind == "number" else frozenset()
    hedge = hedge if cardinals and all(PLAIN_NUMBER.fullmatch(v) for v in cardinals) else ""
    measured = measures(text, hedge, values) if kind == "number" and len(numbers) == 1 else []
    measure = measured[0][2] if len(measured) == 1 else None
    years = year_range(text) if kind == "date" else None
    pair = _dash_pair(text) if kind == "number" else None
    capitals = frozenset(
        fold(w) for w in _WORD.findall(text.replace(".", "")) if w.isupper() and is_acronym(w)
    ) & set(words) if kind == "name" else frozenset()
    facts = KeywordFacts(
        kind, numbers, months, words, stems, capitals, cardinals, dimensions, hedge, measure, years, pair,
        change=change and measure is not None,
    )
    readings = [keyword_facts(t, "date") for t in date_readings(text)] if kind == "date" else []
    # An ambiguous date is held as written, or as either date it may be.
    return dataclasses.replace(facts, readings=(facts, *readings)) if readings else facts


def _holds(k: KeywordFacts, f: SentenceFacts) -> bool:
    if k.readings:
        return any(_holds(reading, f) for reading in k.readings)
    if k.kind in ("number", "date"):
        if not k.numbers and not k.months:
            return _stems_held(k.stems, f)
        if k.years is not None:  # a decade or a century: the same one, or a date within it
            return k.numbers <= f.dates or any(is_year(v) and k.years[0] <= int(v) <= k.years[1] for v in f.dates)
        if k.pair is not None and k.pair not in f.pairs and k.pair[::-1] in f.pairs:
            return False  # "2-4" is not held by "4–2"
        exact = (
            k.numbers <= f.numbers and k.cardinals <= f.cardinals and k.dimensions <= f.stems
            and k.months <= f.months and _dates_agree(k, f)
        )
        if k.measure is not None:
            # The same measurement in another unit ("1,083 feet" in "330 metres tall") or
            # rounded in its own ("88 square kilometres" in "87.88 km²"); the same number in
            # another unit is another measurement ("2,850 miles" is not held by "2,850
            # kilometres").
            measured = [m for m in f.measures if m[0] == k.measure[0]]
            if any(same_measure(k.measure, m) or rounds_measure(k.measure, m) for m in measured):
                return True
            if k.change and derived_change(k.measure, tuple(f.measures)):  # any pair: order-free
                return True  # "rose by $400 million" in "$4.2 billion, up from $3.8 billion"
            if exact and measured and not any(same_unit_and_value(k.measure, m) for m in measured):
                return False
        if exact:
            return True
        if not k.hedge:
            return False
        return k.dimensions <= f.stems and all(
            any(near_value(n, v, k.hedge) for v in f.cardinals) for n in k.cardinals
        )
    if k.kind == "name":
        if not k.words:
            return False
        # A name's words by their stem ("White Sport Coat" holds "White Sports Coat"); a
        # word in capitals as an acronym ("US" in "The U.S. Army", "CDC" for "Centers for
        # Disease Control and Prevention"), and only so when it is also a common word ("US"
        # is not held by "us", nor "WHO" by "who").
        if all(
            (w in f.acronyms or w in f.spelled) if w in k.capitals and w in _NON_KEYWORDS
            else w in f.words or stem in f.stems or (w in k.capitals and w in f.spelled)
            or any(all(x in f.words for x in alias) for alias in word_aliases(w))  # "CEO": "chief executive"
            for w, stem in zip(k.words, k.word_stems)
        ) and not _inside_longer_model(k.words, f.names):
            return True
        # A species under its abbreviated genus ("E. coli" in "Escherichia coli is ...").
        if len(k.words) == 2 and len(k.words[0]) == 1 and " ".join(k.words) in f.species:
            return True
        # A first name written as its initial, here or there ("L. Chen", "Laura Chen").
        if len(k.words) > 1 and any(initials_agree(k.words, name.split()) for name in f.names):
            return True
        # The same name numbered the other way ("World War II", "Second World War").
        if (variant := renumbered(k.words)) is not None and " ".join(variant) in f.names:
            return True
        # A quarter or a half of a year by its code ("Q3": "the third quarter").
        if (period := period_words(k.words)) is not None and all(w in f.words for w in period):
            return True
        # Another name of the same thing ("Oscars", "Academy Awards").
        if any(all(w in f.words for w in alias) for alias in aliases(k.words)):
            return True
        # An expansion is held by its acronym ("Indian Premier League", "IPL").
        return len(k.words) > 1 and initials(" ".join(k.words)) in f.acronyms
    return _stems_held(k.stems, f)


def _stems_held(stems: frozenset[str], f: SentenceFacts) -> bool:
    """A word's light stems, each held as written or as what it counts ("population" by
    "inhabitants": :func:`~tokenshapley_rag._names.stem_aliases`)."""
    return bool(stems) and all(s in f.stems or any(a in f.stems for a in stem_aliases(s)) for s in stems)


def abbreviated_species(facts: Iterable[SentenceFacts]) -> frozenset[str]:
    """The species that ``facts`` name under an abbreviated genus, folded ("e coli" for "E.
    coli"): where an answer's "Escherichia coli" is one name
    (:func:`~tokenshapley_rag._citations.species_names`).

    >>> facts = [sentence_facts("E. coli and H. pylori are bacteria."), sentence_facts("Paris hosts.")]
    >>> sorted(abbreviated_species(facts))
    ['e coli', 'h pylori']
    """
    return frozenset(
        name for f in facts for name in f.names if len(name) > 2 and name[1] == " " and name.count(" ") == 1
    )


def _inside_longer_model(words: tuple[str, ...], names: Sequence[str]) -> bool:
    """Whether a numbered name ("iPhone 15 Pro", "Apollo 12") stands in ``names`` only at
    the start of longer ones: "iPhone 15 Pro Max" is another model, and "iPhone 15 Pro" no
    fact of it.

    >>> _inside_longer_model(("iphone", "15", "pro"), ["iphone 15 pro max"])
    True
    >>> _inside_longer_model(("iphone", "15", "pro"), ["iphone 15 pro max", "iphone 15 pro"])
    False
    """
    if not any(w.isdigit() for w in words):
        return False
    n = len(words)
    starting = [parts for parts in (name.split() for name in names) if tuple(parts[:n]) == words]
    return bool(starting) and all(len(parts) > n for parts in starting)


def _dates_agree(k: KeywordFacts, f: SentenceFacts) -> bool:
    """Whether a date keyword's years and months are written together in the sentence:
    "September 29, 2018" is not held by "September 29, 2017 ... February 2, 2018", which has
    its parts one by one, nor "May 1990" by "May 1991 ... in 1990". A part the sentence writes
    alone is left open: a year with no month, a month with no year (a range's first date,
    "from January 17 to February 22, 1916").
    """
    if k.kind != "date" or not k.months or not f.year_months:
        return True
    years = {v for v in k.numbers if is_year(v)}
    if not years:
        return True
    for year in years:
        for month in k.months:
            with_month = {y for y, m in f.year_months if m == month}
            with_year = {m for y, m in f.year_months if y == year}
            if (year, month) in f.year_months or None in with_month:
                continue
            if with_month or with_year:  # the sentence dates this month or this year otherwise
                return False
    return True


def _key(tag: str, value: str) -> int:
    """The 32-bit key of one tagged fact: its CRC-32, the same in every process (a
    sentence's keys may be pickled with its facts). Two facts may share a key; the keys
    only narrow the sentences down, and :func:`_holds` decides."""
    return zlib.crc32(f"{tag}:{value}".encode("utf-8", "surrogatepass"))


def fact_keys(f: SentenceFacts) -> np.ndarray:
    """The keys (:func:`_key`) of the facts a keyword is looked up by: numbers (``n``),
    months (``m``), words (``w``), stems (``s``), the acronyms its names may be written as
    (``i``: :func:`~tokenshapley_rag._names.spelled_acronyms`), its words in capitals (``a``)
    and the dimensions it measures (``d``). A sentence that holds a keyword has
    every key of one of the keyword's requirements (:func:`_requirements`)."""
    tagged: list[tuple[str, Iterable[str]]] = [
        ("n", f.numbers), ("m", map(str, f.months)), ("w", f.words), ("s", f.stems),
        ("i", f.spelled), ("a", f.acronyms), ("d", {m[0] for m in f.measures}),
    ]
    return np.array([_key(tag, v) for tag, values in tagged for v in values], dtype=np.uint32)


def _requirements(k: KeywordFacts) -> list[list[tuple[int, ...]]]:
    """What a sentence needs in order to hold ``k`` (:func:`_holds`), as keys: a list of
    alternatives, each a list of groups of keys, every group met by one of its keys.
    Necessary, not sufficient: the keys of a sentence holding ``k`` meet some alternative.
    No alternative: no sentence holds ``k``."""
    if k.readings:
        return [alternative for reading in k.readings for alternative in _requirements(reading)]
    stems = [[(_key("s", st), *(_key("s", a) for a in stem_aliases(st))) for st in sorted(k.stems)]] if k.stems else []
    if k.kind in ("number", "date"):
        if not k.numbers and not k.months:
            return stems
        values = [[(_key("n", v),) for v in sorted(k.numbers)] + [(_key("m", str(mo)),) for mo in sorted(k.months)]]
        if k.years is not None:
            values.append([tuple(_key("n", str(y)) for y in range(k.years[0], k.years[1] + 1))])
        # A measurement may be held in another unit: by any sentence measuring its dimension;
        # a change, by any sentence measuring anything (a percentage of two amounts).
        if k.change:
            return values + [[tuple(_key("d", d) for d in DIMENSIONS)]]
        return values + ([[(_key("d", k.measure[0]),)]] if k.measure is not None else [])
    if k.kind == "name":
        if not k.words:
            return []
        out = [[
            (_key("w", w), _key("s", st)) + ((_key("a", w), _key("i", w)) if w in k.capitals else ())
            + tuple(_key("w", alias[0]) for alias in word_aliases(w))
            for w, st in zip(k.words, k.word_stems)
        ]]
        if (variant := renumbered(k.words)) is not None:
            out.append([(_key("w", w),) for w in variant])
        if (period := period_words(k.words)) is not None:
            out.append([(_key("w", w),) for w in period])
        out += [[(_key("w", w),) for w in alias] for alias in aliases(k.words)]
        if len(k.words) > 1:
            out.append([(_key("a", initials(" ".join(k.words))),)])
            out.append([(_key("w", k.words[-1]),)])  # the other words may be initials
        return out
    return stems


@dataclass(frozen=True)
class FactTable:
    """The sentences that carry each of a few fact keys (:func:`fact_keys`), for finding
    the sentences that may hold a keyword without a loop over the sentences
    (:func:`holding_masks`).

    >>> flow, rivers = _key("s", "flow"), _key("w", "rivers")
    >>> table = FactTable.of([sentence_facts("It flows north."), sentence_facts("Rivers flow.")], [flow, rivers])
    >>> table.with_any([flow]).tolist(), table.with_any([rivers]).tolist()
    ([True, True], [False, True])
    """

    n_sentences: int
    keys: np.ndarray  # (n,) uint32, sorted: the wanted keys the sentences carry
    owners: np.ndarray  # (n,) int64: the sentence carrying each

    @classmethod
    def of(cls, facts: Sequence[SentenceFacts], wanted: Iterable[int]) -> FactTable:
        """The table of ``facts`` (one per sentence) for the keys ``wanted`` (others are
        left out: :meth:`with_any` finds no sentence for them)."""
        keys, ends, _ = joined_fact_keys(facts)
        return cls.of_keys(keys, ends, wanted)

    @classmethod
    def of_keys(cls, keys: np.ndarray, ends: np.ndarray, wanted: Iterable[int]) -> FactTable:
        """:meth:`of` from the sentences' fact keys joined (``keys``; ``ends``: where each
        sentence's keys end, ascending): a caller that keeps them joined per source
        (:class:`~tokenshapley_rag._context_view.SourceView`) skips joining thousands of
        small arrays on every call.

        >>> flow = _key("s", "flow")
        >>> facts = [sentence_facts("It flows north."), sentence_facts("Rivers flow.")]
        >>> ends = np.cumsum([len(f.keys) for f in facts])
        >>> FactTable.of_keys(np.concatenate([f.keys for f in facts]), ends, [flow]).with_any([flow]).tolist()
        [True, True]
        """
        n = len(ends)
        wanted = np.unique(np.fromiter(wanted, dtype=np.uint32))
        if not n or not len(wanted):
            return cls(n, np.zeros(0, np.uint32), np.zeros(0, np.int64))
        # A first cut by the keys' low 16 bits (one gather from a 64 KiB table), then the
        # exact test on the few keys left: sorting or np.isin over every key of a 64k-token
        # context cost more than the rest of this together.
        bucket = np.zeros(1 << 16, dtype=bool)
        bucket[wanted & 0xFFFF] = True
        at = np.flatnonzero(bucket[keys & 0xFFFF])
        at = at[np.isin(keys[at], wanted)]
        owners = np.searchsorted(ends, at, side="right")  # the sentence of each key left
        order = np.argsort(keys[at], kind="stable")
        return cls(n, keys[at][order], owners[order].astype(np.int64))

    def with_any(self, keys: Iterable[int]) -> np.ndarray:
        """``(n_sentences,)`` bool: the sentences that carry one of ``keys``."""
        out = np.zeros(self.n_sentences, dtype=bool)
        for key in keys:
            a, b = np.searchsorted(self.keys, [key, key + 1])
            out[self.owners[a:b]] = True
        return out


def joined_fact_keys(facts: Sequence[SentenceFacts]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The sentences' fact keys joined (uint32), where each sentence's keys end in them
    (int64, ascending) and whether each sentence has a count (its :attr:`SentenceFacts.cardinals`):
    what :meth:`FactTable.of_keys` and :func:`holding_masks` read, derived per call or kept per
    source (:class:`~tokenshapley_rag._context_view.SourceView`).

    >>> keys, ends, counted = joined_fact_keys([sentence_facts("It flows."), sentence_facts("Two rivers.")])
    >>> len(keys) == int(ends[-1]), counted.tolist()
    (True, [False, True])
    """
    arrays = [f.keys for f in facts]
    return (
        np.concatenate(arrays) if arrays else np.zeros(0, np.uint32),
        np.cumsum([len(a) for a in arrays], dtype=np.int64),
        np.array([bool(f.cardinals) for f in facts], dtype=bool),
    )


def holding_masks(
    kfacts: Sequence[KeywordFacts], facts: Sequence[SentenceFacts], sentence_document: np.ndarray,
    fact_keys: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
) -> np.ndarray:
    """``(len(kfacts), n_sentences)`` bool: :func:`holding_mask` of each keyword, the same
    values, with the match rule tested only on the sentences whose fact keys meet one of
    the keyword's requirements (:func:`_requirements`; the others cannot hold it). At 64k
    context tokens the loop over every sentence was most of the citation assembly.
    ``fact_keys``, optionally: the sentences' fact keys joined, where each sentence's keys end
    (:meth:`FactTable.of_keys`) and whether each has a count, as kept per source (else
    derived from ``facts``)."""
    n = len(facts)
    held = np.zeros((len(kfacts), n), dtype=bool)
    if not n or not len(kfacts):
        return held
    needs = [_requirements(k) for k in kfacts]
    # The last word of a name of several words (the partial rule of holding_mask).
    lasts = [_key("w", k.words[-1]) if k.kind == "name" and len(k.words) > 1 else None for k in kfacts]
    wanted = [key for need in needs for alternative in need for group in alternative for key in group]
    wanted += [key for key in lasts if key is not None]
    keys, ends, with_counts = joined_fact_keys(facts) if fact_keys is None else fact_keys
    table = FactTable.of_keys(keys, ends, wanted)
    for r, k in enumerate(kfacts):
        maybe = np.zeros(n, dtype=bool)
        if k.hedge:  # the values it rounds or bounds have no key: every sentence with a count
            maybe |= with_counts
        for alternative in needs[r]:
            meets = np.ones(n, dtype=bool)
            for group in alternative:
                meets &= table.with_any(group)
            maybe |= meets
        row = held[r]
        for j in np.flatnonzero(maybe).tolist():
            row[j] = _holds(k, facts[j])
        if lasts[r] is not None and row.any():
            full_documents = np.unique(sentence_document[row])
            last = k.words[-1]
            for j in np.flatnonzero(table.with_any([lasts[r]]) & np.isin(sentence_document, full_documents)).tolist():
                row[j] |= _by_last_word(k, facts[j])
    return held


def _by_last_word(k: KeywordFacts, f: SentenceFacts) -> bool:
    """Whether sentence ``f`` names the name ``k`` by its last word ("Curie" on Marie Curie's
    page): it holds the word, and no name of its ends with it under another first word
    ("Pierre Curie was born in 1859." is Pierre's, not Marie's)."""
    last = k.words[-1]
    return last in f.words and not any(
        len(parts) > 1 and parts[-1] == last and parts[0] != k.words[0] for parts in (name.split() for name in f.names)
    )


_POSSESSIVE = re.compile(r"\w['\u2019]s\b")


def _runs_within(longer: Sequence[str], words: Sequence[str]) -> bool:
    """Whether ``words`` stand together, in order, inside ``longer`` (and are fewer)."""
    n = len(words)
    return 0 < n < len(longer) and any(tuple(longer[i : i + n]) == tuple(words) for i in range(len(longer) - n + 1))


def outside_longer_names(
    kfacts: Sequence[KeywordFacts],
    texts: Sequence[str],
    answer_sentence_of: Sequence[int],
    facts: Sequence[SentenceFacts],
    held: np.ndarray,
) -> np.ndarray:
    """``held`` less the sentences that hold a name only inside a longer name that the same
    answer sentence names too (``texts``: the keywords as written): in "Real Madrid beat
    Liverpool 1–0 in Madrid.", the final's "Real Madrid beat Liverpool 1–0 ... in Paris."
    holds "Real Madrid", not the city the answer says the final was played in. A sentence
    naming the shorter name on its own still holds it, and a possessive is no longer name
    ("Gary Oldman won the Oscar ... hailed Oldman's Oscar win": the source's "Oldman's Oscar"
    holds "Oscar").

    >>> ks = [keyword_facts("Real Madrid", "name"), keyword_facts("Madrid", "name")]
    >>> facts = [sentence_facts("Real Madrid won the final in Paris."), sentence_facts("The final was in Madrid.")]
    >>> held = np.array([[True, False], [True, True]])
    >>> outside_longer_names(ks, ["Real Madrid", "Madrid"], [0, 0], facts, held).astype(int).tolist()
    [[1, 0], [0, 1]]
    """
    out = held
    for r, k in enumerate(kfacts):
        if k.kind != "name" or not held[r].any():
            continue
        longer = {
            " ".join(o.words) for i, o in enumerate(kfacts)
            if i != r and o.kind == "name" and answer_sentence_of[i] == answer_sentence_of[r]
            and _runs_within(o.words, k.words) and not _POSSESSIVE.search(texts[i])
        }
        if not longer:
            continue
        own = " ".join(k.words)
        for j in np.flatnonzero(held[r]).tolist():
            containing = {name for name in facts[j].names if _runs_within(name.split(), k.words) or name == own}
            if containing and containing <= longer:
                if out is held:
                    out = held.copy()
                out[r, j] = False
    return out


def holding_mask(k: KeywordFacts, facts: list[SentenceFacts], sentence_document: np.ndarray) -> np.ndarray:
    """``(n_sentences,)`` bool: the sentences that hold the keyword (the match rule).

    A name is also held by a sentence that holds its last word when the same document
    holds the whole name in some sentence (a page names its subject once in full), unless
    that sentence names another with the same last word (:func:`_by_last_word`).
    """
    held = np.array([_holds(k, f) for f in facts], dtype=bool)
    if k.kind == "name" and len(k.words) > 1:
        full_documents = np.unique(sentence_document[held])
        if len(full_documents):
            partial = np.array([_by_last_word(k, f) for f in facts], dtype=bool)
            held |= partial & np.isin(sentence_document, full_documents)
    return held


def is_name(text: str, facts: list[SentenceFacts]) -> bool:
    """Whether a capitalised word the segmenter could not type (it opens a sentence, so its
    capital says nothing) is a name: some source sentence has it as one, mid-sentence.

    >>> is_name("Lyon", [sentence_facts("The city of Lyon is old.")]), is_name("Rivers", [sentence_facts("Rivers flow.")])
    (True, False)
    >>> is_name("Ar-Pharazôn", [sentence_facts("In 3261, Ar-Pharazôn landed at Umbar.")])
    True
    >>> is_name("Acme's", [sentence_facts("What was Acme's revenue?")])
    True
    """
    text = composed(text)
    if not text[:1].isupper() or " " in text:
        return False
    # A hyphenated name is two words of a source's name ("Ar-Pharazôn": "ar pharazon").
    words = " ".join(name_words(text))  # without a possessive: "Acme's" is "acme"
    return bool(words) and any(f" {words} " in f" {name} " for f in facts for name in f.names)


def opens_like_a_name(text: str, leads: Sequence[SentenceFacts], facts: Sequence[SentenceFacts]) -> bool:
    """Whether a word of the answer is a name because the sources write it only so, as their
    topic: a source's first sentence opens with it (``leads``: the sources' first sentences),
    and no source sentence (``facts``) writes it in lower case ("Inception is a 2010 film ...":
    "Inception grossed $701 million" is about that film). How the answer or the question
    writes it does not matter ("What is the atomic number of iron?"). A stopword or a filler
    never is, nor a word that only opens later sentences ("Together with Otto Hahn she
    discovered ...").

    >>> facts = [sentence_facts("Inception is a 2010 film."), sentence_facts("It grossed $837 million.")]
    >>> opens_like_a_name("Inception", facts[:1], facts), opens_like_a_name("inception", facts[:1], facts)
    (True, True)
    >>> opens_like_a_name("It", facts, facts)
    False
    >>> rivers = [sentence_facts("Rivers flow."), sentence_facts("The rivers are long.")]
    >>> opens_like_a_name("Rivers", rivers[:1], rivers)
    False
    """
    text = composed(text)
    if " " in text or not text.isalpha() or len(text) < 3:
        return False
    word = fold(text)
    if word in _NON_KEYWORDS or not any(f.opening == word for f in leads):
        return False
    return not any(word in f.lowercase for f in facts)


def asked_facts(query: str, facts: Sequence[SentenceFacts]) -> list[KeywordFacts]:
    """What a question asks about: its names (its name keywords, and a capitalised word that
    opens it when a source spells it as a name: :func:`is_name`), then, when it has a name,
    its numbers and dates ("Which city is the second-largest in France?": France and the
    rank). Alone, a question's numbers and dates flagged a correct NQ answer ("what is the
    largest bill in american money" "$100"). A lowercase question names nothing: runs of its
    words that equal a source's name were tried, and on NQ's questions they were mostly
    common words ("american", "great britain" for a page on the United Kingdom): 4 of 64
    correct answers flagged (docs/reports/support.md).

    >>> [k.words for k in asked_facts("Where was Marie Curie born?", [])]
    [('marie', 'curie')]
    >>> [(k.kind, sorted(k.numbers)) for k in asked_facts("Which city is the second-largest in France?", [])]
    [('name', []), ('number', ['2'])]
    >>> asked_facts("who sings the theme song for the proud family", [sentence_facts("The Proud Family is a show.")])
    []
    """
    facts = list(facts)
    keywords = find_keywords(query)
    names = [
        keyword_facts(kw.text, "name") for kw in keywords
        if kw.kind == "name" or (kw.kind == "word" and is_name(kw.text, facts))
    ]
    if not names:
        return []
    return names + [keyword_facts(kw.text, kw.kind) for kw in keywords if kw.citable and kw.kind in ("number", "date")]


def states_other_value(k: KeywordFacts, f: SentenceFacts, answer: SentenceFacts) -> bool:
    """Whether sentence ``f`` states a value of the keyword's kind that the answer sentence
    does not: another count for a count and another rank for a rank (a number keyword's, not
    a date's: "won two Nobel Prizes" is not contradicted by "died in 1934"), another number
    for another number keyword, another date (or month) for a date ("was completed in 1859"
    is not contradicted by "The tower is 330 metres tall."), another name for a name.

    >>> k, answer = keyword_facts("two", "number"), sentence_facts("She won two Nobel Prizes.")
    >>> [states_other_value(k, sentence_facts(t), answer) for t in ("She died in 1934.", "She won 3 prizes.")]
    [False, True]
    >>> k, answer = keyword_facts("1859", "date"), sentence_facts("It was completed in 1859.")
    >>> [states_other_value(k, sentence_facts(t), answer) for t in ("It is 330 metres tall.", "It opened in 1889.")]
    [False, True]
    >>> k, answer = keyword_facts("75 Wh", "number"), sentence_facts("The battery stores 75 Wh.")
    >>> [states_other_value(k, sentence_facts(t), answer) for t in ("It stores 75 kWh.", "It weighs 75 kg.")]
    [True, False]
    """
    # A ratio or a time written with a colon is not stated otherwise by a sentence holding
    # each of its parts: "12:1" by "12 to 1", "3:43.13" by "3 minutes 43.13 seconds" (the
    # same value in another notation; the keyword stays unsupported, not contradicted).
    colon = [v for v in k.numbers if ":" in v] if k.kind == "number" else []
    if colon and all(set(filter(None, v.split(":"))) <= f.numbers for v in colon):
        return False
    # A measurement is another value when it measures the same dimension to another amount,
    # whatever its number: "75 kWh" for "75 Wh".
    if k.kind == "number" and k.measure is not None and any(
        m[0] == k.measure[0] and m not in answer.measures and not (same_measure(k.measure, m) or rounds_measure(k.measure, m))
        for m in f.measures
    ):
        return True
    if k.kind == "number" and (k.cardinals or k.numbers):
        if k.cardinals:
            other = f.counts - answer.counts
            if k.hedge:  # the values it rounds or bounds are its own
                other = {v for v in other if not any(near_value(n, v, k.hedge) for n in k.cardinals)}
            return bool(other)
        return bool(f.ranks - answer.ranks)
    if k.kind == "date":
        return bool(f.dates - answer.dates) or bool(k.months and (f.months - answer.months))
    if k.kind == "number":
        return bool(f.numbers - answer.numbers)
    if k.kind == "name":
        answer_words = answer.words
        return any(not all(w in answer_words for w in name.split()) for name in f.names + f.implied)
    return False


# A personal pronoun opening a sentence: the sentence goes on about a name said before it.
PRONOUNS = ("he", "she", "it", "they", "his", "her", "its", "their")
PRONOUN_OPENER = re.compile(rf"\W*(?:{'|'.join(PRONOUNS)})\b", re.IGNORECASE)


_SENTENCE_ENDS = (".", "!", "?", "…", ":", ";", ",", "。", "！", "？")


def is_heading(text: str) -> bool:
    """Whether a sentence is a title or heading line: a markdown heading, or a line of at most
    twelve words that does not end as a sentence does.

    >>> [is_heading(t) for t in ("# The Great Wall of China", "Dorestad", "Buddhism in Thailand", "It is tall.")]
    [True, True, True, False]
    """
    line = text.strip()
    if line.startswith("#"):
        return True
    return bool(line) and len(line.split()) <= 12 and not line.endswith(_SENTENCE_ENDS)


def _topic(lead: SentenceFacts) -> str:
    """The name a source's first sentence is about: the name it opens with ("The Eiffel
    Tower is ...": the opening "The" is a stopword), its capitalised opening word
    ("Inception is a 2010 film directed by Christopher Nolan."), else its first name."""
    opening = lead.opening if lead.opening and lead.opening not in _NON_KEYWORDS else ""
    if lead.names and (not opening or lead.names[0].split()[0] == opening):
        return lead.names[0]
    return opening


def source_topics(facts: Sequence[SentenceFacts], sources: Sequence[int], positions: Sequence[int]) -> dict[int, str]:
    """Each source's topic (folded): the name its first sentence opens with, or its first
    name (:func:`_topic`), for the sources whose first sentence has one.

    >>> texts = ["The Eiffel Tower is in Paris.", "It is tall.", "Inception is a film by Christopher Nolan."]
    >>> source_topics([sentence_facts(t) for t in texts], [0, 0, 1], [0, 1, 0])
    {0: 'eiffel tower', 1: 'inception'}
    """
    return {src: t for f, src, at in zip(facts, sources, positions) if at == 0 and (t := _topic(f))}


def with_implied_subjects(
    facts: Sequence[SentenceFacts], texts: Sequence[str], sources: Sequence[int], positions: Sequence[int],
    topics: Mapping[int, str],
) -> list[SentenceFacts]:
    """``facts`` with :attr:`SentenceFacts.implied` set for each sentence that opens with a
    personal pronoun (not its source's first): its source's topic (``topics``,
    :func:`source_topics`). ``texts``, ``sources`` and ``positions``: each sentence's text,
    source and position in it. On the Eiffel Tower's page, "It is 330 metres tall." states the
    tower's height: it is another name's sentence for "The Great Wall of China is 330 metres
    tall.", as "The Eiffel Tower is 330 metres tall." would be.

    >>> texts = ["The Eiffel Tower is in Paris.", "It is 330 metres tall."]
    >>> facts = [sentence_facts(t) for t in texts]
    >>> [f.implied for f in with_implied_subjects(facts, texts, [0, 0], [0, 1], source_topics(facts, [0, 0], [0, 1]))]
    [(), ('eiffel tower',)]
    """
    return [
        _implying(f, topics[src])
        if at > 0 and src in topics and PRONOUN_OPENER.match(text) is not None and topics[src] not in f.names
        else f
        for f, text, src, at in zip(facts, texts, sources, positions)
    ]


def _implying(f: SentenceFacts, name: str) -> SentenceFacts:
    """A copy of ``f`` that implies ``name``. Its lookup keys are the same (nothing is held by
    an implied name), so they are copied slot by slot, not derived again: this runs on every
    call, for every pronoun sentence of the context (about 3 µs each; ``dataclasses.replace``
    derives the keys again, ``copy.copy`` takes 8 µs)."""
    implied = object.__new__(SentenceFacts)
    for slot in SentenceFacts.__slots__:
        object.__setattr__(implied, slot, getattr(f, slot))
    object.__setattr__(implied, "implied", (name,))
    return implied


def keyword_status(
    k: KeywordFacts,
    held: np.ndarray,
    subject_sources: np.ndarray | None,
    predicate: np.ndarray,
    sentence_document: np.ndarray,
    facts: list[SentenceFacts],
    answer: SentenceFacts,
    tolerance: float = PREDICATE_TOLERANCE,
    agreement: float | None = PREDICATE_AGREEMENT,
    predicate_weight: float = 1.0,
    *,
    topic: bool = False,
    claim_held: np.ndarray | None = None,
    neighbours: tuple[str, ...] = (),
    claim_size: int = 0,
    is_subject: bool = False,
    subject_held: np.ndarray | None = None,
    subject_words: tuple[str, ...] = (),
    subject_named: bool = True,
    sentence_lead: np.ndarray | None = None,
    heading: Callable[[int], bool] | None = None,
    bare: bool = False,
    standing_for: np.ndarray | None = None,
) -> tuple[str, np.ndarray, int]:
    """The status of one keyword, the sentences that may be cited for it, and the
    conflicting sentence (-1: none).

    Parameters
    ----------
    k : the keyword's facts
    held : (n_sentences,) bool, the sentences holding it (:func:`holding_mask`)
    subject_sources : (n_documents,) bool or None
        The claim's anchor (:func:`~tokenshapley_rag._citations.keyword_statuses`): for a
        value, the documents holding the claim's subject; for the subject, those holding the
        most of the claim's other numbers, dates and names (when none is held, of its words);
        None when there is nothing to check it against.
    predicate : (n_sentences,) float
        The predicate game's value for each sentence: the context game of the keyword's
        answer sentence over its tokens that belong to no number, date or name keyword
        (exact Shapley values, docs/method.md §8).
    sentence_document, facts, answer : each sentence's document and facts; the answer
        sentence's facts. A document is a source, or the chunks cut from one document
        (:attr:`Source.document`): the rule's "sources" below are documents.

    Rule (docs/method.md §8): words are supported when held (and cited by the subject's
    sources when they hold them). A number, date or name is
    supported when a sentence holds it in a source that holds the subject (or when there
    is no subject to check). Otherwise the *rival* is the sentence with the highest
    predicate value among those that state another value of the keyword's kind, in the
    subject's sources (any source when there is no subject); the keyword is contradicted
    when the rival exists, its predicate value is positive and at least
    ``tolerance`` (:data:`PREDICATE_TOLERANCE`) times that of every sentence holding the
    keyword or next to one in its document; for a keyword no source holds, when its predicate value is
    at least ``agreement`` times the best of those sources' sentences (it states the
    claim, not merely another name; for a name in a claim with words of its own and no
    ``topic``, also when it holds some of the claim's other keywords or its predicate value
    is at least :data:`PREDICATE_MINIMUM` times ``predicate_weight``). The subject itself is
    overturned only by a clearly better predicate (``tolerance = 1 / PREDICATE_TOLERANCE``):
    when the subject and the values come from different documents stating the same
    predicate, the claim is about its subject, and the values are what is wrong. Failing that, a held keyword is supported (by sentences
    of other sources: an answer may combine sources) and an unheld one is unsupported.

    Context decides last: a number, date or name found supported, that no source of its
    anchor holds (a name: even when one does, if the best sentence below is in an anchor
    source), is overturned when the sentences that may state its claim with it state its
    predicate at less than ``agreement`` (:data:`PREDICATE_AGREEMENT`) times the best
    sentence's predicate value, when that is at least :data:`PREDICATE_MINIMUM` times
    ``predicate_weight`` (the predicate game's total weight, the most its value can be); it
    is then contradicted by that sentence when it states another value of the keyword's
    kind, else unsupported. Those sentences are the ones holding it and those beside them:
    the next and previous sentence of its document, every sentence of a document whose
    first sentence (``sentence_lead``) holds it and is a heading or, for a name, opens with
    it, and, for a name, the sentences ``standing_for`` it; or every sentence of their
    documents when a holder holds some of the claim's other keywords or the answer is
    ``bare``.
    ``agreement=None`` skips this outside the anchor (a capitalised word that opens the
    answer sentence is only a name by the sources' spelling, and its predicate may be any
    sentence's); within the anchor :data:`PREDICATE_AGREEMENT` applies.

    The claim's own keywords decide within a page. ``claim_held`` and ``claim_size``: how
    many of the claim's other keywords each sentence holds, and how many there are (its
    subject left out: the anchor checks it); ``neighbours``: what stands beside the keyword
    in the answer sentence (:func:`value_neighbours`). A number, date or name that the anchor
    holds is contradicted by another sentence of a document holding it (a name: or of an
    anchor document) that holds more of those keywords than every sentence holding it, more
    than half of them and two, and states another value of its kind beside the same word or
    in the same place ("Maria Gómez, aged
    45, has led the bank." against the page's "Maria Gómez, aged 54, has led the bank ...",
    when 45 is the page's market share: :func:`_placed_rival`). A number or date that no
    anchor source holds is contradicted by a sentence of the anchor that holds more of them
    than every sentence holding it and states another value of its kind
    (:func:`_worded_rival`: "The Eiffel Tower was completed in 1815.").

    ``is_subject``: ``k`` is its claim's subject (checked against the documents holding the
    most of the claim's other values). ``subject_held``: the sentences that hold the claim's
    subject, or stand for it (a pronoun sentence on its page); a value that the anchor holds
    only in sentences about someone else, none holding the subject, is contradicted by the
    page's sentence about the subject that states another value of its kind and at least as
    many of the claim's other keywords (:func:`_subject_sentence_rival`).

    ``sentence_lead``: each sentence's document's first sentence (its index), or None;
    ``heading``: whether sentence ``j`` is a title or heading line (:func:`is_heading`); ``bare``:
    the keyword's answer sentence says nothing but values (its predicate is the question's);
    ``standing_for``: for a name, the sentences that stand for it (a pronoun sentence on a page
    about it, :attr:`SentenceFacts.implied`), or None.

    ``subject_named``: the claim names its subject; False when it goes on about an earlier
    claim's ("The astronauts collected 23.5 kg of lunar samples." after a sentence about
    Armstrong), whose documents are then only a guess at its anchor.

    ``topic``: the question names the claim's subject (the anchor), so the claim is about
    it. A number, date or name that no anchor source holds is then judged as one no source
    holds: contradicted by the anchor's rival when that states the claim (its predicate
    value at least ``agreement`` times the best of the anchor's sentences), else
    unsupported; the other documents' sentences holding it are never cited for it.
    """
    if k.kind not in VALUE_KINDS:
        if subject_sources is not None and (held & subject_sources[sentence_document]).any():
            return "supported", held & subject_sources[sentence_document], -1
        return ("supported" if held.any() else "unsupported"), held, -1
    # The predicate is read in the sentences next to the value (the value in one, the rest of
    # its claim in the next: "Big Ben is ... . The tower was completed in 1859."; rarely
    # further apart), both when a rival is weighed against them and when context decides
    # last: a page that names it in one sentence ("Sarvodaya", beside Dharmapāla) and says
    # who declared the holidays in another, far off, does not state the claim with it.
    beside = held.copy()
    same_document = sentence_document[1:] == sentence_document[:-1]
    beside[1:] |= held[:-1] & same_document
    beside[:-1] |= held[1:] & same_document
    if sentence_lead is not None:
        # ... or anywhere in a document whose first sentence names what it is about and holds
        # it: a title or heading (a page "Dorestad" states "the site was excavated" of
        # Dorestad; a chunk "The wall and its branches measure about 21,196 kilometres" of a
        # file headed "# The Great Wall of China"), or, for a name, a lead opening with it
        # ("Lyon is the third-largest city in France. ..."). Not a passage cut mid-text,
        # whose first sentence is any sentence ("like Dharmapāla's teachings ..., while
        # Sarvodaya has emphasized ...").
        for lead in np.unique(sentence_lead[held]).tolist():
            if not held[lead]:
                continue
            if (heading is not None and heading(lead)) or (
                k.kind == "name" and set(k.words) <= set(_topic(facts[lead]).split())
            ):
                beside |= sentence_lead == lead
    if standing_for is not None:
        # ... or in a sentence that stands for a name its page is about ("Marie Curie was born
        # in Warsaw in 1867. She won the Nobel Prize ... She discovered polonium and radium.")
        beside |= standing_for
    # Context decides last over the whole page when the value is tied to the claim there: a
    # sentence holding it holds some of the claim's other keywords (a "Zen-temple" two
    # sentences before "A prerequisite to become "dai-oshō" is ..."), or the answer is bare,
    # its claim the question, which the page may state in any sentence ("What a Friend We
    # Have in Jesus" for "who wrote ..." "Charles Crozat Converse", named four sentences on).
    tied = bare or (claim_held is not None and bool((claim_held[held] > 0).any()))
    stated = np.isin(sentence_document, sentence_document[held]) if tied else beside
    if held.any():
        if subject_sources is None:
            swapped = _placed_elsewhere(k, held, facts, neighbours)
            if swapped >= 0:  # as below, with every holder
                return "contradicted", np.zeros_like(held), swapped
            if k.kind in ("number", "date") and claim_held is not None and claim_size >= WORD_ANCHOR_MINIMUM:
                # A claim that names nothing ("The development server listens on port
                # 9090.") is stated by the sentence holding all the rest of it, here with
                # another value ("... listens on port 8080."), not by another that holds
                # the number ("The metrics endpoint is served on port 9090.").
                whole = _worded_rival(k, ~held, held, facts, answer, claim_held, at_least=claim_size)
                if whole >= 0:
                    return "contradicted", np.zeros_like(held), whole
            return _unless_context_disagrees(k, held, stated, predicate, facts, answer, agreement, predicate_weight)
        agreeing = held & subject_sources[sentence_document]
        if agreeing.any():
            # The anchor's source holds it: the claim's values agree. But a page holds many
            # names (Sauron's page holds "the Elves", which he did not forge, and
            # "Ar-Pharazôn", who did not forge the Ring): a name, the subject too, is still
            # overturned by context when the sentence that states the claim's predicate
            # best is the anchor's own (the anchor's page decides what it names).
            if k.kind == "name" and subject_sources[sentence_document[int(np.argmax(predicate))]] and not (
                # a holder that names the subject beside it, or with more of the claim, ties the
                # name to it ("The Golden Gate Bridge in San Francisco opened ...": an answer may
                # say it of the bridge while stating what another sentence of its pages says,
                # "... is painted orange"; "Lise Meitner was born in Vienna in 1878." for "... born
                # in 1878 in Vienna and died in 1968 in Cambridge."), not one that only mentions
                # the subject ("Sauron ... killed Celebrimbor, the maker of the three rings of the
                # Elves" for "Sauron forged the One Elves")
                subject_held is not None and claim_held is not None
                and _tied_to_subject(k, agreeing & subject_held, facts, subject_words, claim_held)
            ):
                status, _, rival = _unless_context_disagrees(
                    k, held, stated, predicate, facts, answer,
                    PREDICATE_AGREEMENT if agreement is None else agreement, predicate_weight,
                )
                if status != "supported":
                    return status, np.zeros_like(held), rival
            if claim_held is not None and neighbours:
                # ... and a page holds many values: one taken from another of its sentences
                # is overturned by the sentence that states more of the claim with another
                # value in its place ("Kylian Mbappé won the Golden Ball." against "Lionel
                # Messi won the Golden Ball ...", when the page's Mbappé won the Golden Boot).
                # A name, also by a sentence of another anchor page ("the main characters in
                # Persona 3 are Teddie, ..." against Persona 3's list, when Teddie is Persona
                # 4's), not of a page that is not about the claim's subject ("Laura Chen is
                # the chief executive of Acme Corp." against Globex's "Its chief executive is
                # Mark Davis, who joined from Acme"); a number or date only by its own page's
                # (another page's "in special session from January 20" is another session's).
                pages = np.zeros(int(sentence_document.max()) + 1, dtype=bool)
                pages[sentence_document[agreeing]] = True
                pool = ((pages | subject_sources) if k.kind == "name" else pages)[sentence_document] & ~held
                placed = _placed_rival(k, pool, agreeing, facts, answer, claim_held, claim_size, neighbours)
                if placed >= 0:
                    return "contradicted", np.zeros_like(held), placed
            if claim_held is not None and k.kind == "number":
                # ... and a page per year holds each year's figures: a number whose pages
                # never name a year the answer's claim names, while an anchor sentence naming
                # it states the same of the subject with another number, is another year's
                # ("Norvale's revenue in 2022 was $2.4 billion." against the 2021 report's
                # "revenue of $2.4 billion for fiscal 2021", when the 2022 report says $2.6
                # billion "for fiscal 2022").
                pool = subject_sources[sentence_document] & ~held
                other_year = _another_years_rival(k, agreeing, pool, facts, answer, claim_held, sentence_document)
                if other_year >= 0:
                    return "contradicted", np.zeros_like(held), other_year
            if subject_words and k.kind in ("number", "date"):
                # ... and a sentence of several clauses states each subject's values in its
                # own: one that every holder states in another subject's clause, while it
                # states another value of its kind in the claim's subject's, is that other
                # subject's ("BRCA2 is on chromosome 17." against "BRCA1 is on chromosome 17,
                # and BRCA2 on chromosome 13.").
                other = _in_anothers_clause(k, agreeing, facts, subject_words)
                if other >= 0:
                    return "contradicted", np.zeros_like(held), other
                # ... and a sentence holds several values, each beside its own name: one
                # that every holder places beside another name, while it places another
                # value beside the claim's subject, is that name's ("K2 is 8,849 m high."
                # against "Mount Everest (8,849 m) is taller than K2 (8,611 m).").
                other = _placed_beside_another(k, agreeing, facts, subject_words, neighbours)
                if other >= 0:
                    return "contradicted", np.zeros_like(held), other
                # ... and one that every holder states of another name it is about, while it
                # places another value of its kind beside the claim's subject, is that name's
                # ("Marine Le Pen won 66.1% of the vote." against "Emmanuel Macron won 66.1% of
                # the vote against Marine Le Pen's 33.9%.").
                owner = _owned_by_another(k, agreeing, facts, answer, subject_words)
                if owner >= 0:
                    return "contradicted", np.zeros_like(held), owner
            # ... and a sentence holds several values, each beside its own words: a number or
            # date that every holder places beside other words than the answer does, while it
            # places another value of its kind where the answer places this one, was swapped
            # ("Net income was $5.2 billion." against "Revenue was $5.2 billion and net income
            # was $1.1 billion.").
            swapped = _placed_elsewhere(k, agreeing, facts, neighbours, subject_words)
            if swapped >= 0:
                return "contradicted", np.zeros_like(held), swapped
            # ... and a sentence of several clauses states each one's values in its own, also
            # about no name: a value every holder states only in a clause whose own words the
            # claim leaves out, while another clause, whose own words the claim says, states
            # another value of its kind, is that clause's ("The right to data portability is in
            # Article 17." against "The right to erasure is in Article 17, and the right to
            # data portability is in Article 20.").
            other = _in_anothers_worded_clause(k, agreeing, facts, answer)
            if other >= 0:
                return "contradicted", np.zeros_like(held), other
            if subject_held is not None and claim_held is not None and not is_subject and agreement is not None:
                # ... and a page about several people or things holds each one's values: a
                # value that only its sentences about another name hold is that name's
                # ("Marie Curie was born in 1859." against "Pierre Curie was born in 1859.
                # Marie Curie was born in 1867."; a table's row "| Jupiter | 95 |" for
                # Uranus), contradicted by the page's sentence on the subject that states
                # another value of its kind and as much of the claim. Not a word that is a
                # name only by the sources' spelling (``agreement=None``: "written", which a
                # page's byline opens with, "Written by ...").
                swapped = _subject_sentence_rival(k, agreeing, subject_held, sentence_document, facts, answer, claim_held)
                if swapped >= 0:
                    return "contradicted", np.zeros_like(held), swapped
            return "supported", agreeing, -1
    taken_elsewhere = False
    if topic and subject_sources is not None and held.any() and all(
        _about(facts[j]) for j in np.flatnonzero(held).tolist()
    ):
        # The question names the claim's subject, so the claim is about it: a value that
        # only other documents hold, in sentences about someone or something named, was
        # taken from another claim ("When did the Golden Gate Bridge open?" "The Golden Gate Bridge
        # opened in 1883.": 1883 is the Brooklyn Bridge's). It is judged as a value no
        # source holds, against the subject's documents alone. A chunk that goes on about
        # the subject without naming it ("He died on Saint Helena in 1821.", "The tower
        # welcomed 6.3 million visitors.") is not another claim's.
        held = np.zeros_like(held)
        taken_elsewhere = True
    pool = np.ones(len(facts), dtype=bool) if subject_sources is None else subject_sources[sentence_document]
    pool &= ~held
    if (
        not held.any() and subject_sources is not None and k.kind in ("number", "date")
        and claim_held is not None and claim_size >= WORD_ANCHOR_MINIMUM
    ):
        # A value no source holds, when no anchor sentence holds all the rest of its claim,
        # is contradicted by another document's sentence that does, with another value of
        # its kind, before any rival the predicate game finds in the anchor: one about no one
        # named, a chunk going on about the subject ("The James Webb Space Telescope's
        # primary mirror is 2.4 metres across." against "Its primary mirror is 6.5 metres
        # across.", not the telescope's "launched ... on an Ariane 5 rocket"); any one when
        # the claim does not name its subject, whose documents were only a guess
        # ("Armstrong and Aldrin landed Eagle. The astronauts collected 23.5 kg of lunar
        # samples." against "The astronauts collected 21.5 kg of lunar samples.").
        whole = _claim_sentences(~held, held, claim_held, at_least=claim_size)
        if not any(pool[j] for j in whole):
            for j in whole:
                if (not subject_named or not _about(facts[j])) and states_other_value(k, facts[j], answer):
                    return "contradicted", np.zeros_like(held), j
    rival, best = _rival(k, pool, predicate, facts, answer)
    if rival >= 0 and held.any() and best >= tolerance * float(predicate[beside].max()):
        return "contradicted", np.zeros_like(held), rival
    if held.any() and subject_sources is not None and k.kind in ("number", "date") and claim_held is not None:
        # The subject's page states more of the claim's keywords with another value than
        # any sentence holding this one: "The Eiffel Tower was completed in 1815." against
        # "It was completed on 31 March 1889 ...", not Ada Lovelace's "born on 10 December
        # 1815" (whatever the predicate game makes of "was ... in").
        worded = _worded_rival(k, pool, held, facts, answer, claim_held)
        if worded >= 0:
            return "contradicted", np.zeros_like(held), worded
    if (
        held.any() and subject_sources is not None and k.kind in ("number", "date") and subject_held is not None
        and subject_named and claim_held is not None
        and all(_about_another(facts[j], answer) for j in np.flatnonzero(held).tolist())
    ):
        # ... and one that only sentences about another name hold, a name the claim does not
        # name, while a sentence of the subject's pages naming the subject states another
        # value of its kind, is that other name's, when no holder says more of the claim
        # than that sentence ("The population of Lyon is 870,321." against "Lyon has 522,250
        # inhabitants.", when 870,321 is Marseille's "Marseille has 870,321 inhabitants.").
        # A holder that says more of the claim ("Lise Meitner died in 1968 in Cambridge."
        # for "Marie Curie died in 1968 in Cambridge.", against "Marie Curie died in 1934")
        # is left to the predicate game above, which may overturn the subject.
        most = int(claim_held[held].max())
        for j in np.flatnonzero(pool & subject_held).tolist():
            if claim_held[j] >= most and states_other_value(k, facts[j], answer):
                return "contradicted", np.zeros_like(held), j
    if held.any() and subject_sources is not None and k.kind == "name" and not is_subject and (
        claim_held is not None and neighbours
    ):
        # A name only other documents hold (not the claim's subject: the predicate decides
        # that, above) is contradicted by the subject's sentence that states more of the
        # claim with another name in its place: "Franz Kafka was born in Klagenfurt on 3 July
        # 1883." against "Franz Kafka was born in Prague on 3 July 1883.", when Klagenfurt is
        # Robert Musil's birthplace.
        placed = _placed_rival(k, pool, held, facts, answer, claim_held, claim_size, neighbours)
        if placed >= 0:
            return "contradicted", np.zeros_like(held), placed
    # A value no source holds is contradicted only by a sentence that states the claim: its
    # predicate at least ``agreement`` times the best of the pool's. Any sentence naming
    # someone else is not ("It was completed in 1889 by Zorblat" is not contradicted by
    # "The Eiffel Tower is in Paris.": no source says who completed it). Nor, for a name in a
    # claim of its own words (not a bare answer, whose claim is the question), the best of a
    # page that never states the claim, when no question names what the claim is about:
    # another name is any name, of any sort, so the rival must hold some of the
    # claim's other keywords or state its predicate with at least PREDICATE_MINIMUM of the
    # game's weight, as context decides last ("Marie Curie lived in Paris." is not
    # contradicted by "She won the Nobel Prize in Physics in 1903 ...").
    if rival >= 0 and not held.any() and (agreement is None or best >= agreement * float(predicate[pool].max())) and not (
        k.kind == "name" and not topic and agreement is not None and claim_held is not None and claim_size > 0
        and claim_held[rival] == 0 and best < PREDICATE_MINIMUM * predicate_weight
    ) and not (
        # ... a number taken from another document's claim, only by a sentence counting the
        # same thing or holding some of the claim's words: "Halvorsen Shipping has 3,400
        # employees." (Pellucid's) is not contradicted by "Halvorsen Shipping operates 64 vessels."
        taken_elsewhere and k.kind == "number" and claim_held is not None and claim_size > 0 and claim_held[rival] == 0
        and not any(kind == "number" and stem in neighbours for kind, stem, _ in facts[rival].placed)
    ):
        return "contradicted", np.zeros_like(held), rival
    if not held.any() and k.kind in ("number", "date") and claim_held is not None and claim_size > 0:
        # ... and by a sentence that holds the whole rest of its claim with another value of
        # its kind, whatever the predicate game makes of it: "Mars has three moons." against
        # "Mars has two small moons, Phobos and Deimos.", "The astronauts collected 23.5 kg of
        # lunar samples." against "... collected 21.5 kg of lunar samples."
        whole = _worded_rival(k, pool, held, facts, answer, claim_held, at_least=claim_size)
        if whole >= 0:
            return "contradicted", np.zeros_like(held), whole
    if held.any():
        return _unless_context_disagrees(k, held, stated, predicate, facts, answer, agreement, predicate_weight)
    return "unsupported", held, -1


def _rival(
    k: KeywordFacts, pool: np.ndarray, predicate: np.ndarray, facts: Sequence[SentenceFacts], answer: SentenceFacts
) -> tuple[int, float]:
    """The sentence of ``pool`` with the highest positive ``predicate`` value among those
    that state another value of the keyword's kind (:func:`states_other_value`), the first
    of equals, and its value; ``(-1, 0.0)`` when there is none. The sentences are tried
    best first, so the test runs on a few of them, not on every sentence of the pool (all
    of a long context's when the keyword has no anchor).

    >>> facts = [sentence_facts("It is 5 km long."), sentence_facts("It is long."), sentence_facts("It is 7 km long.")]
    >>> k, answer = keyword_facts("6 km", "number"), sentence_facts("It is 6 km long.")
    >>> _rival(k, np.ones(3, bool), np.array([0.5, 0.9, 0.5]), facts, answer)
    (0, 0.5)
    """
    tried = np.flatnonzero(pool & (predicate > 0.0))
    for j in tried[np.lexsort((tried, -predicate[tried]))].tolist():
        if states_other_value(k, facts[j], answer):
            return j, float(predicate[j])
    return -1, 0.0


def _claim_sentences(pool: np.ndarray, against: np.ndarray, claim_held: np.ndarray, at_least: int = 1) -> list[int]:
    """The sentences of ``pool`` that hold more of the claim's other keywords (``claim_held``:
    how many each sentence holds) than any sentence of ``against`` does, and at least
    ``at_least``: the most first, the first of equals first."""
    best_against = int(claim_held[against].max()) if against.any() else 0
    tried = np.flatnonzero(pool & (claim_held > best_against) & (claim_held >= at_least))
    return tried[np.lexsort((tried, -claim_held[tried]))].tolist()


def _worded_rival(
    k: KeywordFacts, pool: np.ndarray, against: np.ndarray, facts: Sequence[SentenceFacts], answer: SentenceFacts,
    claim_held: np.ndarray, at_least: int = 1,
) -> int:
    """The first of :func:`_claim_sentences` (holding at least ``at_least`` of the claim's
    other keywords) that states another value of the keyword's kind
    (:func:`states_other_value`); -1 when there is none."""
    return next(
        (j for j in _claim_sentences(pool, against, claim_held, at_least) if states_other_value(k, facts[j], answer)), -1
    )


def _another_years_rival(
    k: KeywordFacts, holders: np.ndarray, pool: np.ndarray, facts: Sequence[SentenceFacts], answer: SentenceFacts,
    claim_held: np.ndarray, sentence_document: np.ndarray,
) -> int:
    """When the pages holding the keyword leave out a year the answer sentence names, or
    every sentence holding it dates it to another year and none to a year of the answer
    ("- 2022: $3.8 billion" for "Acme's revenue was $3.8 billion in 2023.", over a page
    listing "- 2023: $4.2 billion" too): the sentence of ``pool`` that names every such
    year, holds every content word of the answer sentence that a holder holds ("revenue",
    not only "founded" for a revenue), and states another number
    (:func:`states_other_value`), the one holding the most of the claim's other keywords
    (``claim_held``) first; else -1.

    >>> facts = [sentence_facts("Revenue was $2.4 billion for fiscal 2021, up 6% from 2020."),
    ...          sentence_facts("In fiscal 2022 revenue was $2.7 billion.")]
    >>> answer = sentence_facts("Revenue in 2022 was $2.4 billion, up 6% from 2021.")
    >>> _another_years_rival(keyword_facts("$2.4 billion", "number"), np.array([True, False]),
    ...                      np.array([False, True]), facts, answer, np.array([3, 2]), np.array([0, 1]))
    1
    >>> facts = [sentence_facts("- 2022: $3.8 billion"), sentence_facts("- 2023: $4.2 billion")]
    >>> answer = sentence_facts("Acme's revenue was $3.8 billion in 2023.")
    >>> _another_years_rival(keyword_facts("$3.8 billion", "number"), np.array([True, False]),
    ...                      np.array([False, True]), facts, answer, np.array([0, 1]), np.array([0, 0]))
    1
    """
    years = {v for v in answer.dates if is_year(v)}
    if not years:
        return -1
    pages = np.isin(sentence_document, sentence_document[holders])
    missing = years - set().union(*(facts[j].dates for j in np.flatnonzero(pages).tolist()))
    if not missing:
        # the page names the answer's years, but not with this value: each holder dates it
        # to another year only
        dated = [{v for v in facts[j].dates if is_year(v)} for j in np.flatnonzero(holders).tolist()]
        if not all(d and not d & years for d in dated):
            return -1
        missing = years
    content = {light_stem(w) for w in answer.words if w.isalpha() and w not in _NON_KEYWORDS}
    shared = [content & facts[j].stems for j in np.flatnonzero(holders).tolist()]
    tried = np.flatnonzero(pool)
    for j in tried[np.lexsort((tried, -claim_held[tried]))].tolist():
        if (
            missing <= facts[j].dates and all(words <= facts[j].stems for words in shared)
            and states_other_value(k, facts[j], answer)
        ):
            return j
    return -1


def _in_answer(word: str, answer: SentenceFacts) -> bool:
    return word in answer.words or light_stem(word) in answer.stems


def _placed_rival(
    k: KeywordFacts, pool: np.ndarray, holders: np.ndarray, facts: Sequence[SentenceFacts], answer: SentenceFacts,
    claim_held: np.ndarray, claim_size: int, neighbours: tuple[str, ...],
) -> int:
    """The first of :func:`_claim_sentences` (against ``holders``, holding more than half of
    the claim's ``claim_size`` other keywords and at least :data:`WORD_ANCHOR_MINIMUM`) that states
    another value of the keyword's kind where the answer states the keyword: beside one of
    the same ``neighbours`` (:attr:`SentenceFacts.placed`), or for a quarter's or a half's
    code ("Q2") another quarter or half anywhere; -1 when there is none.

    >>> facts = [sentence_facts(t) for t in (
    ...     "Maria Gómez is the chief executive.", "Maria Gómez, aged 54, has led the bank since 2019.", "Its share is 45%.")]
    >>> answer = sentence_facts("Maria Gómez, aged 45, has led the bank since 2019.")
    >>> claim_held = np.array([0, 4, 0])  # "aged", "led", "bank" and "2019", the subject left out
    >>> _placed_rival(keyword_facts("45", "number"), np.array([True, True, False]), np.array([False, False, True]),
    ...               facts, answer, claim_held, 4, ("<age", ">lead"))
    1
    """
    at_least = max(WORD_ANCHOR_MINIMUM, claim_size // 2 + 1)
    period = period_words(k.words) if k.kind == "name" else None
    for j in _claim_sentences(pool, holders, claim_held, at_least):
        if period is not None and _names_another_period(period, facts[j], answer):
            return j  # "in the third quarter" where the answer says "Q2"
        for kind, stem, values in facts[j].placed:
            if kind != k.kind or stem not in neighbours or not values:
                continue
            # Another name: its last word is not the answer's ("Kylian Mbappé" is the
            # answer's "Mbappé"), by the match rule's stems.
            if kind == "name" and values[0] and not _in_answer(values[0].split()[-1], answer):
                return j
            if kind != "name" and set(values) != k.numbers:
                return j
    return -1


def _tied_to_subject(
    k: KeywordFacts, holders: np.ndarray, facts: Sequence[SentenceFacts], subject_words: tuple[str, ...],
    claim_held: np.ndarray,
) -> bool:
    """Whether one of ``holders`` (sentences holding both the name ``k`` and the claim's
    subject) places the name beside the subject (:attr:`SentenceFacts.placed`) or holds at
    least :data:`WORD_ANCHOR_MINIMUM` of the claim's other keywords (``claim_held``).

    >>> f = [sentence_facts("The Golden Gate Bridge in San Francisco opened in 1937.")]
    >>> _tied_to_subject(keyword_facts("San Francisco", "name"), np.array([True]), f, ("golden", "gate", "bridge"), np.array([0]))
    True
    """
    if not subject_words:
        return False
    beside = "=" + light_stem(subject_words[-1])
    name = " ".join(k.words)
    return any(
        claim_held[j] >= WORD_ANCHOR_MINIMUM
        or any(kind == "name" and place == beside and values[:1] == (name,) for kind, place, values in facts[j].placed)
        for j in np.flatnonzero(holders).tolist()
    )


def _names_another_period(period: tuple[str, str], f: SentenceFacts, answer: SentenceFacts) -> bool:
    """Whether sentence ``f`` names another quarter or half of a year than ``period``
    (:func:`~tokenshapley_rag._names.period_words`: "third quarter" for Q2), not it, and not
    one the answer sentence names too.

    >>> f = sentence_facts("Sales rose 12% in the third quarter of 2023.")
    >>> _names_another_period(("second", "quarter"), f, sentence_facts("Sales grew 12% in Q2."))
    True
    >>> _names_another_period(("second", "quarter"), f, sentence_facts("Sales grew 12% in Q3 and fell in Q2."))
    False
    """
    ordinal, unit = period
    if unit not in f.words or ordinal in f.words:
        return False
    ordinals = ("first", "second", "third", "fourth")[: 4 if unit == "quarter" else 2]
    return any(
        w in f.words and w not in answer.words and f"{unit[0]}{n}" not in answer.words
        for n, w in enumerate(ordinals, 1) if w != ordinal
    )


def _placed_beside_another(
    k: KeywordFacts, holders: np.ndarray, facts: Sequence[SentenceFacts], subject_words: tuple[str, ...],
    neighbours: tuple[str, ...] = (),
) -> int:
    """The first of ``holders`` when every one of them places the keyword's value beside
    another name (:attr:`SentenceFacts.placed`, "=" marks a name beside a value) and
    another value of its kind, sharing none of the keyword's, beside the claim's subject
    (its last word's light stem); else -1. Never when a holder places the value beside
    all that the answer places it beside (``neighbours``): a copied "The iPhone 15 Pro
    has a 6.1-inch display." places 15 beside "iPhone" and 6.1 beside "Pro" and "display",
    as its source does.

    >>> facts = [sentence_facts("Mount Everest (8,849 m) is taller than K2 (8,611 m).")]
    >>> _placed_beside_another(keyword_facts("8,849 m", "number"), np.array([True]), facts, ("k2",))
    0
    >>> _placed_beside_another(keyword_facts("8,849 m", "number"), np.array([True]), facts, ("mount", "everest"))
    -1
    """
    subject = "=" + light_stem(subject_words[-1])
    found = -1
    for j in np.flatnonzero(holders).tolist():
        places = _places_of(k, facts[j])
        if neighbours and set(neighbours) <= places:
            return -1
        own = [set(values) for kind, place, values in facts[j].placed if kind == k.kind and place == subject]
        elsewhere = any(place.startswith("=") and place != subject for place in places)
        # another value shares none of the keyword's ("1217" beside the subject is part of
        # "Saturday 20 May 1217", not another date)
        if not (own and all(not values & k.numbers for values in own) and elsewhere):
            return -1
        found = j if found < 0 else found
    return found


def _in_anothers_clause(
    k: KeywordFacts, holders: np.ndarray, facts: Sequence[SentenceFacts], subject_words: tuple[str, ...]
) -> int:
    """The first of ``holders`` when every one of them states the keyword's value only in
    clauses of other subjects (:attr:`SentenceFacts.clauses`) and another value of its kind,
    sharing none of the keyword's, in a clause of the claim's subject (its last word's light
    stem); else -1.

    >>> facts = [sentence_facts("BRCA1 is located on chromosome 17, and BRCA2 on chromosome 13.")]
    >>> _in_anothers_clause(keyword_facts("17", "number"), np.array([True]), facts, ("brca2",))
    0
    >>> _in_anothers_clause(keyword_facts("13", "number"), np.array([True]), facts, ("brca2",))
    -1
    """
    subject = light_stem(subject_words[-1])
    found = -1
    for j in np.flatnonzero(holders).tolist():
        stating = {who for who, kind, values in facts[j].clauses if kind == k.kind and set(values) == k.numbers}
        own = [set(values) for who, kind, values in facts[j].clauses if kind == k.kind and who == subject]
        if not stating or subject in stating or not own or any(values & k.numbers for values in own):
            return -1
        found = j if found < 0 else found
    return found


def _in_anothers_worded_clause(
    k: KeywordFacts, holders: np.ndarray, facts: Sequence[SentenceFacts], answer: SentenceFacts
) -> int:
    """The first of ``holders`` when every one of them states the keyword's value only in
    clauses (:attr:`SentenceFacts.worded`) that share a word with a clause stating another
    value of its kind and have own words (those no such clause has), the claim ``answer``
    saying none of them, while such another clause has own words the claim says; else -1.
    A numbered name's other value is the same name with another number ("Article 20" for
    "Article 17").

    >>> facts = [sentence_facts("The right to erasure is in Article 17, and the right to data portability is in "
    ...                         "Article 20.")]
    >>> k, held = keyword_facts("Article 17", "name"), np.array([True])
    >>> _in_anothers_worded_clause(k, held, facts, sentence_facts("The right to data portability is in Article 17."))
    0
    >>> _in_anothers_worded_clause(k, held, facts, sentence_facts("The right to erasure is in Article 17."))
    -1
    >>> facts = [sentence_facts("Revenue by year: 2022: $3.8 billion; 2023: $4.2 billion.")]
    >>> k = keyword_facts("$3.8 billion", "number")
    >>> _in_anothers_worded_clause(k, np.array([True]), facts, sentence_facts("Revenue was $3.8 billion in 2023."))
    0
    """
    base = tuple(w for w in k.words if not w.isdigit())
    # the keyword's own numbers are no word of a clause; the claim says its words and numbers
    own_numbers = {f"#{v}" for v in k.numbers} | {f"#{w}" for w in k.words if w.isdigit()}
    said = answer.stems | {f"#{v}" for v in answer.numbers}
    found = -1
    for j in np.flatnonzero(holders).tolist():
        clauses = facts[j].worded
        if not clauses:
            return -1
        own, other = [], []
        for stems, words, stated in clauses:
            if k.kind == "name" and len(base) < len(k.words):  # a numbered name
                holds = all(w in words for w in k.words)
                states_other = bool(base) and all(w in words for w in base) and any(kind == "number" for kind, _ in stated)
            else:
                values = [held for kind, held in stated if kind == k.kind]
                mine = [" ".join(k.words)] if k.kind == "name" else None
                holds = any(list(held) == mine if mine else set(held) == k.numbers for held in values)
                states_other = bool(values) and not any(
                    list(held) == mine if mine else set(held) & k.numbers for held in values
                )
            if holds:
                own.append(stems)
            elif states_other:
                other.append(stems)
        if not own or not other:
            return -1
        # The clauses say the same of two things (they share a word: "the right to ... is in
        # Article N"), not what happened next ("In the first one, Gulliver survives a
        # shipwreck, and he swims to Lilliput, ... 6 inches tall"); both have words of their
        # own (a clause that leaves its verb out, "..., and BRCA2 on chromosome 13", says
        # nothing the claim could leave out).
        own_words, other_words = frozenset().union(*own) - own_numbers, frozenset().union(*other) - own_numbers
        # ... or each is dated to a year of its own and the other says nothing else, as a
        # list's items do ("2022: $3.8 billion; 2023: $4.2 billion"), and the claim names the
        # other's year and not this one's
        own_years = {w for w in own_words - other_words if w[:1] == "#" and is_year(w[1:])}
        other_years = {w for w in other_words - own_words if w[:1] == "#" and is_year(w[1:])}
        if own_years and other_years and all(w[:1] == "#" for w in other_words):
            if own_years & said or not other_years & said:
                return -1
        elif (
            not own_words & other_words or not own_words - other_words
            or (own_words - other_words) & said or not (other_words - own_words) & said
        ):
            return -1
        found = j if found < 0 else found
    return found


def _owned_by_another(
    k: KeywordFacts, holders: np.ndarray, facts: Sequence[SentenceFacts], answer: SentenceFacts,
    subject_words: tuple[str, ...],
) -> int:
    """The first of ``holders`` when every one of them is about a name the answer sentence
    does not name (:func:`_about_another`) and that is not the claim's subject with more
    words, does not place the keyword's value beside the
    claim's subject, and places another value of its kind there, sharing none of the
    keyword's (:attr:`SentenceFacts.placed`); else -1. A copy names the holder's subject,
    so it is never judged here.

    >>> facts = [sentence_facts("Emmanuel Macron won 66.1% of the vote against Marine Le Pen's 33.9%.")]
    >>> k = keyword_facts("66.1%", "number")
    >>> _owned_by_another(k, np.array([True]), facts, sentence_facts("Marine Le Pen won 66.1% of the vote."), ("marine", "le", "pen"))
    0
    >>> _owned_by_another(k, np.array([True]), facts, sentence_facts("Emmanuel Macron won 66.1%, Marine Le Pen less."), ("emmanuel", "macron"))
    -1
    """
    subject = "=" + light_stem(subject_words[-1])
    found = -1
    for j in np.flatnonzero(holders).tolist():
        f = facts[j]
        about = _about(f).split()
        own = [set(values) for kind, place, values in f.placed if kind == k.kind and place == subject]
        if (
            not _about_another(f, answer) or all(w in about for w in subject_words)  # "Samsung Galaxy S24" is the Galaxy S24
            or subject in _places_of(k, f) or not own or any(v & k.numbers for v in own)
        ):
            return -1
        found = j if found < 0 else found
    return found


def _places_of(k: KeywordFacts, f: SentenceFacts) -> set[str]:
    """Where sentence ``f`` places the value of number or date ``k`` (:attr:`SentenceFacts.placed`)."""
    return {place for kind, place, values in f.placed if kind == k.kind and set(values) == k.numbers}


def _placed_elsewhere(
    k: KeywordFacts, holders: np.ndarray, facts: Sequence[SentenceFacts], neighbours: tuple[str, ...],
    subject_words: tuple[str, ...] = (),
) -> int:
    """The first of ``holders`` when every one of them places the keyword's value beside
    something (:attr:`SentenceFacts.placed`), none of it what the answer places it beside
    (``neighbours``), and places another value of its kind, sharing none of the keyword's,
    beside one of ``neighbours``; else -1 (and for a name, or no ``neighbours``). A value
    placed beside nothing ("grew from 1.2 million to 1.5 million": 1.5 million follows a
    number) is never judged here, nor one a holder places beside the claim's subject
    (``subject_words``: "Marine Le Pen won 33.9% of the vote." for "Emmanuel Macron won 66.1%
    of the vote against Marine Le Pen's 33.9%.").

    >>> facts = [sentence_facts("Revenue was $5.2 billion and net income was $1.1 billion.")]
    >>> _placed_elsewhere(keyword_facts("$5.2 billion", "number"), np.array([True]), facts, ("<incom",))
    0
    >>> _placed_elsewhere(keyword_facts("$5.2 billion", "number"), np.array([True]), facts, ("<revenu",))
    -1
    """
    if not neighbours or k.kind not in ("number", "date"):
        return -1
    wanted = set(neighbours)
    subject = "=" + light_stem(subject_words[-1]) if subject_words else None
    found = -1
    for j in np.flatnonzero(holders).tolist():
        own = _places_of(k, facts[j])
        if subject in own:
            return -1
        other = any(
            kind == k.kind and place in wanted and values and not set(values) & k.numbers
            and _same_sort(k, values, facts[j])
            for kind, place, values in facts[j].placed
        )
        if not own or own & wanted or not other:
            return -1
        found = j if found < 0 else found
    return found


def _same_sort(k: KeywordFacts, values: tuple[str, ...], f: SentenceFacts) -> bool:
    """Whether ``values``, written in sentence ``f``, are of the sort of the keyword's: dates
    for a date; for a number, counts for a count (of a measured quantity, when ``f``
    measures the same quantity as the keyword: "second-longest" is a rank, not a length),
    ranks for a rank."""
    if k.kind == "date":
        return set(values) <= f.dates
    if not k.cardinals:
        return set(values) <= f.ranks
    if k.measure is not None and not any(m[0] == k.measure[0] for m in f.measures):
        return False
    return set(values) <= f.counts


# The words of a request for an overview, which ask for no predicate of their own ("Tell me
# about Napoleon.", "List the key facts about Acme."), as light stems.
_REQUEST_STEMS = frozenset(
    light_stem(w) for w in (
        "tell about fact facts list summary summarize summarise describe description overview information info "
        "detail details key give explain report write know main important profile background"
    ).split()
)


def asks_a_predicate(question: str) -> bool:
    """Whether a question asks for a predicate: unless it is a request for an overview,
    which holds a word of one (:data:`_REQUEST_STEMS`: "tell", "about", "facts", "overview",
    ...) and nothing else but stopwords and capitalised words (the subject's name).

    >>> [asks_a_predicate(q) for q in ("Acme facts?", "Tell me about Napoleon.", "Who is Acme's CEO?", "How long is the Danube?")]
    [False, False, True, True]
    """
    words = _WORD.findall(question)
    stems = [light_stem(fold(w)) for w in words]
    if not any(stem in _REQUEST_STEMS for stem in stems):
        return True
    return any(
        stem not in _REQUEST_STEMS and fold(w) not in _NON_KEYWORDS and not w[:1].isupper() and not w.isdigit()
        for w, stem in zip(words, stems)
    )


def _about(f: SentenceFacts) -> str:
    """Whom or what sentence ``f`` is about: the name a pronoun opening it stands for, else
    its first name, else the capitalised word opening it (a table row's first cell,
    "| Jupiter | 95 |", whose capital the segmenter does not read as a name); "" when it
    names nothing or opens with a pronoun that stands for no name its page says ("He died
    on Saint Helena." opening a chunk). "Acme Corp is headquartered in Denver." is about Acme Corp, not Denver.

    >>> [_about(sentence_facts(t)) for t in ("Acme Corp is headquartered in Denver.", "| Jupiter | 95 |", "It is tall.")]
    ['acme corp', 'jupiter', '']
    """
    if f.implied:
        return f.implied[0]
    if f.opening in PRONOUNS:
        return ""  # a pronoun whose name the page does not say: someone it does not name
    if f.names:
        return f.names[0]
    return f.opening if f.opening not in _NON_KEYWORDS else ""


def _about_another(f: SentenceFacts, answer: SentenceFacts) -> bool:
    """Whether sentence ``f`` is about someone or something the answer sentence does not name."""
    first = _about(f)
    return bool(first) and not all(w in answer.words for w in first.split())


def _subject_sentence_rival(
    k: KeywordFacts, agreeing: np.ndarray, subject_held: np.ndarray, sentence_document: np.ndarray,
    facts: Sequence[SentenceFacts], answer: SentenceFacts, claim_held: np.ndarray,
) -> int:
    """The sentence of ``agreeing``'s pages that holds the subject (``subject_held``), is
    about it or about nothing the answer does not name (:func:`_about_another`), and states
    another value of the keyword's kind, with at least as many of the claim's other
    keywords (``claim_held``) as any agreeing sentence, the most first (then the first); -1
    when the subject's own sentences hold the keyword, when some agreeing sentence is not
    about someone else (:func:`_about_another`), or when there is none.

    >>> facts = [sentence_facts(t) for t in ("Pierre Curie was born in 1859.", "Marie Curie was born in 1867.")]
    >>> answer = sentence_facts("Marie Curie was born in 1859.")
    >>> _subject_sentence_rival(keyword_facts("1859", "date"), np.array([True, False]), np.array([False, True]),
    ...                         np.zeros(2, dtype=np.int64), facts, answer, np.array([1, 1]))
    1
    """
    if (agreeing & subject_held).any() or not all(_about_another(facts[j], answer) for j in np.flatnonzero(agreeing)):
        return -1
    pages = np.isin(sentence_document, sentence_document[agreeing])
    tried = np.flatnonzero(pages & subject_held & ~agreeing & (claim_held >= claim_held[agreeing].max()))
    for j in tried[np.lexsort((tried, -claim_held[tried]))].tolist():
        # the rival is about the subject ("Marie Curie was born in 1867."), not a sentence
        # that only mentions it ("It is the opening theme to the TV show Cops", on the song's page)
        if not _about_another(facts[j], answer) and states_other_value(k, facts[j], answer):
            return j
    return -1


def _unless_context_disagrees(
    k: KeywordFacts,
    held: np.ndarray,
    stated: np.ndarray,
    predicate: np.ndarray,
    facts: list[SentenceFacts],
    answer: SentenceFacts,
    agreement: float | None,
    predicate_weight: float,
) -> tuple[str, np.ndarray, int]:
    """The last step of :func:`keyword_status` for a held value no anchor source holds:
    supported, unless the sentences that may state its claim with it (``stated``: those
    holding it and those beside them, or their whole documents; see :func:`keyword_status`)
    state the predicate far worse than the best sentence (then contradicted by it, or
    unsupported)."""
    if agreement is not None:
        best = int(np.argmax(predicate))
        top = float(predicate[best])
        if top >= PREDICATE_MINIMUM * predicate_weight and float(predicate[stated].max()) < agreement * top:
            if states_other_value(k, facts[best], answer):
                return "contradicted", np.zeros_like(held), best
            return "unsupported", np.zeros_like(held), -1
    return "supported", held, -1


def locate_keyword(text: str, kind: str, sentence: str, hedge: str = "") -> tuple[int, int] | None:
    """Where ``sentence`` holds the keyword: its text (case-insensitive, whole words), else
    its value (a number written another way, or one it rounds or bounds under ``hedge``:
    :func:`near_value`), else the run from the first to the last of its words (a name),
    else a word of the same stem. None when it holds none of these.

    >>> s = "The Danube is 2,850 kilometres long; the Danube rises in Germany."
    >>> [s[a:b] for a, b in [locate_keyword("danube", "name", s), locate_keyword("2850 km", "number", s)]]
    ['Danube', '2,850']
    >>> s[slice(*locate_keyword("rising", "word", s))], locate_keyword("Rhine", "name", s)
    ('rises', None)
    """
    folded = sentence.casefold()
    if len(folded) == len(sentence):  # casefolding kept the offsets
        for m in re.finditer(re.escape(text.casefold()), folded):
            a, b = m.start(), m.end()
            # CJK text has no spaces: its units stand next to other letters.
            if (a == 0 or not sentence[a - 1].isalnum() or _CJK.match(sentence, a)) and (
                b == len(sentence) or not sentence[b].isalnum() or _CJK.match(sentence, b - 1)
            ):
                return a, b
    if kind in ("number", "date"):
        wanted = {v for _, _, v in all_values(text)}
        for a, b, v in all_values(sentence):
            if v in wanted or (hedge and any(near_value(w, v, hedge) for w in wanted)):
                return a, b
        measured = measures(text, hedge) if kind == "number" else []
        for a, b, m in measures(sentence) if len(measured) == 1 else ():
            if same_measure(measured[0][2], m):
                return a, b
    words = [(m.start(), m.end(), fold(m.group())) for m in _WORD.finditer(sentence)]
    if kind == "name":
        own = tuple(name_words(text))
        for need in map(set, (own, *aliases(own))):  # "Oscars": "Academy Awards"
            hits = [(a, b) for a, b, w in words if w in need]
            if hits and {w for _, _, w in words if w in need} == need:
                return hits[0][0], hits[-1][1]
    stems = {light_stem(w) for w in _WORD.findall(text)}
    for a, b, w in words:
        if light_stem(w) in stems and w not in _NON_KEYWORDS:
            return a, b
    return None


def sentence_verdict(statuses: list[str]) -> str:
    """An answer sentence's verdict from its keywords' statuses: contradicted if any is,
    supported if all are (or there are none), unsupported if none is, partly otherwise."""
    if "contradicted" in statuses:
        return "contradicted"
    n_ok = statuses.count("supported")
    if n_ok == len(statuses):
        return "supported"
    return "unsupported" if n_ok == 0 else "partly"
