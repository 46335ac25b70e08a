"""Word tokens as SQLite's FTS5 unicode61 tokenizer (remove_diacritics 2) sees them, shared by the
write path (dedup, linking) and the read path (query building). Keeping one tokenizer is what
lets a set-similarity filter be expressed as an FTS query without losing candidates."""

from __future__ import annotations

import functools
import re
import unicodedata

# unicode61 treats letters, numbers and private-use characters as token characters and
# everything else (including "_") as a separator.
_WORD = re.compile(r"[^\W_]+")

# Words too common to discriminate. In an FTS5 OR query at 1M rows they cost ~10x (perf-limits),
# and in a Jaccard comparison they inflate similarity between unrelated sentences.
STOP_WORDS = frozenset(
    """
    a about above after again against all am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from further
    had has have having he her here hers herself him himself his how i if in into is it its itself
    just me more most my myself of off on once only or other our ours ourselves out over own same
    she should so some such than that the their theirs them themselves then there these they this
    those through to too under until up very was we were what when where which while who whom why
    will with would you your yours yourself yourselves s t
    """.split()
)


def fold(text: str) -> str:
    """Casefold and strip diacritics the way remove_diacritics=2 does (é → e)."""
    if text.isascii():
        return text.lower()  # nothing to decompose: the common case, 10x cheaper
    # lower(), not casefold(): unicode61 keeps "ß" as one token where casefold makes "ss".
    decomposed = unicodedata.normalize("NFKD", text.lower())
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch))


def words(text: str) -> list[str]:
    """Every token in order, folded; duplicates kept."""
    return list(_words(text))


# An add tokenises its text three times over (the fake embedding, the similarity tokens, the
# polarity guard): the last few texts' tokens are kept. Callers get their own list.
@functools.lru_cache(maxsize=32)
def _words(text: str) -> tuple[str, ...]:
    return tuple(_WORD.findall(fold(text)))


def content_tokens(text: str) -> frozenset[str]:
    """The distinct non-stop-word tokens: the unit of Jaccard similarity."""
    return frozenset(_words(text)).difference(STOP_WORDS)


# Words that flip or assert the polarity of a lesson. They are excluded from similarity so that
# "always X" and "never X" compare as twins, which the dedup polarity guard then keeps apart.
# Contractions arrive split by the tokenizer ("don't" → "don", "t"), so their stems are listed.
NEGATIONS = frozenset(
    """
    not no never none nothing nobody nowhere neither nor without cannot cant
    don doesn didn isn aren wasn weren won wouldn shouldn couldn mustn hasn haven hadn
    avoid avoids avoided stop stops forbid forbidden prohibit prohibited disallow disallowed
    disable disabled
    """.split()
)
AFFIRMATIONS = frozenset("always must should do does enable enabled allow allowed".split())
POLARITY_WORDS = NEGATIONS | AFFIRMATIONS


def similarity_tokens(text: str) -> frozenset[str]:
    """Content tokens without polarity words: what dedup and linking compare."""
    return content_tokens(text) - POLARITY_WORDS


def similarity_norm(text: str) -> str:
    """The stored form of similarity_tokens (memory.content_norm): sorted, space-joined."""
    return " ".join(sorted(similarity_tokens(text)))


def number_tokens(tokens: frozenset[str]) -> frozenset[str]:
    return frozenset(t for t in tokens if any(ch.isdigit() for ch in t))


# A command-line flag: a dash or two, then a letter, not inside a word ("pre-commit" is none).
_FLAG = re.compile(r"(?<![\w-])--?[A-Za-z][\w-]*")


def flag_tokens(text: str) -> frozenset[str]:
    """The command-line flags a note names (`--no-default-features`, `-x`), lowercased. The
    similarity tokens split them into words and drop the dashes, so `--all-features` and
    `--no-default-features` differ there by a stop word and a negation; as flags they are two
    different commands, as two numbers are two different facts."""
    return frozenset(m.group(0).lower() for m in _FLAG.finditer(text))


# A number's unit, said any of the ways notes say it, to one name: "15 minutes" and "15 min" are
# one fact, "15 minutes" and "15 hours" two. Only units a note can state a limit, a size or a
# time in; a word after a number that is none of these ("3 retries") is not read as a unit.
_UNIT_NAMES = {
    "ms": "ms", "msec": "ms", "millisecond": "ms", "milliseconds": "ms",
    "s": "s", "sec": "s", "secs": "s", "second": "s", "seconds": "s",
    "min": "min", "mins": "min", "minute": "min", "minutes": "min",
    "h": "h", "hr": "h", "hrs": "h", "hour": "h", "hours": "h",
    "d": "d", "day": "d", "days": "d", "wk": "wk", "week": "wk", "weeks": "wk",
    "month": "mo", "months": "mo", "y": "y", "yr": "y", "yrs": "y", "year": "y", "years": "y",
    "b": "b", "byte": "b", "bytes": "b",
    "k": "kb", "kb": "kb", "kilobyte": "kb", "kilobytes": "kb", "kib": "kib", "ki": "kib",
    "mb": "mb", "megabyte": "mb", "megabytes": "mb", "mib": "mib", "mi": "mib",
    "gb": "gb", "gigabyte": "gb", "gigabytes": "gb", "gib": "gib", "gi": "gib",
    "tb": "tb", "terabyte": "tb", "terabytes": "tb", "tib": "tib", "ti": "tib",
    "%": "%", "percent": "%", "px": "px", "em": "em", "rem": "rem",
    "char": "char", "chars": "char", "character": "char", "characters": "char",
    "kbps": "kbps", "mbps": "mbps", "gbps": "gbps", "rps": "rps", "qps": "qps",
}  # fmt: skip
# A number ("1,000" as "1000"), then its unit after a space, a hyphen ("a 15-minute timeout")
# or nothing ("512Mi").
_MEASURE = re.compile(r"(?<![\w.,])(\d{1,3}(?:,\d{3})+|\d+(?:\.\d+)?)[\s-]?(%|[A-Za-z]+\b)")
# A rate's unit, away from its number: "100 requests per minute", "100 req/s", "50 MB/s".
_RATE = re.compile(r"(?:\bper\s+|(?<=\w)/)([A-Za-z]+)\b")


def number_units(text: str) -> dict[str, frozenset[str]]:
    """Each number a note states with a unit, and the units it is stated in; under "per", the
    units its rates are stated per. Two notes whose maps differ state other facts ("10 MB" /
    "10 KB", "per minute" / "per second"), a bare number included ("10" / "10 MB"): a fold keeps
    the older text only, and a bare number would swallow every unit stated after it."""
    found: dict[str, set[str]] = {}
    for m in _MEASURE.finditer(text):
        unit = _UNIT_NAMES.get(m.group(2).lower())
        if unit is not None:
            found.setdefault(m.group(1).replace(",", ""), set()).add(unit)
    for m in _RATE.finditer(text):
        unit = _UNIT_NAMES.get(m.group(1).lower())
        if unit is not None:
            found.setdefault("per", set()).add(unit)
    return {n: frozenset(u) for n, u in found.items()}


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    if not a and not b:
        return 1.0
    union = len(a | b)
    return len(a & b) / union if union else 0.0


# A sentence ends at . ! or ? before whitespace, or at a line break (merged rows hold one
# absorbed text per line).
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")


def split_sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE_END.split(text) if s.strip()]


def first_sentence(text: str) -> str:
    return _SENTENCE_END.split(text.strip(), maxsplit=1)[0].strip()
