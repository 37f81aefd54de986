"""Text segmentation: source sentences and answer keywords, with exact character offsets.

Pure functions over ``str``; every span is a ``(start, end)`` pair of Python string
indices (code points), so ``text[start:end]`` is the piece, whatever the script (CJK,
emoji and combining marks included).
"""

from __future__ import annotations

import bisect
import re
import unicodedata
from dataclasses import dataclass

from tokenshapley_rag._units import CURRENCY_ABBREVIATION, CURRENCY_CODES, PERIOD_GROUPING_WORDS, unit_names_pattern

__all__ = [
    "Keyword", "split_sentences", "find_keywords", "token_words", "number_value", "value_spans", "word_pieces",
    "word_number_spans", "word_number_value", "spell_number", "rank_superlative_spans", "is_rank_superlative", "is_ordinal",
    "STOPWORDS", "FILLERS", "FOREIGN_FUNCTION_WORDS", "CITATION_MARKER", "MARKUP", "SECTION_HEADING", "composed",
]

# Abbreviations after which a period does not end a sentence (lowercase, without the dot).
_ABBREVIATIONS = frozenset(
    "mr mrs ms dr prof sr jr st vs etc e.g i.e fig no nos vol al approx inc ltd co corp dept est "
    "jan feb mar apr jun jul aug sep sept oct nov dec u.s u.k u.n gen col lt sgt capt rev gov sen rep "
    "mt ft ave blvd p pp ed eds rs".split()
)
# A sentence ends at . ! ? (optionally followed by closing quotes/brackets) before
# whitespace, at CJK full stops, or at a blank line / line break.
_SENTENCE_END = re.compile(r"""([.!?…]+['"”’)\]]*)(?=\s)|([。！？]+['"”’」』）)]*)|(\n\s*\n|\n)""")
_WORD_BEFORE = re.compile(r"([\w.]+)$")
_INITIALS = re.compile(r"[^\W\d_](?:\.[^\W\d_])*")  # "J", "J.D", "U.S" (the last period stripped)
_NEXT_WORD = re.compile(r"[^\W\d_][\w'’]*")

STOPWORDS = frozenset(
    """a an the and or but nor so yet for of in on at to from by with without within into onto upon
    about above below over under after before during since until while as than then that this these
    those there here where when which who whom whose what why how is are was were be been being am
    do does did done doing have has had having can could may might must shall should will would it
    its it's itself he him his she her hers they them their theirs we us our ours you your yours i me
    my mine not no yes also too very just only all any both each few more most other some such own
    same if because though although however thus therefore whether either neither again further
    once up down out off s t one ones many much between through throughout against among amongst
    across around toward towards via per despite along beyond near beside besides behind beneath
    underneath inside outside amid amidst alongside except till unto versus""".split()
)
# Fillers: words that carry no checkable fact on their own ("making", "every", "I don't
# know"). They are attributed like stopwords but never cited, so they are never flagged.
FILLERS = frozenset(
    """every everything everyone everybody something someone somebody anything anyone nothing
    nobody thing things way ways make makes making made get gets getting got gotten know knows
    knowing knew known think thinks thought say says said saying tell tells told let lets go goes
    going went gone come comes came take takes took taken give gives gave given put puts seem
    seems seemed become becomes became use used uses using well really quite rather even still
    already almost nearly roughly approximately often usually sometimes always never ever lot lots
    kind sort etc like unlike
    don't doesn't didn't isn't aren't wasn't weren't can't cannot couldn't won't wouldn't
    shouldn't haven't hasn't hadn't i'm i've i'd i'll you're you've we're we've they're they've
    he's she's that's there's here's what's let's it'll ok okay sure yes indeed perhaps maybe
    probably certainly actually basically generally also however putting telling taking giving
    coming letting becoming seeming additionally moreover furthermore finally ultimately whereas
    according e.g. i.e. nevertheless nonetheless hence meanwhile consequently afterwards similarly
    likewise""".split()
)
# Function words of French, German, Spanish, Italian and Portuguese, in lower case (an
# answer in one of them has them in every sentence): stopwords when written so. Those that
# are English words too ("die", "war", "will", "hat", "per", "pour", "son", "den", "os") and
# single letters are left out, and a capitalised one opening a name is the name's ("La Paz",
# "Los Angeles", "Der Spiegel").
FOREIGN_FUNCTION_WORDS = frozenset(
    """le la les un une des du de et en est sont été était dans sur avec qui que il ils elle
    elles au aux ce cette ces sa ses leur leurs ne pas ou
    der dem ein eine einen einem einer und ist sind wurde wurden von zu mit auf für aus nach
    über auch nicht oder aber dass als wie im zum zur vom beim
    el los las del por su sus es gli della delle di nel nella è sono das""".split()
)
_NON_KEYWORDS = STOPWORDS | FILLERS | frozenset(w.replace("'", "\u2019") for w in FILLERS if "'" in w)

def _upper_class() -> str:
    """A character class of the uppercase letters below U+2000 (Latin, Greek, Cyrillic: "Č", "Ł",
    "Ö"), as ranges."""
    ranges: list[list[int]] = []
    for c in range(0x2000):
        if chr(c).isupper():
            if ranges and ranges[-1][1] == c - 1:
                ranges[-1][1] = c
            else:
                ranges.append([c, c])
    return "[" + "".join(re.escape(chr(a)) + ("-" + re.escape(chr(b)) if b > a else "") for a, b in ranges) + "]"


