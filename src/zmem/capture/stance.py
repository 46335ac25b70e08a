"""What two similar notes say about each other, read from their text with word lists and no
model: the same stance, opposite stances, or apart (the same sentence about another scope,
number or unit, which is neither a duplicate nor a contradiction). It replaces counting the
word "not": negation inside a code span, a quoted string or a flag (`--no-verify`) is not the
note's stance, "X instead of Y" / "prefer X over Y" / "never Y, use X" all state one
preference that swapping X and Y reverses, and a one-word change to an antonym (keep/remove)
reverses it too, while a one-word change to anything else moves the note elsewhere."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from zmem.tokens import NEGATIONS, STOP_WORDS, fold

SAME, OPPOSITE, APART = "same", "opposite", "apart"

# A code span, a quoted string, a flag or a hyphenated name: one opaque token each, whose own
# words ("--no-verify", 'DO NOT MERGE', no-console) say nothing about the note's stance.
_OPAQUE = re.compile(
    r"`[^`]*`"
    r"|\"[^\"]*\""
    r"|(?<![\w])'[^']{2,}'(?![\w])"
    r"|(?<![\w-])--?[a-z0-9][\w.-]*(?:=\S+)?"
    r"|\b[\w.]+(?:-[\w.]+)+\b",
    re.IGNORECASE,
)
_TOKEN = re.compile(r"\x00\d+\x00|[^\W_]+(?:[.'][^\W_]+)*", re.UNICODE)

# "use X instead of Y": the connectors that put a preferred X before a rejected Y.
_STRONG = ("instead of", "rather than", "in place of", "in favour of", "in favor of")
# Weaker connectors, a preference only after a choosing verb ("prefer X over Y", "use X not Y").
_WEAK = ("over", "to", "not", "vs", "versus")
_CHOOSE = frozenset(
    "use uses using prefer prefers preferred choose pick default favour favor go with "
    "should be adopt".split()
)
# Which choosing words make each weak connector a preference: "prefer X to Y" (not "go to"),
# "use X not Y" (not "is not"), "favor X over Y".
_WEAK_AFTER = {
    "over": _CHOOSE,
    "vs": _CHOOSE,
    "versus": _CHOOSE,
    "to": frozenset("prefer prefers preferred".split()),
    "not": frozenset("use uses using prefer choose pick".split()),
}
# Choosing verbs that end a phrase ("default" may also be the thing chosen: default exports).
_CHOOSE_VERBS = _CHOOSE - {"default", "go", "with", "be", "should"}
# Words that open "never Y, use X" (don't -> don), and how many words after Y's phrase the
# choosing verb may come (the comma between them is not a token).
_REFUSING = frozenset("never don not no avoid".split())
_CLAUSE_REST = 4
_SCAN_MAX = 12
# Verbs that reject what follows them, as a negation does.
_REJECTING = frozenset("avoid remove delete drop ban skip without".split())
_NO_FLAG = re.compile(r"(?:^|[\s-])no-([a-z0-9]+)")
# Negations that state an absence rather than forbid an action.
_ABSENCE = frozenset("no none".split())
# Words that negate what follows them, beyond tokens.NEGATIONS.
_NEGATING = NEGATIONS | frozenset("off skip skips skipping without uncompressed".split())
# Negations that are particles (every contraction's head: "isn't" as well as "don't"), and the
# negating verbs a particle right before them cancels.
_PARTICLES = frozenset(
    "not never no cannot cant don doesn didn isn aren wasn weren won wouldn shouldn couldn "
    "mustn hasn haven hadn".split()
)
_NEGATING_VERBS = frozenset(
    "skip skips skipping disable disabled avoid avoids stop stops forbid without".split()
)
# One-word swaps that reverse a statement. A pair with a negating word (always/never,
# enable/disable, with/without, on/off, yes/no) is the negation count's: that side counts one.
_ANTONYMS_RAW = (
    ("keep", "remove"), ("keep", "delete"), ("keep", "drop"), ("add", "remove"),
    ("allow", "deny"), ("allow", "block"), ("include", "exclude"), ("required", "optional"),
    ("must", "may"), ("sync", "async"), ("public", "private"), ("before", "after"),
    ("commit", "ignore"), ("shared", "separate"), ("single", "independently"),
    ("mandatory", "optional"), ("encrypt", "plaintext"), ("true", "false"),
    ("increase", "decrease"), ("strict", "lenient"),
)  # fmt: skip


Phrase = frozenset[str]


@dataclass(frozen=True)
class Reading:
    tokens: tuple[str, ...]  # folded words and opaque spans, in order
    negations: int  # negating words outside opaque spans
    preferences: tuple[tuple[Phrase, Phrase], ...]  # (X, Y) of "X instead of Y" and its kin
    rejected: frozenset[str]  # words a negation governs ("never use moment" -> moment)
    spans: tuple[str, ...] = ()  # the opaque spans
    # Negations that only state a preference ("use X not Y", "never Y, use X"): the rest are
    # what two notes with the same preference may still disagree on.
    in_preferences: int = 0
    # What the counted negations govern (the content words after each), and whether one of
    # them governs nothing readable ("caching is turned off": its object comes before it).
    negated: frozenset[str] = frozenset()
    unread: bool = False
    # What a rejecting verb the negation count does not see turns down ("remove all
    # console.log").
    removed: frozenset[str] = frozenset()
    # Every negation states an absence ("no console.log in committed code"), none an action
    # not to take ("never edit X"): an absence is what removing brings about, an edit is not.
    absence: bool = False
    # What a negated negating verb affirms ("never skip the changelog" -> changelog): the other
    # note turning it down is the opposite, whatever else either note negates.
    affirmed: frozenset[str] = frozenset()


@functools.lru_cache(maxsize=256)
def read(text: str) -> Reading:
    """What one note says (cached: a write compares its own text with each neighbour)."""
    spans: list[str] = []

    def opaque(m: re.Match[str]) -> str:
        spans.append(fold(m.group(0)).strip("`'\"").rstrip(".,;:!?"))
        return f" \x00{len(spans) - 1}\x00 "

    hidden = fold(_OPAQUE.sub(opaque, text))
    found_tokens = list(_TOKEN.finditer(hidden))
    raw = [m.group(0) for m in found_tokens]
    tokens = tuple(spans[int(t.strip("\x00"))] if t.startswith("\x00") else t for t in raw)
    # don't -> don (a negation); a contraction whose head is no negation reads as one:
    # "can't" is "not", never the stop word "can".
    words = [
        "not" if t.endswith("n't") and t.split("'")[0] not in _NEGATING else t.split("'")[0]
        for t in tokens
    ]
    # What each negating or rejecting word governs: the content words after it, read once.
    after = {
        i: _phrase(tokens, i + 1, 1)
        for i, w in enumerate(words)
        if w in _NEGATING or w in _REJECTING
    }
    # "never skip X", "don't disable X", "not without X": a negation of the negating verb right
    # after it affirms X, so neither word is the note's stance and neither rejects X. Not from
    # further off ("never push without a review" still turns down pushing with none), and not
    # across punctuation ("logging in production: no, disable it" is two clauses).
    verbs = [
        i + 1
        for i, w in enumerate(words[:-1])
        if w in _PARTICLES
        and words[i + 1] in _NEGATING_VERBS
        and hidden[found_tokens[i].end() : found_tokens[i + 1].start()].isspace()
    ]
    cancelled = {k for v in verbs for k in (v - 1, v)}
    counted = [i for i, w in enumerate(words) if w in _NEGATING and i not in cancelled]
    governed = [after[i] for i in counted]
    # "do not use moment.js" -> moment.js, "remove all console.log" -> console.log.
    rejected = set().union(
        *(
            a
            for i, a in after.items()
            if (words[i] in NEGATIONS or words[i] in _REJECTING) and i not in cancelled
        )
    )
    for span in spans:  # a flag that turns something off rejects it: --no-tags, no-deps
        found = _NO_FLAG.search(span)
        if found:
            rejected.add(_stem(found.group(1)))
    preferences = _preferences(words, tokens)
    sides = set().union(*(y for _, y in preferences)) if preferences else set()
    in_preferences = sum(
        1
        for i in counted
        if preferences
        and (
            (words[i] == "not" and any(c in _WEAK_AFTER["not"] for c in words[max(0, i - 4) : i]))
            or after[i] & sides
        )
    )
    return Reading(
        tokens, len(counted), preferences, frozenset(rejected), tuple(spans), in_preferences,
        frozenset().union(*governed), not all(governed),
        frozenset().union(*(a for i, a in after.items() if words[i] not in _NEGATING)),
        all(words[i] in _ABSENCE for i in counted),
        frozenset().union(*(after[v] for v in verbs)),
    )  # fmt: skip


def _phrase(tokens: tuple[str, ...], start: int, step: int) -> Phrase:
    """Up to three content words from `start` going `step`, ending at a stop word, a choosing
    verb or a connector: "use [Debian slim] instead of [Alpine] as the base image"."""
    return _scan(tokens, start, step)[0]


def _scan(tokens: tuple[str, ...], start: int, step: int) -> tuple[Phrase, int]:
    """_phrase, and the position where it stopped."""
    out: list[str] = []
    i = start
    # Bounded: a phrase is the next few words, never the rest of a long text of stop words.
    while 0 <= i < len(tokens) and len(out) < 3 and abs(i - start) < _SCAN_MAX:
        t = tokens[i]
        if t in STOP_WORDS or t in _CHOOSE_VERBS or t in _WEAK or t in _NEGATING:
            if out:
                break
        else:
            out.extend(_words_of(t))
        i += step
    return frozenset(_stem(w) for w in out), i


def _preferences(words: list[str], tokens: tuple[str, ...]) -> tuple[tuple[Phrase, Phrase], ...]:
    found = []
    for conn in _STRONG:
        # Matched on the word list, whose positions are the tokens': an opaque span is one
        # token however many words it holds (`git fetch` instead of `git pull`).
        parts = conn.split()
        n = len(parts)
        for i in range(len(words) - n + 1):
            if words[i : i + n] == parts:
                x, y = _phrase(tokens, i - 1, -1), _phrase(tokens, i + n, 1)
                if x and y and x != y:
                    found.append((x, y))
    for i, w in enumerate(words):
        if w in _WEAK and any(c in _WEAK_AFTER[w] for c in words[max(0, i - 4) : i]):
            x, y = _phrase(tokens, i - 1, -1), _phrase(tokens, i + 1, 1)
            if x and y and x != y:
                found.append((x, y))
        elif w in _REFUSING:
            # "never Y, use X", "don't use Y for schemas: use X": the refused phrase, then a
            # choosing verb within the rest of its clause, and what that verb picks.
            y, end = _scan(tokens, i + 1, 1)
            for j in range(end, min(end + _CLAUSE_REST, len(words))):
                if words[j] in _NEGATING:
                    break
                if words[j] in _CHOOSE_VERBS:
                    x = _phrase(tokens, j + 1, 1)
                    if x and y and x != y:
                        found.append((x, y))
                    break
    return tuple(found)


def _words_of(token: str) -> list[str]:
    """An opaque span stands for its words too ("git add ." -> git, add)."""
    inner = _TOKEN.findall(token)
    return [token] if len(inner) <= 1 else [token, *inner]


def _stem(word: str) -> str:
    """Enough of an English stemmer to match "deleted" with "delete" and "merged" with
    "merge": compared words only, never stored."""
    for suffix in ("ing", "ed", "es", "s"):
        if len(word) > len(suffix) + (1 if suffix == "s" else 3) and word.endswith(suffix):
            word = word[: -len(suffix)]
            break
    return word[:-1] if len(word) > 4 and word.endswith("e") else word


_ANTONYMS = {frozenset((_stem(x), _stem(y))) for x, y in _ANTONYMS_RAW}
# Stop words that are half of a pair (before/after) stay in what a note is about.
_ANTONYM_WORDS = frozenset(w for pair in _ANTONYMS_RAW for w in pair)
# Where a note applies: environments, platforms, branches, tiers.
_SCOPE_WORDS = frozenset(
    _stem(w)
    for w in "prod production staging stage dev development local test testing qa ci preview "
    "sandbox main master develop release ios android linux macos mac windows web mobile "
    "desktop server client frontend backend api cli internal external public private".split()
)
# Predicates of permission and need: a negation on one of them negates the whole statement.
_MODAL_WORDS = frozenset(
    _stem(w)
    for w in "allow allowed need needed require required fine ok okay permit permitted "
    "necessary mandatory recommended acceptable supported safe possible".split()
)
# Words that carry how a note stands, not what it is about: a change of these alone is no
# change of scope ("enable X" / "keep X turned off" disagree; "every PR" / "PRs" agree).
_STANCE_WORDS = frozenset(
    _stem(w)
    for w in "keep turn turned enable enabled run use set leave make stay go put have get "
    "every all each any always only ever".split()
)


def _content_set(r: Reading) -> list[str]:
    """What the note is about: its words, a span's words among them (a command in backticks
    and the same command without them say the same), stemmed, without stop and negating
    words."""
    words: list[str] = []
    for t in r.tokens:
        inner = _TOKEN.findall(t) if t in r.spans else [t]
        words.extend(inner)
    # A contraction is its head word: "they've" is a stop word, "don't" a negation.
    return [
        _stem(w)
        for w in words
        if (w.split("'")[0] not in STOP_WORDS or w in _ANTONYM_WORDS)
        and w.split("'")[0] not in _NEGATING
    ]


def _orientation(pa: tuple[Phrase, Phrase], pb: tuple[Phrase, Phrase]) -> str | None:
    """SAME when both prefer the same side of the same two alternatives, OPPOSITE when they
    swap them, None when the two preferences are not about the same alternatives."""
    xa, ya = pa[0] - pa[1], pa[1] - pa[0]
    xb, yb = pb[0] - pb[1], pb[1] - pb[0]
    if xa & xb and ya & yb:
        return SAME
    if xa & yb and ya & xb:
        return OPPOSITE
    return None


def _negations_with_spans(ra: Reading, rb: Reading) -> tuple[int, int]:
    """Each side's negations, plus those inside a span the other side quotes the same but for
    its negations ('relation does not exist' / 'relation does exist': another message, so
    another fact), which are the one place a span's own words count."""
    na, nb = ra.negations, rb.negations
    for sa in ra.spans:
        for sb in rb.spans:
            wa, wb = _TOKEN.findall(sa), _TOKEN.findall(sb)
            plain_a = [w for w in wa if w.split("'")[0] not in _NEGATING]
            plain_b = [w for w in wb if w.split("'")[0] not in _NEGATING]
            if sa != sb and plain_a == plain_b:
                na += len(wa) - len(plain_a)
                nb += len(wb) - len(plain_b)
    return na, nb


