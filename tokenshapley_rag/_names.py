"""How a name may be written (docs/method.md §8, the match rule on names): its words without
joiners, titles or a possessive, its initials and acronyms, a number written as a Roman
numeral or an ordinal, a quarter's code. Pure functions over text and folded words.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence

from tokenshapley_rag._segment import _UP

__all__ = [
    "DOTTED_INITIALS",
    "JOINERS",
    "aliases",
    "fold",
    "initials",
    "initials_agree",
    "is_acronym",
    "is_dotted_acronym",
    "is_numeral",
    "name_words",
    "period_words",
    "renumbered",
    "spelled_acronyms",
    "stem_aliases",
    "word_aliases",
]

_WORD = re.compile(r"\w+")

JOINERS = frozenset("of the de del della di da von van der den la le du bin al y and".split())


def fold(word: str) -> str:
    """Casefold, NFKD and drop combining marks ("Rhône" -> "rhone")."""
    decomposed = unicodedata.normalize("NFKD", word.casefold())
    return "".join(c for c in decomposed if not unicodedata.combining(c))


# Initials with periods ("U.S.", "U.K."): an acronym, one word.
DOTTED_INITIALS = re.compile(r"(?:[^\W\d_]\.){2,}")


def is_dotted_acronym(text: str) -> bool:
    """Whether ``text`` is dotted initials in capitals and nothing else ("U.S.", not "J. R.")."""
    return DOTTED_INITIALS.fullmatch(text.strip()) is not None and text.isupper()


_POSSESSIVE = re.compile(r"['\u2019]s\b")


def name_words(text: str) -> list[str]:
    """A name's folded words without joiners, titles or a possessive ("Gate Bridge's" ->
    gate, bridge; "Dr. Laura Chen" -> laura, chen)."""
    words = [f for f in (fold(w) for w in _WORD.findall(_POSSESSIVE.sub("", text))) if f not in JOINERS]
    return [w for w in words if w not in TITLES] if len(words) > 1 else words


# Titles before a person's name: not part of what the name says ("Dr. Laura Chen" is Laura Chen,
# "Hon. William Ouko" the "Justice William Ouko" of a list of judges); ranks by their
# abbreviations only ("General Motors" is no title).
TITLES = frozenset(
    "dr mr mrs ms mx prof sir dame rev hon rt esq messrs mme mlle maj capt lt sgt col cpl pvt adm cmdr brig lieut supt"
    .split()
)


def initials_agree(words: Sequence[str], name: Sequence[str]) -> bool:
    """Whether a name's words and a source name's agree where one writes a word as its
    initial ("L. Chen" and "Laura Chen", "John F. Kennedy" and "John Fitzgerald Kennedy"): in
    order, each word equal or an initial of the other's, the last words equal.

    >>> initials_agree(["l", "chen"], ["laura", "chen"]), initials_agree(["laura", "chen"], ["l", "chen"])
    (True, True)
    >>> initials_agree(["m", "chen"], ["laura", "chen"]), initials_agree(["l", "hale"], ["laura", "chen"])
    (False, False)
    """
    if not words or not name or words[-1] != name[-1]:
        return False
    i = 0
    for w in words:
        while i < len(name) and not (
            name[i] == w or (len(w) == 1 and name[i].startswith(w)) or (len(name[i]) == 1 and w.startswith(name[i]))
        ):
            i += 1
        if i == len(name):
            return False
        i += 1
    return True


_ROMAN = ("i", "ii", "iii", "iv", "v", "vi", "vii", "viii", "ix", "x")
_ORDINAL = ("first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth")


def is_numeral(word: str) -> bool:
    """Whether a name's folded word numbers it: digits or a Roman numeral ("11", "ii")."""
    return word.isdigit() or word in _ROMAN


def renumbered(words: Sequence[str]) -> tuple[str, ...] | None:
    """A name's words with its number written the other way: a closing Roman numeral as an
    opening ordinal, and back ("world war ii" <-> "second world war"); None when it has none.

    >>> renumbered(("world", "war", "ii")), renumbered(("first", "world", "war")), renumbered(("henry",))
    (('second', 'world', 'war'), ('world', 'war', 'i'), None)
    """
    if len(words) >= 2 and words[-1] in _ROMAN:
        return (_ORDINAL[_ROMAN.index(words[-1])], *words[:-1])
    if len(words) >= 2 and words[0] in _ORDINAL:
        return (*words[1:], _ROMAN[_ORDINAL.index(words[0])])
    return None


# Names of one thing that share no word, as answers write them (docs/method.md §8): a short
# table, not a thesaurus. Each group's names are folded words without joiners (name_words).
_ALIAS_GROUPS = (
    (("oscar",), ("oscars",), ("academy", "award"), ("academy", "awards")),
    (("holland",), ("netherlands",)),
    (("britain",), ("great", "britain"), ("united", "kingdom")),
    (("america",), ("united", "states"), ("united", "states", "america")),
)
_ALIASES = {name: tuple(other for other in group if other != name) for group in _ALIAS_GROUPS for name in group}


# A title written as its acronym, within a longer name too ("CEO of Norvale Foods" is held by
# "... will step down as chief executive of Norvale Foods").
_WORD_ALIASES = {
    "ceo": (("chief", "executive"),),
    "cfo": (("chief", "financial"), ("finance", "chief")),
    "coo": (("chief", "operating"),),
    "cto": (("chief", "technology"),),
}


