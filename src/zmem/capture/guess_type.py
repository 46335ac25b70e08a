"""What kind of knowledge a note states, guessed from its words when nobody said (`zmem add
TEXT` without --type, issue 49): a rule (constraint), a team habit (convention), a taste
(preference), a choice made (decision), something learned the hard way (lesson), or a plain
fact. Cue words only, and only when one kind's cues are there and no other's: otherwise the
guess is unsure, and the CLI asks the person at a terminal (a script gets `lesson`, said in a
warning)."""

from __future__ import annotations

import re

# Each kind's cues, matched as whole words or phrases in lower case. Ordered by how specific a
# cue is: a constraint's "must not" outranks a convention's "always" in the same sentence.
_CUES: dict[str, tuple[str, ...]] = {
    "constraint": (
        "must not",
        "must never",
        "never",
        "must",
        "is not allowed",
        "are not allowed",
        "not allowed",
        "forbidden",
        "is required",
        "are required",
        "required to",
        "mandatory",
        "do not",
        "don't",
        "cannot",
        "can't",
        "may not",
        "only ever",
    ),
    "decision": (
        "we decided",
        "decided to",
        "decided on",
        "we chose",
        "chose to",
        "we picked",
        "going with",
        "we will use",
        "we'll use",
        "decision:",
        "agreed to",
        "we agreed",
        "settled on",
    ),
    "preference": (
        "i prefer",
        "prefer",
        "prefers",
        "i like",
        "i'd rather",
        "i would rather",
        "favourite",
        "favorite",
        "likes to",
        "rather than",
        "instead of",
    ),
    "convention": (
        "always",
        "by convention",
        "convention",
        "we use",
        "we name",
        "naming",
        "is named",
        "are named",
        "style",
        "format",
        "use snake_case",
        "use camelcase",
        "is formatted",
    ),
    "lesson": (
        "learned",
        "turns out",
        "turned out",
        "gotcha",
        "the fix was",
        "fixed by",
        "otherwise",
        "because",
        "caused",
        "fails when",
        "failed",
        "breaks when",
        "broke",
        "watch out",
        "beware",
        "careful",
        "remember to",
        "if you",
        "when you",
        "before you",
    ),
    "fact": (
        "lives in",
        "is located",
        "is at",
        "runs on",
        "listens on",
        "is hosted",
        "is stored",
        "stores",
        "version",
        "port",
        "is owned by",
        "owns",
        "contains",
        "is called",
    ),
}
_COMPILED = {
    kind: [re.compile(r"(?<![\w'])" + re.escape(cue) + r"(?![\w'])") for cue in cues]
    for kind, cues in _CUES.items()
}
# When cues of two kinds meet, the more specific kind wins only by this order; any other mix is
# unsure. A rule that also says "always" is still a rule; a lesson that mentions a port is
# still a lesson.
_OUTRANKS = {
    ("constraint", "convention"), ("constraint", "fact"), ("decision", "fact"),
    ("decision", "preference"), ("lesson", "fact"), ("preference", "convention"),
}  # fmt: skip
DEFAULT = "lesson"


def guess(text: str) -> tuple[str, bool]:
    """(the kind, whether the words say it clearly). Unclear: no cue, or cues of kinds that do
    not rank one above the other; the kind is then DEFAULT."""
    low = " ".join(text.lower().split())
    found = [kind for kind, patterns in _COMPILED.items() if any(p.search(low) for p in patterns)]
    if not found:
        return DEFAULT, False
    best = [k for k in found if not any((o, k) in _OUTRANKS for o in found if o != k)]
    if len(best) == 1:
        return best[0], True
    return DEFAULT, False