# Keyword units, most specific first. Dates and numbers keep their separators, currency
# signs and units; names are runs of capitalised words with a few lowercase joiners.
_UP = _upper_class()
_MONTH = (
    r"(?:Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?|"
    r"Sep(?:t(?:ember)?)?|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)\.?"
)
_MONTH_NAME = r"(?:January|February|March|April|May|June|July|August|September|October|November|December)"
_WEEKDAY = r"(?:(?:Mon|Tues|Wednes|Thurs|Fri|Satur|Sun)day,?\s+)?"
_DAY = r"\d{1,2}(?:st|nd|rd|th)?"
# One day, or a range of days sharing the month that follows or precedes ("12 and 27 August").
_DAYS = rf"{_DAY}(?:\s*[-–]\s*{_DAY}|\s+(?:to|and|through|until|till)\s+{_DAY})?"
_ERA = r"(?:BC|BCE|AD|CE)(?!\w)"
# The part of a decade or a century a date names ("early 1820s", "mid-15th century").
_PART = r"(?:(?:[Ee]arly|[Mm]id|[Ll]ate)[\s-])?"
# A century's ordinal in words ("nineteenth", "twenty-first"), capital or not.
_ORDINAL_WORD = (
    r"(?:(?:[Tt]wenty-)?(?:[Ff]irst|[Ss]econd|[Tt]hird|[Ff]ourth|[Ff]ifth|[Ss]ixth|[Ss]eventh|[Ee]ighth|[Nn]inth)"
    r"|[Tt]enth|[Ee]leventh|[Tt]welfth|(?:[Tt]hir|[Ff]our|[Ff]if|[Ss]ix|[Ss]even|[Ee]igh|[Nn]ine)teenth|[Tt]wentieth)"
)
# A number's value: an optional sign, digit groups with thousands separators, decimals.
_NUMBER = r"(?:\d{1,3}(?:[,\u202f\u00a0 ]\d{3})+(?!\d)|\d+)(?:[.,:/]\d+)*"
# A sign, or the word "minus" before a number that does not follow one ("minus 12.5 °C"; "5
# minus 3" is a sum).
_SIGN = r"(?:(?<![\w.,])[-\u2212+](?=\d)|(?<!\d\s)\b[Mm]inus\s(?=\d))?"
# A currency sign, or a currency code before the amount ("EUR 45.50", "US$ 12", "A$12").
_CURRENCY_CODE = (
    rf"(?:{'|'.join(CURRENCY_CODES)}|{CURRENCY_ABBREVIATION})\s?(?=\d)|(?:US|AU|A|CA|C|NZ|HK|S)\$\s?"
)
_CURRENCY = rf"(?:[$€£¥₹]\s?|#|{_CURRENCY_CODE})"
# A scale word, or its abbreviation ("$4.2bn", "3 mln"); a capital K, M or B glued to the
# digits ("$500M", "3.5B", "50k") is one too.
_MULTIPLIER = r"(?:\s?(?:million|billion|trillion|thousand|hundred|bn|tn|mn|mln|bln)(?!\w)|(?<=\d)[kKMB](?!\w))"
# The units a number keeps: every unit the match rule converts (:mod:`tokenshapley_rag._units`,
# as written), then those it keeps without converting them: durations, clock times, degrees
# without a scale, tons (short or metric), and spellings the tables do not list.
_UNIT_WORD = (
    rf"(?:{unit_names_pattern()}|"
    r"tons?|years?|months?|weeks?|days?|hours?|minutes?|seconds?|decades?|centur(?:y|ies)|"
    r"°|degrees?(?:\s+(?:Celsius|Fahrenheit|C|F)(?!\w))?|atm|atmospheres?|[ap]\.m\.|[AaPp][Mm]|"
    r"sq(?:km|mi|m)|(?:milli|micro|nano)grammes?|(?:kilo|mega|giga|tera)watthours?)"
)
# A unit ("km", "°C", "mg/kg"), a rate ("per hour"), a percent, or a hyphenated unit ("23-man").
_UNIT = (
    r"(?:-[a-z]+(?:-[a-z]+)*(?![\w-])"
    rf"|{_MULTIPLIER}?(?:\s?%|\s?{_UNIT_WORD}(?:/(?:kg|g|s|h|day|km|m|l|L|ml))?(?![\w°]))?(?:\s+per\s+[a-z]+(?!\w))?)"
)
# A power of ten after a number: scientific notation ("6.022e23", "3.0 × 10^8", "5.97 × 10²⁴").
EXPONENT = r"(?:[eE][-+\u2212]?\d{1,3}(?!\w)|\s?[×x·]\s?10(?:\s?\^\s?[-+\u2212]?\d{1,3}(?!\d)|[⁻⁺]?[⁰¹²³⁴⁵⁶⁷⁸⁹]{1,3}))"
_VALUE_RE = rf"{_SIGN}{_NUMBER}(?:{EXPONENT}|['′]\d{{1,2}}[\"″]?)?"  # 5'9" is one height
# A species under its abbreviated genus ("E. coli", "H. pylori", "T. rex"): an initial and a
# lowercase word that is no function word (a sloppy sentence start, "grade A. then", is not one).
_ABBREVIATED_SPECIES = (
    rf"[A-Z]\.\s(?!(?:{'|'.join(sorted(STOPWORDS | FILLERS, key=len, reverse=True))})(?![\w'’\-]))"
    r"[a-z]{3,}(?![\w'’\-])"
)
_KEYWORD = re.compile(
    r"(?P<date>(?=\d|[A-Z]|(?:spring|summer|autumn|fall|winter|early[\s-]|mid[\s-]|late[\s-])\d?|[a-z]+(?:-[a-z]+)?[\s-]centur)"  # (a quick test)
    rf"(?:{_WEEKDAY}{_MONTH}\s+{_DAYS},?\s+(?:\d{{1,4}}\s?{_ERA}|\d{{3,4}}(?!\d))"  # June 5, 2021; December 6 through 29, 1927; March 15, 44 BC
    rf"|{_WEEKDAY}{_DAYS}\s+(?:of\s+)?{_MONTH}(?!\w),?\s+(?:\d{{1,4}}\s?{_ERA}|\d{{3,4}}(?!\d))"  # Saturday 20 May 1217; 12 and 27 August 2011; 15 March 44 BC
    rf"|{_MONTH}\s+\d{{4}}(?!\d)"  # June 2021
    r"|\d{4}-\d{2}-\d{2}(?!\d)"  # 2021-06-05
    r"|\d{1,2}(?P<date_sep>[./])\d{1,2}(?P=date_sep)\d{4}(?!\d|[./]\d)"  # 31.03.1889, 14/07/2022
    rf"|{_WEEKDAY}{_MONTH}\s+{_DAY}(?![\d\w])"  # February 8
    rf"|{_WEEKDAY}{_DAY}\s+(?:of\s+)?{_MONTH}(?!\w)"  # 14 August
    r"|(?:[Ss]pring|[Ss]ummer|[Aa]utumn|[Ff]all|[Ww]inter)\s+\d{4}(?!\d)"  # spring 2022
    rf"|{_PART}(?:1\d|20)\d0['’]?s(?!\w)"  # 1960s, mid-1960s, early 1820s
    rf"|{_PART}(?:\d{{1,2}}(?:st|nd|rd|th)|{_ORDINAL_WORD})[\s-]+centur(?:y|ies)(?:\s+{_ERA})?(?!\w)"  # late 19th century, the fifteenth century
    rf"|\d{{1,4}}\s?{_ERA}|AD\s?\d{{1,4}}(?!\d)"  # 43 BC
    rf"|{_MONTH_NAME}(?!\w)(?!\s+{_UP})"  # a month alone ("in August"); see _sentence_keywords
    r"))"
    rf"|(?P<number>(?=[\d$€£¥₹#+\-\u2212]|[Mm]inus\s\d|{_CURRENCY_CODE}|v\d+\.\d)"
    rf"(?:v(?=\d+\.\d))?"  # a version ("v2.0.1"): its number
    rf"{_CURRENCY}?{_VALUE_RE}(?:[-–]{_CURRENCY}?{_NUMBER})?(?:st|nd|rd|th)?(?:[x×](?!\w)|{_UNIT})?(?!\w)"
    r")"
    r"|(?P<name>"
    rf"{_ABBREVIATED_SPECIES}|"
    # A period continues a name only after an initial or a short abbreviation ("J. R.",
    # "St. Louis"), never after a whole word: "France. It" is two sentences. Dotted
    # initials ("U.S.", "J.D.") and "Jr." keep their periods.
    rf"(?:(?:{_UP}\.)+{_UP}\.?(?!\w)|[JS]r\.|{_UP}(?:[\w'’\-]{{0,2}}\.(?=\s+{_UP})|(?:[\w'’\-]|&(?=[A-Z]))*))"
    # A possessive before an acronym ends a name: "Acme's CEO" is Acme's, and its CEO
    # ("Joe's Garage", "Blazer's Mills" stay whole).
    r"(?:(?!(?<=[’']s)\s+[A-Z]{2,}(?![\w’']))\s+(?:(?:of|the|de|del|della|di|da|von|van|der|den|la|le|du|bin|al|y)\s+)*"
    rf"(?!{_MONTH}\s+\d)"  # "In June 5, 2021": leave the date to the date pattern
    rf"(?:{_ABBREVIATED_SPECIES}|(?:{_UP}\.)+{_UP}\.?(?!\w)|[JS]r\.|(?:al|el|ul|ad|ud|ibn|bin|abu)-{_UP}[\w'’\-]*"
    rf"|{_UP}(?:[\w'’\-]{{0,2}}\.(?=\s+{_UP})|(?:[\w'’\-]|&(?=[A-Z]))*)))*"
    r")"
    r"|(?P<word>(?:[a-z]\.){2,}|\w+(?:['’\-]\w+)*)"
)
# A month name alone is a date after these words ("in August", "(usually in May)").
_MONTH_ALONE_AFTER = frozenset("in on of since until by from during before after through early late mid last next this every".split())


@dataclass(frozen=True, slots=True)
class Keyword:
    """A unit of the answer a reader cites as one thing.

    ``kind`` is ``"date"``, ``"number"``, ``"name"``, ``"word"`` or ``"stopword"``;
    ``citable`` is False for stopwords (they are attributed but not cited alone).
    """

    start: int
    end: int
    text: str
    kind: str

    @property
    def citable(self) -> bool:
        return self.kind != "stopword"


# Capitalised words after initials that start a new sentence rather than go on into a name:
# function words, fillers and sentence adverbs ("vitamin D. In", "the U.S. Meanwhile").
_OPENS_SENTENCE = STOPWORDS | FILLERS | frozenset("later today instead otherwise overall".split())


# A German month name: after "31." it goes on with the date ("am 31. März 1889").
_GERMAN_MONTH = re.compile(r"(?:Januar|Jänner|Februar|März|April|Mai|Juni|Juli|August|September|Oktober|November|Dezember)\b")


def _ends_sentence(text: str, start: int, match: re.Match) -> bool:
    """Whether a period-like match really ends a sentence (not an abbreviation, initial
    or decimal point)."""
    if match.group(3) or match.group(2):
        return True
    punct = match.group(1)
    if punct[0] != ".":
        return True
    before = _WORD_BEFORE.search(text, start, match.start())
    raw = before.group(1).rstrip(".") if before else ""
    nxt = match.end()
    while nxt < len(text) and text[nxt].isspace():
        nxt += 1
    if _INITIALS.fullmatch(raw) and raw[0].isupper() and text[before.start() - 1 : before.start()] not in ("°", "/", "-"):
        # Initials ("J. K. Rowling", "J.D. Payne", "U.S. Army") go on into a name; a
        # capitalised function word after them starts a new sentence ("vitamin D. In",
        # "Washington, D.C. It"). A letter glued to a symbol is no initial ("120°C. Place").
        follower = _NEXT_WORD.match(text, nxt)
        word = follower.group() if follower else ""
        return word[:1].isupper() and len(word) > 1 and word.lower() in _OPENS_SENTENCE
    if raw.isdigit() and len(raw) <= 3 and not text[start : before.start()].strip() and "\n" not in text[match.end() : nxt]:
        return False  # a numbered list's item number ("1. Preheat the oven"), not a sentence
    if raw.isdigit() and len(raw) <= 2 and _GERMAN_MONTH.match(text, nxt):
        return False  # a German date's day ("am 31. März 1889")
    word = raw.lower()
    if word in _ABBREVIATIONS and not (len(raw) > 1 and raw.isupper()):
        return False  # "Ms. Smith"; but "MS." is an acronym ("diagnosed with MS. Nevertheless, ...")
    if len(word) == 1 and word.isalpha() and raw.islower():
        return True  # a lowercase single letter ("plan b.")
    # A lowercase continuation means the period was not a sentence end ("approx. two").
    return nxt >= len(text) or not text[nxt].islower()