def relation(a: str, b: str) -> str:
    """SAME, OPPOSITE or APART for two notes already found similar (the caller's measure)."""
    return explain(a, b)[0]


def explain(a: str, b: str) -> tuple[str, str]:
    """relation(a, b) with the reading that decided it (a short name): the write-time
    judge decides only where that reading has proven reliable, and asks elsewhere."""
    ra, rb = read(a), read(b)
    if ra.affirmed & rb.rejected - rb.affirmed or rb.affirmed & ra.rejected - ra.affirmed:
        # "Never skip X" (however many other negations it holds) against "skip X".
        return OPPOSITE, "rejects-what-other-affirms"
    na, nb = _negations_with_spans(ra, rb)
    verdicts = {v for pa in ra.preferences for pb in rb.preferences if (v := _orientation(pa, pb))}
    if OPPOSITE in verdicts:
        return OPPOSITE, "preference-swapped"
    if verdicts and na - ra.in_preferences == nb - rb.in_preferences:
        # One preference; any other negation agrees too. Unless the two say it of another
        # scope or number ("... a PR for main" / "... a PR for release").
        return (APART, "other-scope") if _other_scope(ra, rb) else (SAME, "same-preference")
    for prefs, other in ((ra.preferences, rb), (rb.preferences, ra)):
        if other.preferences:
            continue  # preferences over other alternatives: neither one decides by the other
        for x, y in prefs:
            if y & other.rejected and not x & other.rejected:
                # "use X instead of Y", "never Y"
                return (APART, "other-scope") if _other_scope(ra, rb) else (SAME, "same-preference")
            if x & other.rejected and not y & other.rejected:
                return OPPOSITE, "rejects-the-preferred"  # "use X instead of Y" and "never X"
    if na != nb and min(na, nb) == 0 and ra.rejected and ra.rejected == rb.rejected:
        # Both turn down the same things, one of them only with words the count does not see
        # (a flag, a verb: `--no-tags` / "without tags", "remove all console.log" / "no
        # console.log"). Equal sets, and no counted negation on that side: "don't disable X"
        # and "disable X" both name X, and still disagree.
        return SAME, "same-rejection"
    ca, cb = _content_set(ra), _content_set(rb)
    only_a = [t for t in ca if t not in cb]
    only_b = [t for t in cb if t not in ca]
    shared = len(set(ca) & set(cb))
    if only_a and only_b and len(only_a) <= 2 and len(only_b) <= 2 and shared >= 2:
        if any(frozenset((x, y)) in _ANTONYMS for x in only_a for y in only_b):
            # An antonym reverses; a negation more on one side reverses it back ("always
            # keep X" / "never remove X" say the same).
            return (OPPOSITE, "antonym") if (na - nb) % 2 == 0 else (SAME, "antonym-negated")
        changed = only_a + only_b
        if na == nb and any(t not in _STANCE_WORDS for t in changed):
            return APART, "one-word-swapped"  # the same sentence about another scope
        if any(t in _SCOPE_WORDS or any(c.isdigit() for c in t) for t in changed):
            # With a negation more on one side, only a known scope or a number says the two
            # are about different things ("never in production" / "in staging"); any other
            # swapped word may be a synonym ("bodies" / "payloads"), and the negation stands.
            return APART, "other-scope"
    if na != nb:
        return _negation_more(ra, rb, na, nb, ca, cb)
    return SAME, "no-difference-read"