# Words for one count, by light stem: a city's population is stated as its inhabitants or
# residents ("The population of Lyon is 870,321." over "Lyon has 522,250 inhabitants."), so
# "population" is a copied word there, and that sentence states the claim.
_STEM_GROUPS = (("population", "inhabitant", "resident"),)
_STEM_ALIASES = {stem: tuple(other for other in group if other != stem) for group in _STEM_GROUPS for stem in group}
# ... and "people" are counted as a place's inhabitants, and living, residing or dwelling there is
# what they do ("1.5 million people live in Lyon" over "Lyon has 522,250 inhabitants."); not the
# other way round: "500 people attended" states no population, "Curie lived in Paris" no count.
_STEM_ALIASES.update(
    dict.fromkeys(("peopl", "liv", "resid", "inhabit", "dwell"), ("inhabitant", "resident", "population"))
)


def stem_aliases(stem: str) -> tuple[str, ...]:
    """The light stems a word's stem may be written as instead, by a short table of words for
    one count ("population", "inhabitant", "resident"); none for most stems.

    >>> stem_aliases("population"), stem_aliases("resident"), stem_aliases("river")
    (('inhabitant', 'resident'), ('population', 'inhabitant'), ())
    >>> stem_aliases("peopl"), "peopl" in stem_aliases("inhabitant"), stem_aliases("liv")  # people, live
    (('inhabitant', 'resident', 'population'), False, ('inhabitant', 'resident', 'population'))
    """
    return _STEM_ALIASES.get(stem, ())


def word_aliases(word: str) -> tuple[tuple[str, ...], ...]:
    """The words a name's word may be written as instead, by a short table of titles ("ceo":
    "chief executive"); none for most words.

    >>> word_aliases("ceo"), word_aliases("paris")
    ((('chief', 'executive'),), ())
    """
    return _WORD_ALIASES.get(word, ())


def aliases(words: Sequence[str]) -> tuple[tuple[str, ...], ...]:
    """Other names of what ``words`` names, by a short table ("Oscars" is "Academy Awards",
    "Holland" "the Netherlands"); none for most names.

    >>> aliases(("oscars",))[2], aliases(("netherlands",)), aliases(("paris",))
    (('academy', 'awards'), (('holland',),), ())
    """
    return _ALIASES.get(tuple(words), ())


_PERIOD_CODE = re.compile(r"([qh])([1-4])")


def period_words(words: Sequence[str]) -> tuple[str, str] | None:
    """The words of a quarter's or a half's code ("q3" -> third, quarter; "h1" -> first,
    half); None for any other name.

    >>> period_words(("q3",)), period_words(("h2",)), period_words(("h3",)), period_words(("q3", "report"))
    (('third', 'quarter'), ('second', 'half'), None, None)
    """
    code = _PERIOD_CODE.fullmatch(words[0]) if len(words) == 1 else None
    if code is None or (code[1] == "h" and int(code[2]) > 2):
        return None
    return _ORDINAL[int(code[2]) - 1], "quarter" if code[1] == "q" else "half"


def initials(name: str) -> str:
    """The first letters of a folded name's words, joiners left out ("indian premier league" -> "ipl")."""
    return "".join(w[0] for w in name.split() if w not in JOINERS)


def is_acronym(word: str) -> bool:
    """Whether a word written in capitals may be an acronym: two to six letters ("UK", "CDC")."""
    return 2 <= len(word) <= 6 and word.isalpha()


# A run of capitalised words, joined by the small words an acronym leaves out ("Centers for
# Disease Control and Prevention"), a middle initial's period included ("John F. Kennedy").
_CAPITAL_RUN = re.compile(
    rf"{_UP}[\w'’\-]*(?:\s+(?:(?:of|for|and|the|on|in|de|&)\s+)*(?:{_UP}\.(?=\s+{_UP})|{_UP}[\w'’\-]*))*"
)
# Acronyms that are not a name's initials: "USA" is the United States ("of America" left
# unsaid), "USSR" the Soviet Union.
_ACRONYMS_OF = {"united states": ("usa",), "soviet union": ("ussr",)}
_ACRONYM_SKIPS = JOINERS | {"for", "on", "in", "&"}


def spelled_acronyms(text: str) -> frozenset[str]:
    """The acronyms a sentence's names may be written as (folded): the initials of each run
    of capitalised words, small joining words left out ("The World Health Organization" ->
    "who"), and each run of three to six of those initials ("Centers for Disease Control and
    Prevention" -> "cdcp", and "cdc": a name is often shortened to its first words'
    initials, and the run may begin with a word the acronym leaves out, "U.S. Centers ...").

    >>> sorted(spelled_acronyms("The U.S. Centers for Disease Control and Prevention said so."))
    ['cdc', 'cdcp', 'dcp']
    >>> sorted(spelled_acronyms("It is in the United Kingdom."))
    ['uk']
    >>> sorted(spelled_acronyms("John F. Kennedy was born in the United States."))
    ['jfk', 'us', 'usa']
    """
    out: set[str] = set()
    for m in _CAPITAL_RUN.finditer(text):
        run = fold(m.group())
        out.update(a for name, acronyms in _ACRONYMS_OF.items() if name in run for a in acronyms)
        words = [w for w in m.group().split() if w[:1].isupper()]
        initials = "".join(fold(w)[:1] for w in words if fold(w) not in _ACRONYM_SKIPS)
        if len(initials) >= 2:
            out.add(initials)
        for a in range(len(initials)):
            out.update(initials[a:b] for b in range(a + 3, min(len(initials), a + 6) + 1))
    return frozenset(out)