def split_sentences(text: str) -> list[tuple[int, int]]:
    """Split ``text`` into sentences; return their ``(start, end)`` offsets.

    Spans are stripped of surrounding whitespace, cover every non-space character of the
    text exactly once, and appear in order.

    Examples
    --------
    >>> t = "Dr. Smith won 5.5 million in 2020. He moved to Paris! Why? Nobody knows"
    >>> [t[s:e] for s, e in split_sentences(t)]
    ['Dr. Smith won 5.5 million in 2020.', 'He moved to Paris!', 'Why?', 'Nobody knows']
    """
    spans: list[tuple[int, int]] = []
    start = 0
    for match in _SENTENCE_END.finditer(text):
        if match.end() <= start or not _ends_sentence(text, start, match):
            continue
        _append_stripped(text, start, match.end(), spans)
        start = match.end()
    _append_stripped(text, start, len(text), spans)
    return spans


def _append_stripped(text: str, start: int, end: int, out: list[tuple[int, int]]) -> None:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    if end > start:
        out.append((start, end))


def find_keywords(text: str, *, skip_markup: bool = True) -> list[Keyword]:
    """Segment an answer into keyword units (dates, numbers with units, names, words).

    Units never cross a sentence boundary (:func:`split_sentences`): each sentence is
    segmented on its own. Every word of the text belongs to exactly one unit; punctuation
    and spaces belong to none. A number keeps its sign, separators, decimals, ordinal,
    currency and unit together (a range written with a dash too); a date is one unit
    (docs/method.md §8 lists the cases). A capitalised stopword that opens a
    name ("The", "In") is split off as its own stopword unit unless the whole run is a
    single word. Stopwords and fillers (:data:`STOPWORDS`, :data:`FILLERS`) get kind
    ``"stopword"``: they are attributed but never cited, and so are the units of a citation
    marker (:data:`CITATION_MARKER`) and, with ``skip_markup`` (an answer's text), of markup
    that labels it (:data:`MARKUP`: a heading, a table's header row, an HTML tag); a source's
    text is read with ``skip_markup=False``, since its heading names its topic.

    Examples
    --------
    >>> [(k.text, k.kind) for k in find_keywords("In June 5, 2021 the Bank of America paid $3.5 million.")]
    [('In', 'stopword'), ('June 5, 2021', 'date'), ('the', 'stopword'), ('Bank of America', 'name'), ('paid', 'word'), ('$3.5 million', 'number')]
    >>> [k.text for k in find_keywords("It flows into the North Sea. The Danube is -2.5% longer.") if k.citable]
    ['flows', 'North Sea', 'Danube', '-2.5%', 'longer']
    >>> [(k.text, k.kind) for k in find_keywords("J.D. Payne won 27-17 in the U.S. on Saturday 20 May 1217.") if k.citable]
    [('J.D. Payne', 'name'), ('won', 'word'), ('27-17', 'number'), ('U.S.', 'name'), ('Saturday 20 May 1217', 'date')]
    """
    view = _visible(text)
    units: list[Keyword] = []
    sentences = split_sentences(view)
    for a, b in sentences:
        if _CJK.search(view, a, b) is not None:
            units.extend(_cjk_sentence_keywords(view, a, b))
        elif _shouted(view[a:b]):
            # A sentence in capitals says nothing by its capitals ("BARACK OBAMA WAS BORN IN
            # HONOLULU." was one name): its words are read in lower case, the match rule
            # compares them folded.
            lowered = view[:a] + view[a:b].lower() + view[b:]
            units.extend(Keyword(k.start, k.end, view[k.start : k.end], k.kind) for k in _sentence_keywords(lowered, a, b))
        else:
            units.extend(_sentence_keywords(view, a, b))
    patterns = (CITATION_MARKER, MARKUP) if skip_markup else (CITATION_MARKER,)
    markers = [m.span() for pattern in patterns for m in pattern.finditer(view)]
    if skip_markup:
        markers += _refusals(view, sentences) + _enumeration(view)
    if markers:
        # A generator's own citation marker ("[1]", "(source 2)") points at a source, and
        # markup (a heading, a table's header, an HTML tag) labels the answer: neither
        # states anything a source could hold, so their units are never cited.
        units = [
            Keyword(k.start, k.end, k.text, "stopword") if any(a <= k.start and k.end <= b for a, b in markers) else k
            for k in units
        ]
    if view is not text:  # each unit's text as the caller wrote it
        units = [Keyword(k.start, k.end, text[k.start:k.end], k.kind) for k in units]
    return units


# An item number in parentheses, "(1) ... (2) ... (3) ...": an answer that numbers its items
# so states no fact by the numbers (as a numbered list's "1." does not).
_ENUMERATOR = re.compile(r"(?<![\w)])\((\d{1,2})\)(?=\s)")


def _enumeration(text: str) -> list[tuple[int, int]]:
    """The spans of ``text``'s item numbers in parentheses, when it numbers items so from
    (1) and (2) on; none otherwise (a lone "(15)" may be an age or a count)."""
    found = [(m.span(), m.group(1)) for m in _ENUMERATOR.finditer(text)]
    numbers = {n for _, n in found}
    return [span for span, _ in found] if {"1", "2"} <= numbers else []


# A citation marker a generator writes after a claim: "[1]", "[1, 3]", "[2-4]", "[^1]",
# "[source 1]", "(Source 2)", "(doc 3; doc 4)", "【1†source】". A bare "(1)" is not one: it
# also numbers the items of a list (markup then, from (1) and (2) on: `_enumeration`).
_MARKER_NUMBERS = r"\d{1,3}(?:\s*(?:[,;\u2013-]|and)\s*\d{1,3})*"
_MARKER_LABEL = r"(?:sources?|docs?|documents?|refs?|references?|citations?|passages?|chunks?)\s*#?\s*"
CITATION_MARKER = re.compile(
    rf"\[\^?\s*(?:{_MARKER_LABEL})?{_MARKER_NUMBERS}\s*\]"
    rf"|\(\s*{_MARKER_LABEL}{_MARKER_NUMBERS}(?:\s*[,;]\s*{_MARKER_LABEL}{_MARKER_NUMBERS})*\s*\)"
    r"|\u3010\d{1,3}(?:\u2020[^\u3011]{0,40})?\u3011",
    re.IGNORECASE,
)


# A heading of an answer's section: a markdown heading line ("## Acme Corp"), a line over an
# underline of "=" or "-" (setext), and a line that is one bold span alone, followed by more
# ("**Visitors**", "**Key facts:**"; a list item never: "- **Paris**" may be an answer).
SECTION_HEADING = re.compile(
    r"^[ \t]{0,3}#{1,6}[ \t][^\n]*"
    r"|^(?![ \t]*(?:[-*+•]|\d{1,3}[.)])[ \t])[ \t]{0,3}\S[^\n]*(?=\n[ \t]{0,3}(?:=+|-+)[ \t]*$)"
    r"|^[ \t]{0,3}(?:\*\*|__)[^*_\n]+(?:\*\*|__)[ \t]*:?[ \t]*(?=\n[ \t]*\S)",
    re.MULTILINE,
)

# A source named in prose by its label and number ("According to Source 2, ...", "as
# Document 3 states", "Sources 1 and 3") or a superscript number after a word ("Lopez^1"):
# the generator's reference, as "[2]" is.
_PROSE_MARKER = (
    rf"\b(?:sources?|documents?|docs?|passages?|chunks?|excerpts?|snippets?)\s*#?\s*{_MARKER_NUMBERS}\b"
    r"|(?<=[^\W\d_]|[.)\]])\^\d{1,3}(?!\d)"
    # ... and the generator's words about its sources and its answer: "According to the
    # passage,", "The passage mentions that", "The answer to the question is:"
    r"|\baccording\s+to\s+(?:the|these|this|my)\s+(?:provided\s+|given\s+)?"
    r"(?:passages?|context|texts?|documents?|sources?|articles?|excerpts?|information|search\s+results?)\b"
    r"|\b(?:the|these|this)\s+(?:provided\s+|given\s+)?(?:passages?|context|texts?|documents?|sources?|articles?|excerpts?)\s+"
    r"(?:mentions?|says?|states?|notes?|explains?|indicates?|reports?|shows?|suggests?)(?:\s+that)?\b"
    r"|\b(?:the|my)\s+answer\s+to\s+(?:the|this|your)\s+question\s+is\b"
)