def _other_scope(ra: Reading, rb: Reading) -> bool:
    """The two notes differ by a known scope word or a number: the same stance, said of
    another environment, branch or quantity."""
    ca, cb = set(_content_set(ra)), set(_content_set(rb))
    return any(t in _SCOPE_WORDS or any(c.isdigit() for c in t) for t in ca ^ cb)


def opposed_for_merging(a: str, b: str) -> bool:
    """Whether maintenance must not merge two notes on their text: opposite stances, or notes
    kept apart whose negations differ (a prohibition one of them adds, or the same rule in
    another scope: "never in production" / "in staging")."""
    verdict = relation(a, b)
    if verdict == OPPOSITE:
        return True
    return verdict == APART and read(a).negations != read(b).negations


def _negation_more(
    ra: Reading, rb: Reading, na: int, nb: int, ca: list[str], cb: list[str]
) -> tuple[str, str]:
    """One note has more negations than the other: OPPOSITE when the extra negation turns down
    what the other says; SAME when it states an absence the other brings about with a verb
    ("no console.log in committed code" / "remove all console.log"); APART when it governs
    something the other never mentions (a paraphrase that adds "does not re-read them
    later")."""
    more, less, said = (ra, rb, cb) if na > nb else (rb, ra, ca)
    if (
        (na - ra.negations) != (nb - rb.negations)
        or more.unread
        or not more.negated
        or more.negated & _MODAL_WORDS
    ):
        # A quoted message's negation, one whose object we cannot read, or one on the
        # predicate itself ("is not allowed", "do not need to be signed"): what it turns down
        # is the whole of what the other says.
        return OPPOSITE, "negation-of-the-whole"
    if more.negated & less.negated:
        # Both negate the same words and one has a negation more: it may negate the other's
        # negation ("don't disable X" / "disable X"), which is the opposite.
        return OPPOSITE, "negation-more"
    touched = more.negated & set(said)
    if not touched:
        # Not an opposition, and not shown to be the same note either (an opposite worded
        # apart, "sessions never expire" / "sessions time out after an hour", reads this way
        # too): kept beside it, never folded into it.
        return APART, "negation-elsewhere"
    if more.absence and touched <= less.removed:
        return SAME, "absence-brought-about"
    return OPPOSITE, "negation-turns-down"
