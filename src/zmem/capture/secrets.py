"""Secret detection and redaction for the capture write path.

Owns the credential patterns ZMem recognises, how overlapping hits are resolved into one
non-overlapping list, and the ``[REDACTED:<kind>]`` replacement applied before storage/indexing.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class SecretMatch:
    kind: str
    start: int
    end: int


# (match, secret_text) -> keep?  Lets context-dependent patterns reject placeholders and prose.
_Check = Callable[[re.Match[str], str], bool]

# Only these groups ever hold the secret; patterns without one redact the whole match.
_SECRET_GROUPS = ("s", "dq", "sq", "uq")

_PLACEHOLDER_HINTS = tuple(
    "your example placeholder changeme change_me dummy redacted xxxx insert replace sample".split()
)
_PLACEHOLDER_CHARS = frozenset("x*.-_#?")
_ENV_NAME = re.compile(r"[A-Z]+(?:_[A-Z]+)+")
_DOTTED_NAME = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+")
_REST_OF_LINE_BLANK = re.compile(r"[ \t]*(?:[#,}]|\r?\n|$)")


def _is_placeholder(value: str) -> bool:
    low = value.lower()
    if not value or value[0] in "$%<" or value.startswith(("{", "[REDACTED")):
        return True
    if set(low) <= _PLACEHOLDER_CHARS:
        return True
    if any(hint in low for hint in _PLACEHOLDER_HINTS):
        return True
    # OPENAI_API_KEY as a value names an environment variable rather than holding a secret.
    return _ENV_NAME.fullmatch(value) is not None


def _is_path_or_url(value: str) -> bool:
    return (
        value.startswith(("/", "~", "./", "../"))
        or re.match(r"[A-Za-z]:[\\/]", value) is not None
        or "://" in value
    )


def _has_digit_and_letter(value: str) -> bool:
    return any(c.isdigit() for c in value) and any(c.isalpha() for c in value)


def _check_entropy_token(_m: re.Match[str], value: str) -> bool:
    # Prefix-only formats (sk-, xoxb-, sk_live_) collide with kebab/snake identifiers; real
    # keys are random base62 and essentially always contain a digit.
    return _has_digit_and_letter(value)


def _check_assignment(m: re.Match[str], value: str) -> bool:
    quoted = m.group("uq") is None
    if len(value) < 8 or value.isdigit() or _is_placeholder(value) or _is_path_or_url(value):
        return False
    if not quoted:
        if _DOTTED_NAME.fullmatch(value) or m.string[m.end() : m.end() + 1] in ("(", "["):
            return False  # settings.API_TOKEN, hashlib.sha256(...): code, not a literal
        # "Token: authentication tokens are..." is prose; a YAML value ends its line.
        if ":" in m.group("sep") and "=" not in m.group("sep"):
            if not _REST_OF_LINE_BLANK.match(m.string, m.end()):
                return False
    if any(not (c.isalpha() or c in "_-.") for c in value):
        return True
    # Pure words only count when quoted and long enough to be a passphrase, not a label.
    return quoted and len(value) >= 16


def _check_bearer(m: re.Match[str], value: str) -> bool:
    if _is_placeholder(value):
        return False
    if m.group("auth") is not None:
        return len(value) >= 8
    # Bare "bearer <word>" is common prose, so demand a long, mixed token.
    return len(value) >= 20 and _has_digit_and_letter(value)


def _check_url_password(_m: re.Match[str], value: str) -> bool:
    return not _is_placeholder(value)


_AWS_NEAR = re.compile(r"(?<![A-Za-z0-9])(?:AKIA|ASIA)[A-Z0-9]{16}(?![A-Za-z0-9])|(?i:\baws\b)")
_AWS_CONTEXT = 200


def _entropy(value: str) -> float:
    counts: dict[str, int] = {}
    for ch in value:
        counts[ch] = counts.get(ch, 0) + 1
    n = len(value)
    return -sum(c / n * math.log2(c / n) for c in counts.values())


def _check_unlabeled_aws_secret(m: re.Match[str], value: str) -> bool:
    """A 40-character secret access key with no label: kept only beside an access key id or
    the word AWS (keys travel in pairs), mixed like a random key (upper, lower and digits, not
    hexadecimal) and as varied as one (a random 40-character key scores over 4.2 bits a
    character; names and paths of that length score under it)."""
    if _is_placeholder(value) or not _has_digit_and_letter(value):
        return False
    if not (any(c.isupper() for c in value) and any(c.islower() for c in value)):
        return False
    if all(c in "0123456789abcdefABCDEF" for c in value) or _entropy(value) < 4.2:
        return False
    text = m.string
    near = text[max(0, m.start() - _AWS_CONTEXT) : m.end() + _AWS_CONTEXT]
    return _AWS_NEAR.search(near) is not None


_KEY_NAME = (
    r"(?:pass(?:word|wd|phrase)|pwd|secret(?:[_-]?key)?|api[_-]?key|apikey"
    r"|access[_-]?key|private[_-]?key|token)"
)
_TOKEN68 = r"[A-Za-z0-9._~+/-]{0,4095}[A-Za-z0-9_~+/-]=*"
_PEM_LABEL = r"[ A-Z0-9]{0,40}PRIVATE KEY(?: BLOCK)?-----"

# Ordered most specific first: on equal-length overlaps the earlier kind wins.
_PATTERN_SPECS: tuple[tuple[str, str, _Check | None], ...] = (
    (
        "private_key",
        rf"-----BEGIN{_PEM_LABEL}(?:[\s\S]*?-----END{_PEM_LABEL}|[\s\S]*)",
        None,
    ),
    (
        "github_token",
        r"(?<![A-Za-z0-9])(?:gh[pousr]_[A-Za-z0-9]{36,251}+|github_pat_[A-Za-z0-9_]{40,251}+)"
        r"(?![A-Za-z0-9])",
        None,
    ),
    ("anthropic_key", r"(?<![A-Za-z0-9_-])sk-ant-[A-Za-z0-9_-]{20,512}+", _check_entropy_token),
    (
        "openai_key",
        r"(?<![A-Za-z0-9_-])sk-(?!ant-)(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,512}+",
        _check_entropy_token,
    ),
    (
        "stripe_key",
        r"(?<![A-Za-z0-9])[sr]k_(?:live|test)_[A-Za-z0-9]{20,255}+",
        _check_entropy_token,
    ),
    ("aws_access_key", r"(?<![A-Za-z0-9])(?:AKIA|ASIA)[A-Z0-9]{16}(?![A-Za-z0-9])", None),
    (
        "aws_secret_key",
        r"(?i:aws[_.-]?secret[_.-]?(?:access[_.-]?)?key|secret[_.-]?access[_.-]?key)"
        r"[\"']?[ \t]*(?::=|=>|=|:)[ \t]*[\"']?(?P<s>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])",
        None,
    ),
    (
        "aws_secret_key_unlabeled",
        r"(?<![A-Za-z0-9/+=])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])",
        _check_unlabeled_aws_secret,
    ),
    ("slack_token", r"(?<![A-Za-z0-9])xox[abprs]-[A-Za-z0-9-]{10,255}+", _check_entropy_token),
    ("google_api_key", r"(?<![A-Za-z0-9_-])AIza[A-Za-z0-9_-]{35}(?![A-Za-z0-9_-])", None),
    ("npm_token", r"(?<![A-Za-z0-9])npm_[A-Za-z0-9]{36}(?![A-Za-z0-9])", None),
    (
        "jwt",
        r"(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]{5,}+\.ey[A-Za-z0-9_-]{5,}+\.[A-Za-z0-9_-]{10,}+",
        None,
    ),
    (
        "url_credentials",
        r"(?<![A-Za-z0-9+.-])[A-Za-z][A-Za-z0-9+.-]{1,30}://[^\s:/@?#\[\]]{0,256}:"
        r"(?P<s>[^\s/@?#\[\]]{1,256})@",
        _check_url_password,
    ),
    (
        "bearer_token",
        r"(?P<auth>(?i:authorization)[\"']?[ \t]*[:=][ \t]*[\"']?)?(?i:\bbearer)[ \t]+"
        rf"(?P<s>{_TOKEN68})",
        _check_bearer,
    ),
    (
        "password_assignment",
        rf"(?i:{_KEY_NAME})[\"']?[ \t]*(?P<sep>:=|=>|=(?!=)|:(?![:/]))[ \t]*"
        r"(?:\"(?P<dq>[^\"\s]{1,1024})\"|'(?P<sq>[^'\s]{1,1024})'"
        r"|(?P<uq>[^\s'\"`,;()\[\]{}]{1,256}))",
        _check_assignment,
    ),
)

# Each pattern is compiled the first time a text holds its anchors: compiling them all cost
# ~6 ms at import, paid by every process importing the capture policy (the cold prompt hook
# too, which never redacts).
_COMPILED: dict[int, tuple[re.Pattern[str], tuple[str, ...]]] = {}


def _pattern(index: int) -> tuple[re.Pattern[str], tuple[str, ...]]:
    """(compiled pattern, the secret groups it has) of _PATTERN_SPECS[index]."""
    found = _COMPILED.get(index)
    if found is None:
        rx = re.compile(_PATTERN_SPECS[index][1])
        found = _COMPILED[index] = (rx, tuple(g for g in _SECRET_GROUPS if g in rx.groupindex))
    return found


# Literals every match of a pattern contains: (case-sensitive, lower-cased for the (?i:) parts).
# A pattern whose literals are all absent cannot match, so its regex is skipped: most lessons
# hold none of them (~48 -> ~12 us per add). Only for ASCII text: under IGNORECASE some
# non-ASCII characters match ASCII letters ("\u017f" matches "s"), which lower() does not show.
_ANCHORS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "private_key": (("-----BEGIN",), ()),
    "github_token": (("gh", "github_pat_"), ()),
    "anthropic_key": (("sk-ant-",), ()),
    "openai_key": (("sk-",), ()),
    "stripe_key": (("k_live_", "k_test_"), ()),
    "aws_access_key": (("AKIA", "ASIA"), ()),
    "aws_secret_key": ((), ("secret",)),
    "aws_secret_key_unlabeled": (("AKIA", "ASIA"), ("aws",)),
    "slack_token": (("xox",), ()),
    "google_api_key": (("AIza",), ()),
    "npm_token": (("npm_",), ()),
    "jwt": (("eyJ",), ()),
    "url_credentials": (("://",), ()),
    "bearer_token": ((), ("bearer",)),
    "password_assignment": ((), ("pass", "pwd", "secret", "api", "access", "private", "token")),
}
assert list(_ANCHORS) == [kind for kind, *_ in _PATTERN_SPECS]


_ANCHOR_LIST = tuple(
    (anchor, folded, index)
    for index, pair in enumerate(_ANCHORS.values())
    for folded, anchors in enumerate(pair)
    for anchor in anchors
)


def _may_match(text: str) -> list[bool]:
    """Per pattern (in _PATTERN_SPECS order): False when the pattern cannot match ``text``."""
    if not text.isascii():
        return [True] * len(_PATTERN_SPECS)
    haystacks = (text, text.lower())
    live = [False] * len(_PATTERN_SPECS)
    for anchor, folded, index in _ANCHOR_LIST:
        if not live[index] and anchor in haystacks[folded]:
            live[index] = True
    return live


def _secret_span(m: re.Match[str], groups: tuple[str, ...]) -> tuple[int, int]:
    for name in groups:
        if m.start(name) != -1:
            return m.span(name)
    return m.span()


def find_secrets(text: str) -> list[SecretMatch]:
    """Return non-overlapping secret spans in ``text``, sorted by start."""
    candidates: list[tuple[int, int, int, str]] = []
    for priority, ((kind, _, check), live) in enumerate(
        zip(_PATTERN_SPECS, _may_match(text), strict=True)
    ):
        if not live:
            continue
        rx, groups = _pattern(priority)
        pos = 0
        while (m := rx.search(text, pos)) is not None:
            start, end = _secret_span(m, groups)
            if end > start and (check is None or check(m, text[start:end])):
                candidates.append((start, end, priority, kind))
                pos = m.end()
            else:
                # A rejected hit may hide a real one inside it (a URL value shadowing a later
                # "key=..."), so resume just past its start rather than past its end.
                pos = m.start() + 1
    candidates.sort()

    # Overlapping hits collapse into their union so no fragment of either secret survives;
    # the longest hit (then the most specific pattern) names the result.
    merged: list[SecretMatch] = []
    best: tuple[int, int] = (0, 0)
    for start, end, priority, kind in candidates:
        rank = (end - start, -priority)
        if merged and start < merged[-1].end:
            last = merged[-1]
            if rank > best:
                best = rank
                last = SecretMatch(kind, last.start, last.end)
            merged[-1] = SecretMatch(last.kind, last.start, max(last.end, end))
        else:
            merged.append(SecretMatch(kind, start, end))
            best = rank
    return merged


def _replace(text: str, matches: list[SecretMatch]) -> str:
    parts: list[str] = []
    pos = 0
    for match in matches:
        parts.append(text[pos : match.start])
        parts.append(f"[REDACTED:{match.kind}]")
        pos = match.end
    parts.append(text[pos:])
    return "".join(parts)


def redact(text: str) -> tuple[str, int]:
    """Replace every secret with ``[REDACTED:<kind>]``; return the new text and the count."""
    total = 0
    # Removing one secret can expose a neighbour whose boundary check looked at the removed
    # text (a key glued to the end of a PEM block), so repeat until nothing matches. Markers
    # never match, so each round strictly shrinks the unredacted text and this terminates.
    while matches := find_secrets(text):
        text = _replace(text, matches)
        total += len(matches)
    return text, total


def looks_like_secret(text: str) -> bool:
    """True when ``text`` contains anything ``find_secrets`` would redact."""
    return bool(find_secrets(text))