# The generator's list of its sources, at the end of an answer: a "Sources:" or "References:"
# line and the list items under it ("Sources:\n- [1] Acme 10-K (2023)").
_SOURCES_LIST = (
    r"^[ \t]{0,3}(?:#{1,6}[ \t]+)?(?:\*\*|__)?(?:sources?|references?|citations?|bibliography|works\s+cited)"
    r"[ \t]*(?::(?:\*\*|__)?|(?:\*\*|__)[ \t]*:?)[^\n]*"
    r"(?:\n[ \t]*(?:[-*+•]|\d{1,3}[.)]|\[\^?\d{1,3}\]:?)[ \t][^\n]*)*"
)

# A link's target and a URL: "(https://...)" after a link's text, "<https://...>", a bare
# "https://..." or "www....": an address, whose words ("https", "pdf", "2023") say nothing.
_ADDRESS = r"\]\([^)\s]*(?:\s+\"[^\"\n]*\")?\)|<(?:https?|ftp|mailto):[^>\s]*>|\b(?:https?://|www\.)[^\s<>()\[\]]+[^\s<>()\[\].,;:!?'\"]"

# Markup that labels an answer and claims nothing: a section's heading (:data:`SECTION_HEADING`),
# a table's header row (the row above its "|---|" line), an HTML tag ("<br>", "</b>"), a
# numbered list's item number ("1.", "2)" opening a line), a task list's box ("- [x]"), a
# fenced code block's fence line ("```bash"), the generator's own footnote definitions
# ("[^1]: Acme 2021 filing"), a list's preamble ("Here are the key facts:"), a link's target or a URL, a source named by
# its label ("According to Source 2") and the generator's list of its sources.
MARKUP = re.compile(
    rf"{_SOURCES_LIST}|{SECTION_HEADING.pattern}"
    r"|^[ \t]*\d{1,3}[.)](?=[ \t])"
    r"|^[ \t]*\|[^\n]*\|[ \t]*(?=\n[ \t]*\|?[ \t]*:?-{3,}:?[ \t]*\|)"
    r"|</?[A-Za-z][A-Za-z0-9]*(?:\s[^<>\n]*)?/?>"
    r"|^[ \t]*[-*+][ \t]+\[[ xX]\](?=[ \t])"
    r"|^[ \t]{0,3}(?:```|~~~)[^\n]*"
    r"|^[ \t]{0,3}\[\^[^\]\n]+\]:[^\n]*"
    # a list's preamble that only announces it: "Here are the key facts:" over the items
    r"|^[ \t]{0,3}here\s+(?:are|is)\b[^\n:.!?]{0,80}:[ \t]*(?=\n\s*(?:[-*+•]|\d{1,3}[.)]|\|))"
    rf"|{_ADDRESS}|{_PROSE_MARKER}",
    re.MULTILINE | re.IGNORECASE,
)


# A sentence that says what the sources do not say ("The sources do not mention its
# architect.", "I don't know.", "This is not stated in the context."): a statement about
# the sources, not a claim they could hold.
_REFUSAL = re.compile(
    r"\b(?:the\s+|these\s+|my\s+)?(?:provided\s+|given\s+|available\s+|retrieved\s+)?"
    r"(?:sources?|context|documents?|passages?|texts?|information|excerpts?|search\s+results?)"
    r"(?:\s+(?:provided|given|available|above|I\s+have))?\s+(?:do(?:es)?|did)(?:\s*n[o’']?t|\s+not)\s+"
    r"(?:say|mention|state|specify|contain|include|provide|give|indicate|discuss|cover|address|explain|list|name|tell)\b"
    r"|\b(?:is|are|was|were)\s+not\s+(?:mentioned|stated|specified|given|provided|included|found|covered|discussed)"
    r"\s+in\s+(?:the\s+)?(?:provided\s+|given\s+)?(?:sources?|context|documents?|passages?|texts?|information)\b"
    r"|\bI\s+(?:do\s+not|don[’']t|cannot|can[’']t|could\s+not|couldn[’']t)\s+(?:know|find|tell|determine|say|answer)\b"
    r"|\bno\s+information\s+(?:about|on|regarding|is\s+(?:given|provided))\b"
    r"|\bthere\s+is\s+no\s+(?:mention|information)\b",
    re.IGNORECASE,
)
# Where a refusal's clause ends when the sentence goes on with a claim ("..., but it was
# completed in 1889.").
_CLAIM_AFTER = re.compile(r",?\s+(?:but|however|although|though)\b|;", re.IGNORECASE)


def _refusals(text: str, sentences: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The spans of the ``sentences`` of ``text`` (:func:`split_sentences`) that say what the
    sources do not say (:data:`_REFUSAL`), from their start to their end or to a clause that
    goes on with a claim.

    >>> t = "It is tall. The sources do not say who painted it, but it was completed in 1889."
    >>> [t[a:b] for a, b in _refusals(t, split_sentences(t))]
    ['The sources do not say who painted it']
    """
    out = []
    for a, b in sentences:
        refusal = _REFUSAL.search(text, a, b)
        if refusal is not None:
            after = _CLAIM_AFTER.search(text, refusal.end(), b)
            out.append((a, after.start() if after else b))
    return out


# Zero-width and presentation characters (ZWSP, ZWJ, soft hyphen, variation selectors, BOM):
# invisible to a reader, so they must never split or hide a keyword.
_INVISIBLE = re.compile("[\u00ad\u034f\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\ufe00-\ufe0f\ufeff]")


# Combining marks (a decomposed "u\u0308" is "ü"): part of the letter they follow.
_COMBINING = re.compile("[\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f]")


_CAPITALS_WORD = re.compile(r"[^\W\d_]{2,}")


def _shouted(sentence: str) -> bool:
    """Whether a sentence is written in capitals: three words of letters or more, no
    lower-case letter, and lower-casing keeps its length (offsets stay the same)."""
    return (
        not any(ch.islower() for ch in sentence) and len(_CAPITALS_WORD.findall(sentence)) >= 3
        and len(sentence.lower()) == len(sentence)
    )


def composed(text: str) -> str:
    """``text`` in Unicode's composed form (NFC), where the match rule compares words: a
    decomposed "Zu\u0308rich" is the "Zürich" a source writes. Only where no offsets are
    kept (a sentence's facts); answer offsets are read from :func:`_visible`.

    >>> composed("Zu\u0308rich") == "Z\u00fcrich"
    True
    """
    return text if text.isascii() else unicodedata.normalize("NFC", text)


# Emphasis written with underscores ("_$4.2 billion_", "__Paris__"): markup, which the word
# patterns (``\w`` holds "_") would glue to the keyword ("billion_" was a word of its own and
# "$4.2" a number without its scale). An underscore inside a word ("ACME_TOKEN") stays.
_EMPHASIS_UNDERSCORE = re.compile(r"(?<![\w_])_{1,3}(?=[^\s_])|(?<=[^\s_])_{1,3}(?![\w_])")


def _visible(text: str) -> str:
    """``text`` with underscore emphasis blanked, each invisible character inside a word
    replaced by the next letter (same length, so offsets hold) and any other one by a
    space, and each combining mark
    after a letter by that letter (text in Unicode's decomposed form, NFD, keeps its words
    whole); ``text`` itself when it has none.

    >>> _visible("Eif\u200bfel \u200bTower Zu\u0308rich")
    'Eifffel  Tower Zuurich'
    >>> _visible("It was _$4.2 billion_ in __Paris__, set by ACME_TOKEN.")
    'It was  $4.2 billion  in   Paris  , set by ACME_TOKEN.'
    """
    emphasis = list(_EMPHASIS_UNDERSCORE.finditer(text)) if "_" in text else []
    if not emphasis and (text.isascii() or (_INVISIBLE.search(text) is None and _COMBINING.search(text) is None)):
        return text
    chars = list(text)
    for m in emphasis:
        chars[m.start() : m.end()] = " " * (m.end() - m.start())
    for m in reversed(list(_INVISIBLE.finditer(text))):
        i = m.start()
        before = chars[i - 1] if i > 0 else " "
        after = chars[i + 1] if i + 1 < len(chars) else " "
        chars[i] = after if before.isalnum() and after.isalnum() else " "
    for m in _COMBINING.finditer(text):
        i = m.start()
        if i > 0 and chars[i - 1].isalpha():
            chars[i] = chars[i - 1]
    return "".join(chars)


# ---------------------------------------------------------------------- CJK
# Scripts written without spaces between words: Han ideographs (with the iteration marks
# and their extensions), hiragana and katakana (half-width too). Hangul is left out: Korean
# separates its words with spaces.
_HAN = "\u3005\u3007\u3021-\u3029\u3038-\u303b\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003134f"
_HIRAGANA = "\u3041-\u309f"
_KATAKANA = "\u30a0-\u30ff\u31f0-\u31ff\uff66-\uff9f"
_CJK_CHARS = _HAN + _HIRAGANA + _KATAKANA
_CJK = re.compile(f"[{_CJK_CHARS}]")
_CJK_RUN = re.compile(f"[{_CJK_CHARS}]+")
# A run of one script: each Han character alone (no dictionary says where a word ends, and a
# character is what a source holds or not), a run of hiragana (particles and endings), a run
# of katakana (a loanword or a name).
_CJK_UNIT = re.compile(f"(?P<han>[{_HAN}])|(?P<hiragana>[{_HIRAGANA}]+)|(?P<katakana>[{_KATAKANA}]+)")
# Chinese function characters (simplified and traditional): attributed, never cited, like
# STOPWORDS ("的", "是", "在", "和", "不", ...).
_CJK_STOPWORDS = frozenset(
    "的了是在和与及或也都就而并但于把被从对向为以之其这那个有着过吗呢吧啊很又还我你他她它们该此等将已所由给让使会能要可不没"
    "與從對為這個們著過嗎該將會讓給沒於"
)


def _cjk_sentence_keywords(text: str, begin: int, stop: int) -> list[Keyword]:
    """:func:`_sentence_keywords` of a sentence holding CJK text: its CJK runs split into
    units (:data:`_CJK_UNIT`), the text between them segmented as usual.

    >>> [(k.text, k.kind) for k in _cjk_sentence_keywords("埃菲尔铁塔高330米。", 0, 11)]
    [('埃', 'word'), ('菲', 'word'), ('尔', 'word'), ('铁', 'word'), ('塔', 'word'), ('高', 'word'), ('330', 'number'), ('米', 'word')]
    >>> [(k.text, k.kind) for k in _cjk_sentence_keywords("東京タワーは1958年に完成した", 0, 17) if k.citable]
    [('東', 'word'), ('京', 'word'), ('タワー', 'word'), ('1958', 'date'), ('年', 'word'), ('完', 'word'), ('成', 'word')]
    """
    units: list[Keyword] = []
    at = begin
    for run in _CJK_RUN.finditer(text, begin, stop):
        a = run.start()
        if at < a:
            units.extend(_sentence_keywords(text, at, a))
        for m in _CJK_UNIT.finditer(text, a, run.end()):
            piece = m.group()
            stopword = m.lastgroup == "hiragana" or (m.lastgroup == "han" and piece in _CJK_STOPWORDS)
            units.append(Keyword(m.start(), m.end(), piece, "stopword" if stopword else "word"))
        at = run.end()
    if at < stop:
        units.extend(_sentence_keywords(text, at, stop))
    return units


def word_pieces(text: str) -> list[str]:
    """The words of ``text`` the match rule compares (:mod:`tokenshapley_rag._support`):
    runs of word characters, except that a CJK run gives each of its characters and each
    pair of neighbours. A CJK unit of several characters (a katakana word) is then held
    only by a sentence holding its characters next to each other, and a Han character by
    a sentence holding it anywhere.

    >>> word_pieces("Tower 巴黎铁塔 ok")
    ['Tower', '巴', '巴黎', '黎', '黎铁', '铁', '铁塔', '塔', 'ok']
    """
    out: list[str] = []
    for m in _WORD_RUN.finditer(text):  # a CJK character comes alone; its pair follows it
        out.append(m.group())
        if _CJK.fullmatch(m.group()) and _CJK.match(text, m.end()):
            out.append(text[m.start() : m.end() + 1])
    return out


# A numbered list's item number opening a sentence ("1. ", "2) "): the word after it opens the sentence.
_ITEM_NUMBER = re.compile(r"\d{1,3}[.)][ \t]+")


def _sentence_keywords(text: str, begin: int, stop: int) -> list[Keyword]:
    units: list[Keyword] = []
    item = _ITEM_NUMBER.match(text, begin, stop)
    opening = item.end() if item else begin  # where the sentence's first word may stand
    for match in _KEYWORD.finditer(text, begin, stop):
        kind = match.lastgroup or "word"
        start, end = match.start(), match.end()
        piece = text[start:end]
        if kind == "date" and _MONTH_ALONE.fullmatch(piece) and not _month_is_date(text, begin, start):
            kind = "name"  # "May" opening a sentence: a capitalised word like any other
        if kind == "name":
            # A closing quote is not part of the name ("in ‘Denver’", "the 'Denver'").
            while len(piece) > 1 and piece[-1] in "'’":
                end -= 1
                piece = piece[:-1]
            # Peel capitalised stopwords ("The", "In") off the front of a multi-word name.
            while _has_space(piece):
                first = re.match(r"\S+", piece)
                assert first is not None
                if first.group(0).lower() not in _NON_KEYWORDS or _ACRONYM.fullmatch(first.group(0)):
                    break
                units.append(Keyword(start, start + first.end(), first.group(0), "stopword"))
                rest = re.match(r"\S+\s+", piece)
                assert rest is not None
                start += rest.end()
                piece = text[start:end]
            if not _has_space(piece) and piece.lower() in _NON_KEYWORDS and not _ACRONYM.fullmatch(piece):
                kind = "stopword"
            elif (
                not _has_space(piece) and len(piece) > 1 and piece[1:].islower()
                and piece.lower() in FOREIGN_FUNCTION_WORDS and _ALNUM.search(text, opening, start) is None
            ):
                kind = "stopword"  # "La tour Eiffel ...", "Il a ...": a function word opening its sentence
            elif _MONTH_ALONE.fullmatch(piece) and _month_is_date(text, begin, start):
                kind = "date"  # "In August, ...": the name pattern took "In August"
            elif not _has_space(piece):
                # A capitalised word that opens its sentence (after a bullet or quote too) says
                # nothing by its capital: a word here; the match rule asks the sources.
                opens = _ALNUM.search(text, opening, start) is None
                # ... but an acronym is a name wherever it stands ("JFK was shot in 1963.")
                # ... and so is a code with a digit ("BRCA1 is on chromosome 17.", "A380s ...").
                kind = "name" if piece[:1].isupper() and (
                    not opens or _ACRONYM.fullmatch(piece) or _CODE.fullmatch(piece)
                ) else "word"
                if opens and word_number_value(piece) is not None and not is_ordinal(text, start, end):
                    # "Sixty-two percent ...", "Fifteen people ...": a count ("Second, ..." is
                    # a discourse marker more often than a rank)
                    kind = "number"
        elif kind == "word" and (piece.lower() in _NON_KEYWORDS or piece in FOREIGN_FUNCTION_WORDS):
            kind = "stopword"
        elif kind == "word" and _CAMEL_NAME.fullmatch(piece):
            kind = "name"  # "iPhone", "eBay": a brand's capital inside the word
        elif kind == "word" and (word_number_value(piece) is not None or _ranks_first(text, start, end)):
            kind = "number"  # "fifteen", "second-largest", "the largest": a count or a rank, checked by value
        elif kind == "number" and _YEAR.fullmatch(piece):
            kind = "date"  # a bare year, or a range of years ("2008-2010", "2022-23")
        elif kind == "number" and (constant := _YEAR_MONEY.fullmatch(piece)) is not None:
            # "in 2017 dollars": a year's money, not an amount of 2,017
            units.append(Keyword(start, start + constant.end(1), constant.group(1), "date"))
            start, piece, kind = start + constant.start(2), constant.group(2), "word"
        units.append(Keyword(start, end, piece, kind))
    units = _numbered_names(text, units)
    compounds = [
        (a, b) for a, b in (m.span() for m in _compound_numbers(text, begin, stop))
        # not where a unit runs out of it ("Seven Thousand Islands" stays a name)
        if not any(k.start < b and k.end > a and not (a <= k.start and k.end <= b) for k in units)
    ]
    if compounds:  # "two hundred and fifty" is one count, not "two" and "fifty"
        whole = [Keyword(a, b, text[a:b], "number") for a, b in compounds]
        units = sorted(
            [k for k in units if not any(a <= k.start and k.end <= b for a, b in compounds)] + whole,
            key=lambda k: k.start,
        )
    return _with_units_after(text, stop, _titles_apart(units))


# A title's acronym before "of" and a name is a role and the name, two facts ("CEO of Norvale
# Foods": the page may name the company in one sentence and its chief executive in the next).
_TITLE_OF = re.compile(r"(C[EFOT]O)(\s+of\s+)(\S.*)")


def _titles_apart(units: list[Keyword]) -> list[Keyword]:
    """``units`` with a name "CEO of X" cut into the title "CEO", "of" and the name "X"."""
    out: list[Keyword] = []
    for k in units:
        m = _TITLE_OF.fullmatch(k.text) if k.kind == "name" else None
        if m is None:
            out.append(k)
            continue
        title_end, of = k.start + m.end(1), k.start + m.end(1) + m.group(2).index("of")
        out += [
            Keyword(k.start, title_end, m.group(1), "name"),
            Keyword(of, of + 2, "of", "stopword"),
            Keyword(k.start + m.start(3), k.end, m.group(3), "name"),
        ]
    return out


# A unit after a number written in words ("six kilometres", "six per cent"), and what a
# number with a glued "m" counts ("1.5m visitors": a million, not metres; the match rule
# reads the "m" by the plural after it).
_WORD_NUMBER_UNIT = re.compile(rf"\s+(?:per\s+cent|{_UNIT_WORD})(?![\w°/-])")
_GLUED_M = re.compile(r".*\dm")
# The plural a glued "m" counts ("1.5m visitors", "10m tonnes"; not "400m hurdles"), read by
# the match rule too (`_values._scaled`).
COUNTED_AFTER = re.compile(r"\s+(?!(?:hurdles|heats|relays|lengths|laps|intervals)(?!\w))[a-z]{2,}s(?![\w'’-])")


def _with_units_after(text: str, stop: int, units: list[Keyword]) -> list[Keyword]:
    """``units`` with each number written in words joined to the unit after it, and each
    number with a glued "m" to the plural after it, as a number written in digits keeps its
    unit: "six kilometres" and "6 kilometres" are one keyword each."""
    out: list[Keyword] = []
    i = 0
    while i < len(units):
        k = units[i]
        after = None
        if k.kind == "number" and k.text[:1].isalpha() and k.text[-1:].isalpha():
            after = _WORD_NUMBER_UNIT.match(text, k.end, stop)
        elif k.kind == "number" and _GLUED_M.fullmatch(k.text):
            after = COUNTED_AFTER.match(text, k.end, stop)
        if after is None:
            out.append(k)
            i += 1
            continue
        out.append(Keyword(k.start, after.end(), text[k.start : after.end()], "number"))
        i += 1
        while i < len(units) and units[i].start < after.end():
            i += 1
    return out


_YEAR_MONEY = re.compile(r"((?:1\d|20)\d\d)\s+(euros|dollars|pounds)")
# A word that starts with a capital and holds a digit: a code, a name ("BRCA1", "A380", "Q3").
_CODE = re.compile(rf"{_UP}[\w\-]*\d[\w\-]*")
# A number that goes on a name ("Apollo 12", "iPhone 15 Pro", "Article 17"): a plain count of
# at most three digits (a year or a measure is the name's fact, not its part).
_NAME_NUMBER = re.compile(r"\d{1,3}")
# Where a clause or a sentence ends right after a number.
_CLAUSE_END = re.compile(r"\s*(?:[.,;:!?)\]]|$)")
# What names a model after its number ("iPhone 15 Pro", "Galaxy S23 Ultra").
_MODEL_SUFFIXES = frozenset("Pro Max Plus Ultra Mini Air Lite SE XL Edition".split())
# Words after a number that make it no part of the name before it: a list's joiners ("Harry
# Kane 30 and Ivan Toney 20") and what the number counts ("Chelsea 3 seasons").
_NOT_NAMED = frozenset(
    "and or to than vs versus times years seasons months weeks days hours minutes goals points games matches "
    "runs wins titles people".split()
)
# Capitalised openers that qualify a count rather than name something ("Another 12 ...").
_COUNT_OPENERS = frozenset("another top less fewer least estimated circa ca first last next".split())


def _numbered_names(text: str, units: list[Keyword]) -> list[Keyword]:
    """Join a name and the plain number right after it (and a model's suffix after that)
    into one name: "Apollo 12" is another mission than "Apollo 11", so its number is part of
    the name the claim is about ("Apollo 12 landed on 20 July 1969" takes Apollo 11's date),
    and "12" alone is no fact to check. A capitalised word opening the sentence counts as a
    name here unless it qualifies a count ("Nearly 300 people", "Another 12 ...").

    The name goes on with its number into the rest of its clause ("Apollo 12 landed",
    "Article 17 of"), or ends the sentence or clause with it ("... is in Article 20.") when
    the sentence has no other number; never into a list of values ("Haaland scored 36
    goals, Harry Kane 30 and Ivan Toney 20.") nor into what the number counts ("Chelsea 3
    seasons").
    """
    numbers = sum(k.kind == "number" for k in units)
    out: list[Keyword] = []
    i = 0
    while i < len(units):
        k = units[i]
        after = units[i + 1] if i + 1 < len(units) else None
        follows = units[i + 2] if i + 2 < len(units) else None
        if (
            after is not None and after.kind == "number" and _NAME_NUMBER.fullmatch(after.text)
            and text[k.end : after.start] == " " and _names_something(k)
            and (
                follows is not None and follows.start == after.end + 1 and follows.text.lower() not in _NOT_NAMED
                or numbers == 1 and _CLAUSE_END.match(text, after.end) is not None
            )
        ):
            end, j = after.end, i + 2
            if j < len(units) and all(w in _MODEL_SUFFIXES for w in units[j].text.split()) and text[end : units[j].start] == " ":
                end, j = units[j].end, j + 1  # "iPhone 15 Pro"
            out.append(Keyword(k.start, end, text[k.start : end], "name"))
            i = j
            continue
        out.append(k)
        i += 1
    return out


def _names_something(k: Keyword) -> bool:
    """Whether keyword ``k`` may take the number after it into its name: a name that does not
    end in a code, or a capitalised word opening the sentence that qualifies no count."""
    if k.kind == "name":
        return not _CODE.fullmatch(k.text.split()[-1])  # "Q3 2023" is a period and a year
    word = k.text.lower()
    return (
        k.kind == "word" and k.text[:1].isupper() and not word.endswith("ly")
        and word not in _COUNT_OPENERS
    )


# A word that starts in lower case and capitalises a later part ("iPhone", "eBay", "iPad"):
# a name. Units ("mAh", "kWh") and acronyms with a prefix ("mRNA", "macOS") are not: their
# capital is not followed by two lower-case letters.
_CAMEL_NAME = re.compile(r"[a-z]{1,3}[A-Z][a-z]{2,}[A-Za-z]*")


def _month_is_date(text: str, begin: int, start: int) -> bool:
    """Whether a month name alone at ``start`` is a date: after "in", "since", "early", ..."""
    before = _LAST_WORD.search(text, begin, start)
    return before is not None and before.group().lower() in _MONTH_ALONE_AFTER


def _has_space(piece: str) -> bool:
    return any(c.isspace() for c in piece)


_YEAR = re.compile(r"(?:1[0-9]{3}|20[0-9]{2})(?:[-–/](?:[0-9]{2}|1[0-9]{3}|20[0-9]{2}))?")
_MONTH_ALONE = re.compile(_MONTH_NAME)
_ACRONYM = re.compile(rf"{_UP}{{2,}}")  # "US" is no "us", "IT" no "it"
_LAST_WORD = re.compile(r"\w+(?=\W*$)")
_ALNUM = re.compile(r"[^\W_]")
_VALUE = re.compile(rf"{_SIGN}{_NUMBER}")
_GROUPED = re.compile(r"\d{1,3}(?:[,\u202f\u00a0 ]\d{3})+(?!\d)")
# Thousands written with a period, as German, Spanish, Italian and Portuguese write them: two
# groups or more ("1.234.567"), or groups and a decimal comma ("2.850,5"), can be nothing else.
_PERIOD_GROUPED = re.compile(r"\d{1,3}(?:\.\d{3}){2,}(?:,\d+)?|\d{1,3}(?:\.\d{3})+,\d+")
_ONE_PERIOD_GROUP = re.compile(r"\d{1,3}\.\d{3}")
_WORD_AFTER = re.compile(r"\s?(\w+\.?(?:\s\w+)?)")


def period_groups_at(text: str, start: int, end: int) -> bool:
    """Whether the number ``text[start:end]`` writes its thousands with periods: two groups
    or more, or groups and a decimal comma, always; "2.850" (one group) only before a unit,
    percent or scale word of a language that writes thousands so (:data:`PERIOD_GROUPING_WORDS`:
    "2.850 Kilometer", "1.500 millones"), else it is 2.85.

    >>> [period_groups_at(t, 0, t.index(" ")) for t in ["2.850 Kilometer", "2.850 km", "1.234.567 x", "2.850,5 m"]]
    [True, False, True, True]
    """
    number = text[start:end].lstrip("-\u2212+")
    if _PERIOD_GROUPED.fullmatch(number):
        return True
    if not _ONE_PERIOD_GROUP.fullmatch(number):
        return False
    after = _WORD_AFTER.match(text, end)
    if after is None:
        return False
    first = after.group(1).split()[0]
    return bool({after.group(1), first, first.rstrip(".")} & PERIOD_GROUPING_WORDS)  # "por ciento", "Mio."


def number_value(text: str, period_groups: bool = False) -> str:
    """The canonical value of a number as written (the match rule's normaliser).

    Thousands separators (comma, space, thin or no-break space before a group of three
    digits) are dropped; a comma not followed by exactly three digits is a decimal comma;
    a decimal part loses its trailing zeros; the minus sign (``-`` or ``\u2212``) is kept,
    ``+`` dropped; other separators (``:`` in times, ``/`` in fractions) are kept.
    ``period_groups``: the number writes its thousands with periods and its decimals with a
    comma ("2.850,5"; :func:`period_groups_at` tells from where it stands).

    >>> [number_value(t) for t in ["2,850", "2850", "2 850", "-3.50", "\u22123,5", "minus 3.5", "10:30", "007"]]
    ['2850', '2850', '2850', '-3.5', '-3.5', '-3.5', '10:30', '7']
    >>> [number_value(t, period_groups=True) for t in ["2.850", "1.234.567", "2.850,50"]]
    ['2850', '1234567', '2850.5']
    """
    t = text.strip()
    if period_groups:
        t = t.replace(".", "").replace(",", ".")
    sign = ""
    if t[:6].lower() == "minus ":
        sign, t = "-", t[6:]
    elif t[:1] in "-\u2212":
        sign, t = "-", t[1:]
    elif t[:1] == "+":
        t = t[1:]
    grouped = _GROUPED.match(t)
    head = re.sub(r"\D", "", grouped.group()) if grouped else ""
    rest = t[grouped.end():] if grouped else t
    parts = re.split(r"([.,:/])", rest)
    out = head + parts[0]
    for sep, digits in zip(parts[1::2], parts[2::2]):
        out += ("." if sep == "," else sep) + digits
    if ":" not in out and "/" not in out and out.count(".") <= 1:  # not a time, fraction or version
        if "." in out:
            whole, _, frac = out.partition(".")
            frac = frac.rstrip("0")
            out = (whole.lstrip("0") or "0") + ("." + frac if frac else "")
        else:
            out = out.lstrip("0") or "0"
    return sign + out if out.strip("0.") else out


def value_spans(text: str) -> list[tuple[int, int, str]]:
    """Every number of ``text`` as ``(start, end, number_value)`` (sign and separators
    included, units not).

    >>> value_spans("From 2,850 km to -3.5 m.")
    [(5, 10, '2850'), (17, 21, '-3.5')]
    >>> [v for _, _, v in value_spans("less than .3% or $.99, not 3")]
    ['0.3', '0.99', '3']
    >>> [v for _, _, v in value_spans("the 2019/20 season, 2019/21, 3/4")]
    ['2019', '20', '2019/21', '3/4']
    """
    out = []
    for m in _VALUE.finditer(text):
        a = m.start()
        # A leading decimal point (".3%", "$.99") belongs to the number: .3 is not 3.
        if a > 0 and text[a - 1] == "." and (a < 2 or not text[a - 2].isdigit()) and m.group()[:1].isdigit():
            a -= 1
        season = _SEASON.fullmatch(m.group())
        if season and int(season[2]) == (int(season[1]) + 1) % 100:
            # A season or a fiscal year ("2019/20") is the pair "2019–20" writes, not a fraction.
            out += [(a, a + 4, season[1]), (a + 5, m.end(), number_value(season[2]))]
            continue
        out.append((a, m.end(), number_value(text[a : m.end()], period_groups_at(text, a, m.end()))))
    return out


_SEASON = re.compile(r"(\d{4})/(\d{2})")


_UNITS = "two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen nineteen".split()
_TENS = "twenty thirty forty fifty sixty seventy eighty ninety".split()
_ORDINALS = (
    "first second third fourth fifth sixth seventh eighth ninth tenth eleventh twelfth thirteenth fourteenth "
    "fifteenth sixteenth seventeenth eighteenth nineteenth"
).split()
_TENS_ORDINALS = "twentieth thirtieth fortieth fiftieth sixtieth seventieth eightieth ninetieth".split()
# "one" is left out: a stopword far more often than a count ("one of the", "the one").
_CARDINAL_WORDS = {w: i for i, w in enumerate(_UNITS, 2)} | {w: 10 * i for i, w in enumerate(_TENS, 2)}
_ORDINAL_WORDS = {w: i for i, w in enumerate(_ORDINALS, 1)} | {w: 10 * i for i, w in enumerate(_TENS_ORDINALS, 2)}
_ONES = {"one": 1, **{w: v for w, v in _CARDINAL_WORDS.items() if v < 10}}
_FRACTIONS = frozenset(("half", "halves", "quarter", "quarters"))
_NUMBER_WORD = re.compile(r"[A-Za-z]+(?:-[A-Za-z]+)*")


def word_number_value(word: str) -> str | None:
    """The value of a number written in words, in digits as :func:`value_spans` gives it
    ("2nd" and "second" are both 2), or None. A cardinal or ordinal from two / first to
    ninety-nine / ninety-ninth, alone or opening a hyphenated word ("second-largest": the rank
    is the fact, the rest its unit).

    >>> [word_number_value(w) for w in ["fifteen", "Fifty-seven", "twenty-first", "second-largest", "three-time"]]
    ['15', '57', '21', '2', '3']
    >>> [word_number_value(w) for w in ["one", "seconds", "tenfold", "forty-two-year-old", "Seventh-day", "two-thirds"]]
    [None, None, None, '42', '7', None]
    """
    parts = word.casefold().split("-")
    head = parts[0]
    if len(parts) > 1 and (parts[1] in _FRACTIONS or (parts[1].endswith("s") and parts[1][:-1] in _ORDINAL_WORDS)):
        return None  # "two-thirds", "three-quarters": a fraction, not a count
    if head in _TENS and len(parts) > 1 and parts[1] in _ONES:
        return str(_CARDINAL_WORDS[head] + _ONES[parts[1]])
    if head in _TENS and len(parts) > 1 and parts[1] in _ORDINAL_WORDS and _ORDINAL_WORDS[parts[1]] < 10:
        return str(_CARDINAL_WORDS[head] + _ORDINAL_WORDS[parts[1]])
    if head in _CARDINAL_WORDS:
        return str(_CARDINAL_WORDS[head])
    if head in _ORDINAL_WORDS:
        return str(_ORDINAL_WORDS[head])
    return None


# Superlatives of size, age and order. After "the" or a possessive, with no rank before it, one
# states rank 1 ("Toulouse is the largest city" is not "the fourth-largest city"); after "of the"
# or "among the" it does not ("one of the largest").
_RANK_SUPERLATIVES = frozenset(
    """largest biggest longest tallest highest oldest smallest shortest lowest youngest deepest
    widest heaviest busiest fastest earliest""".split()
)
_RANK_DETERMINER = re.compile(r"(?:\b(?:the|its|their|his|her|our|whose)|\w['\u2019]s)\s+$", re.IGNORECASE)
_NOT_A_RANK = re.compile(r"\b(?:of|among|amongst)\s+the\s+$", re.IGNORECASE)
_WORD_RE = re.compile(r"[A-Za-z]+")


_ORDINAL_SUFFIX = re.compile(r"(?:st|nd|rd|th)(?![^\W\d_])", re.IGNORECASE)


def is_ordinal(text: str, start: int, end: int) -> bool:
    """Whether the number at ``text[start:end]`` (a span of :func:`value_spans` or
    :func:`word_number_spans`) is an ordinal: digits followed by st / nd / rd / th ("2nd",
    "21st century"), words with an ordinal part ("second-largest", "twenty-first"), or a
    superlative of :func:`rank_superlative_spans` (rank 1).

    >>> t = "the 2nd of two, the second-largest, twenty-first, fifty-seven, 5 m, 3rd."
    >>> [(t[a:b], is_ordinal(t, a, b)) for a, b, _ in sorted(value_spans(t) + word_number_spans(t))]
    [('2', True), ('two', False), ('second-largest', True), ('twenty-first', True), ('fifty-seven', False), ('5', False), ('3', True)]
    """
    span = text[start:end]
    if span[-1:].isdigit():
        return _ORDINAL_SUFFIX.match(text, end) is not None
    return span.casefold() in _RANK_SUPERLATIVES or any(part in _ORDINAL_WORDS for part in span.casefold().split("-"))


def _ranks_first(text: str, start: int, end: int) -> bool:
    """Whether the word ``text[start:end]`` is a superlative stating rank 1 (``_RANK_SUPERLATIVES``)."""
    if text[start:end].casefold() not in _RANK_SUPERLATIVES:
        return False
    before = text[max(0, start - 40) : start]
    return _RANK_DETERMINER.search(before) is not None and _NOT_A_RANK.search(before) is None


def is_rank_superlative(word: str) -> bool:
    """Whether ``word`` is one of the superlatives that state rank 1 after "the" ("largest");
    :func:`find_keywords` makes such a word a number keyword only there.

    >>> is_rank_superlative("Largest"), is_rank_superlative("best")
    (True, False)
    """
    return word.casefold() in _RANK_SUPERLATIVES


def rank_superlative_spans(text: str) -> list[tuple[int, int, str]]:
    """The superlatives of ``text`` that state rank 1, as ``(start, end, "1")``: a value
    like "first" for the match rule, beside :func:`word_number_spans`.

    >>> t = "Toulouse is the largest city, France's oldest port and one of the longest rivers."
    >>> [(t[a:b], v) for a, b, v in rank_superlative_spans(t)]
    [('largest', '1'), ('oldest', '1')]
    """
    return [(m.start(), m.end(), "1") for m in _WORD_RE.finditer(text) if _ranks_first(text, m.start(), m.end())]


def spell_number(n: int, *, ordinal: bool = False) -> str | None:
    """``n`` written in words as :func:`word_number_value` reads them, or None outside
    2..99 (1..99 for an ordinal).

    >>> spell_number(57), spell_number(21, ordinal=True), spell_number(2, ordinal=True), spell_number(1)
    ('fifty-seven', 'twenty-first', 'second', None)
    """
    low = 1 if ordinal else 2
    if not low <= n <= 99:
        return None
    small = {v: w for w, v in (_ORDINAL_WORDS if ordinal else {**_ONES, **_CARDINAL_WORDS}).items()}
    if n in small:
        return small[n]
    tens = {v: w for w, v in _CARDINAL_WORDS.items()}[n - n % 10]
    ones = {v: w for w, v in (_ORDINAL_WORDS if ordinal else _ONES).items() if v < 10}[n % 10]
    return f"{tens}-{ones}"


def word_number_spans(text: str) -> list[tuple[int, int, str]]:
    """Every number written in words in ``text`` as ``(start, end, value)``
    (:func:`word_number_value`), beside the digits of :func:`value_spans`.

    >>> word_number_spans("Lyon is the third-largest city; it has two rivers.")
    [(12, 25, '3'), (39, 42, '2')]
    >>> [v for _, _, v in word_number_spans("Two hundred and fifty came, a thousand left, three thousand four hundred stayed.")]
    ['250', '1000', '3400']
    >>> [v for _, _, v in word_number_spans("two million, half a million, a dozen, two dozen")]
    ['2000000', '500000', '12', '24']
    >>> [v for _, _, v in word_number_spans("one and a half million, a million and a half, two and a half billion")]
    ['1500000', '1500000', '2500000000']
    """
    out = [(m.start(), m.end(), str(_compound_value(m.group()))) for m in _compound_numbers(text, 0, len(text))]
    taken = [(a, b) for a, b, _ in out]
    for m in _NUMBER_WORD.finditer(text):
        value = word_number_value(m.group())
        if value is not None and not any(a <= m.start() < b for a, b in taken):
            out.append((m.start(), m.end(), value))
    return sorted(out)


# A count in words with a scale ("two hundred and fifty", "a thousand", "three thousand four
# hundred", "two million", "a dozen", "half a million"): one value, not its parts (250, not 2
# and 50; 2,000,000, not 2).
_BELOW_100 = (
    rf"(?:(?:{'|'.join(_TENS)})(?:-(?:{'|'.join(_ONES)}))?|{'|'.join(sorted(_UNITS, key=len, reverse=True))}|one)"
)
_SCALE_WORDS = ("hundred", "thousand", "million", "billion", "trillion", "dozen")
_COMPOUND_NUMBER = re.compile(
    rf"\b(?:half\s+a|(?:a|{_BELOW_100})(?:\s+and\s+a\s+half)?)\s+(?:{'|'.join(_SCALE_WORDS)})"
    rf"(?:\s+and\s+a\s+half|\s+(?:and\s+)?{_BELOW_100}(?:\s+hundred)?(?:\s+(?:and\s+)?{_BELOW_100})?)?(?![\w-])",
    re.IGNORECASE,
)
_SCALE_POWERS = {"thousand": 1_000, "million": 1_000_000, "billion": 1_000_000_000, "trillion": 1_000_000_000_000}


def _compound_numbers(text: str, begin: int, end: int) -> list[re.Match[str]]:
    """The :data:`_COMPOUND_NUMBER` matches of ``text[begin:end]``; the scan runs only where a
    scale word occurs (most sentences have none, and the scan is the costly part of
    segmenting them)."""
    part = text[begin:end].lower()
    if not any(word in part for word in _SCALE_WORDS):
        return []
    return list(_COMPOUND_NUMBER.finditer(text, begin, end))


def _compound_value(phrase: str) -> int:
    """The value of a :data:`_COMPOUND_NUMBER` match: "two hundred and fifty" is 250, "half a
    million" 500000, "one and a half million" and "a million and a half" 1500000, "two dozen" 24."""
    total, current, scale = 0, 0.0, 0
    words = phrase.casefold().split()
    for i, word in enumerate(words):
        before, after = words[i - 1] if i else "", words[i + 1] if i + 1 < len(words) else ""
        if word == "and" or (word == "a" and (before == "half" or (before == "and" and after == "half"))):
            continue
        if word == "half" and i > 1 and words[i - 2] == "and":  # "... and a half"
            if current:
                current += 0.5  # "one and a half million"
            else:
                total += scale // 2  # "a million and a half"
        elif word == "half":
            current = 0.5
        elif word == "hundred":
            current = (current or 1) * 100
        elif word == "dozen":
            current = (current or 1) * 12
        elif word in _SCALE_POWERS:
            scale = _SCALE_POWERS[word]
            total, current = total + int((current or 1) * scale), 0.0
        else:
            parts = word.split("-")
            current += 1 if parts[0] in ("a", "one") else _CARDINAL_WORDS[parts[0]] + (_ONES[parts[1]] if len(parts) > 1 else 0)
    return total + int(current)


# Runs of word characters; a CJK character is a run of its own (its scripts put no spaces
# between words, so a run would be a whole clause).
_WORD_RUN = re.compile(f"[{_CJK_CHARS}]|[^\\W{_CJK_CHARS}]+")


def token_words(text: str, offsets: "np.ndarray | list[tuple[int, int]]") -> list[str]:
    """For each token (char offsets into ``text``), the word it belongs to, casefolded.

    The word is the maximal run of word characters (``\\w+``) that holds the token's first
    non-space character; a token with none (punctuation, a space) gets its own stripped
    text. A token inside a number (:func:`value_spans`: sign, digits, separators) gets the
    number's value instead, so "2,850" and "2850" are one word and "2,580" another; the
    digits that a tokenizer splits into single tokens thus all map to their number:

    >>> token_words("In 2,011, X-Men.", [(0, 2), (2, 4), (4, 5), (5, 6), (6, 8), (8, 9), (9, 11), (11, 12), (12, 15), (15, 16)])
    ['in', '2011', '2011', '2011', '2011', ',', 'x', '-', 'men', '.']

    A CJK character is a word of its own (those scripts put no space between words), so a
    copied phrase gives its tokens the words they have in the source:

    >>> token_words("它在巴黎。", [(0, 1), (1, 2), (2, 4), (4, 5)])
    ['它', '在', '巴', '。']
    """
    runs = list(_WORD_RUN.finditer(text))
    starts = [m.start() for m in runs]
    ends = [m.end() for m in runs]
    folded = [m.group().casefold() for m in runs]  # once per word, not per token
    values = value_spans(text) if any(c.isdigit() for c in text) else []
    value_starts = [a for a, _, _ in values]
    out: list[str] = []
    for a, b in (offsets.tolist() if hasattr(offsets, "tolist") else offsets):
        while a < b and text[a].isspace():
            a += 1
        if values and a < b:
            v = bisect.bisect_right(value_starts, a) - 1
            if v >= 0 and a < values[v][1]:
                out.append(values[v][2])
                continue
        i = bisect.bisect_right(starts, a) - 1  # the last run starting at or before a
        if a < b and i >= 0 and a < ends[i]:
            out.append(folded[i])
        else:
            out.append(text[a:b].strip().casefold())
    return out
