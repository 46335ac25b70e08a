"""The learned prompt-injection detector: its features (words of any script, word pairs, cue
groups, character n-grams), their hashing into weight buckets, and the trained weights it loads
(written by scripts/train_injection.py). The hand-written shapes are in capture/injection.py.
"""

from __future__ import annotations

import re
import zlib
from array import array

from zmem.capture.injection import normalise_text

# The shapes (capture/injection.py) are precise but know only the phrasings they spell out.
# Beside them, a logistic model over the text's words, word pairs, character n-grams and a few
# cue groups (who is addressed, what is asked: concealment, claimed authority, a dangerous
# command, secrets leaving, a standing order) scores every text. Its weights and threshold are
# trained by scripts/train_injection.py on one half of eval/injection_set.jsonl (split by
# family) and the tune projects of the coding corpus; the other half is what
# docs/benchmarks.md reports.

# Any script's letters: an ASCII-only word left Cyrillic, Greek or CJK text with no words at all.
_WORD = r"[^\W_][\w\-\.]*|_[\w\-\.]+"
_ADDRESSEE = (
    r"(?:ai|a\.i\.|llms?|assistants?|agents?|copilot|chatgpt|gpt|claude|cursor|bots?|"
    r"models?|automation|automated \w+|language models?|ai[- ]\w+|whoever\b[^.\n]{0,30}|"
    r"whatever (?:bot|tool|agent)\b[^.\n]{0,20}|coding assistant|code assistant|"
    r"agente|asistente|l'agent|l'assistant|ki|ia|ассистент|агент|助手|代理)"
)
_ACT = (
    r"(?:run|execute|exec|add|delete|remove|push|merge|approve|set|update|edit|change|replace|"
    r"swap|overwrite|install|upload|send|post|paste|read|include|label|close|bind|grant|attach|"
    r"commit|publish|mark|decode|follow|store|save|memori[sz]e|comment|disable|skip|bump|make|"
    r"create|call|forward|resolve|rotate|use|apply|drop|truncate|stop|ignore|disregard|forget|"
    r"keep|leave|omit|tell|say|report|modify|switch|point|put|write|copy|base64|cat|curl|wget|"
    r"chmod|open|invite|transfer|rename|reset|revert|enable|turn)"
)
# Compiled on first use (~25 ms: the read path, a cold hook included, never needs them), and
# case-sensitive: they run on the lower-cased text (IGNORECASE cost 3x here).
_CUE_PATTERNS: dict[str, str] = {
    "addressee": rf"\b{_ADDRESSEE}\b",
    # Spoken TO the model: "Agent: run", "assistants should delete", "for bots: set",
    # "(hint for AI) read", "Copilot, call", "TODO(agent):". A human's note ABOUT an
    # assistant ("ask it to run", "done by an AI agent") has no such turn.
    "addressed_directive": rf"\b{_ADDRESSEE}\s*(?:\)|\]|>|:|,|-|—|–)\s*(?:please\s+|"
    rf"also\s+|just\s+|kindly\s+)?(?:\w+\s+){{0,3}}?{_ACT}\b|\b{_ADDRESSEE}\s+(?:should|"
    rf"must|needs? to|has to|is (?:required|expected|asked) to|will|can now|may now|is "
    rf"(?:now )?(?:permitted|allowed|authori[sz]ed) to)\b|\b(?:for|to|attention|hint for|"
    rf"note (?:for|to)|message (?:for|to)|hey|hi|dear|pour|para|an|für)\s+(?:the |all |any "
    rf"|our |kind )?{_ADDRESSEE}\b",
    "you_must": r"\byou (?:must|should|need to|are (?:required|expected|instructed|asked|"
    r"permitted|allowed) to|have to|will now|are now|now have|have (?:owner|admin))\b",
    "conceal": r"\b(?:don'?t|do not|never|without|avoid|no need to) (?:tell|telling|mention|"
    r"mentioning|inform|informing|notify|notifying|report|reporting|flag|flagging|ask|asking|"
    r"alert|alerting|disclos\w+|reveal\w*|bring (?:it|this|that) up|list|quot\w+|explain|"
    r"document|leav\w+ a comment|check\w*|wait)\b|\b(?:quietly|silently|secretly|discreetly|"
    r"covertly|keep (?:it|this) quiet)\b|\bwithout (?:the )?(?:user|reviewer|human|developer|"
    r"maintainers?|operator)\b|\bleave (?:that|it|this) out\b|\bout of (?:the|your) "
    r"(?:summary|report|review|response|description)\b",
    "deceive": r"\b(?:tell|assure|inform) (?:the )?(?:developer|user|them|me|reviewer|human)"
    r" (?:that |it )|\bjust (?:say|describe|call it|report)\b|\bdescribe it as\b|\bsay "
    r"(?:that |it )?(?:was|is|has been)\b|\breport only\b",
    "no_confirm": r"\bwithout (?:asking|confirmation|confirming|approval|review|a ticket|"
    r"checking|prompting)\b|\bno (?:need to (?:check|ask|confirm)|ticket needed|approval "
    r"needed)\b|\bstop asking\b|\bnever (?:asks?|refuses?)\b|\bunattended\b|\bdon'?t wait\b"
    r"|\bconfirmations? (?:are|is) disabled\b|\bbefore (?:anyone|a human|the user) "
    r"(?:notices|sees|checks)\b",
    "claimed_consent": r"\b(?:the )?(?:user|developer|owner|operator|human)s? (?:has |have )?"
    r"(?:already )?(?:granted|agreed|approved|authori[sz]ed|consented|signed off|permitted)"
    r"\b|\b(?:owners?|maintainers?|admins?|humans) (?:are aware|have signed off|approved|"
    r"want)\b|\bapproval is implied\b|\btrust me\b|\bpre-?approved\b|\b(?:verified|"
    r"github|platform) (?:staff|support)\b",
    "authority": r"\b(?:authori[sz]ed|approved by|on behalf of|sanctioned|mandated|"
    r"mandatory|instructions? from|directive from|per (?:the )?(?:security|admin|owner|"
    r"maintainer)|official (?:directive|notice|instruction)|(?:security|compliance) team "
    r"(?:requires|has approved|says)|policy requires|is required)\b",
    "persona": r"\b(?:act(?:ing)? as|pretend (?:to be|you are)|persona|operating as|role-?play"
    r"|you(?:'re| are) (?:now )?(?:the|a|an) \w+ (?:owner|admin|manager|captain|maintainer))"
    r"\b|\byou(?:'re| are) now\b|\bnew (?:role|task) for you\b",
    "pipe_shell": r"\b(?:curl|wget|iwr|invoke-webrequest)\b[^\n|]{0,200}\|\s*(?:sudo\s+)?"
    r"(?:ba|z|k)?sh\b|\biex\b",
    "skip_checks": r"--no-verify|-auto-approve|--auto-approve|--admin\b|--force\b|\bskip[-_ ]"
    r"(?:ci|checks?|hooks?|tests?|review|the tests)\b|\b(?:disable|bypass|turn off|remove|"
    r"comment out|mark)\b[^.\n]{0,30}\b(?:tests?|linters?|checks?|ci|hooks?|branch "
    r"protection|2fa|mfa|signing|reviews?|auth\w*|permissions?|confirmations?|audit\w*)\b|"
    r"fail_under\s*=\s*0|pytest\.mark\.skip|hookspath|dangerously|strict-ssl false",
    "destroy": r"\bchmod\s+(?:-r\s+)?(?:0?777|a\+rwx)|\brm\s+-rf\s+(?:/|~|\$home|\*)|\bdrop "
    r"(?:schema|database|table)\b|\b(?:delete|remove|drop|truncate|wipe|destroy|nuke) "
    r"(?:all |the |every )?(?:codeowners|polic\w+|security\.md|license|audit\w*|branch "
    r"protection|prod\w*|migrations?|rows|release|tags|branches|\.github)|terraform destroy",
    "grant": r"\b(?:grant|give|add|make|promote|invite|attach|bind)\b[^.\n]{0,60}\b(?:admin"
    r"\w*|owner|maintainer|write access|root|superuser|collaborator|cluster-admin|"
    r"administratoraccess)\b|authorized_keys|ssh-(?:rsa|ed25519) aaaa|\bmake (?:the |this )?"
    r"repo\w* public\b|\bremote add\b|push (?:--all|--mirror)|gh secret set|\bnpm publish\b",
    "secrets_out": r"\b(?:send|post|upload|paste|forward|exfiltrat\w+|curl\b[^\n]{0,40}"
    r"(?:-d|--data)|webhook|include|append|attach|print|echo|output|put|read|cat|"
    r"base64[- ]?encode|printenv|store)\b[^\n]{0,80}(?:\benv\b|\.env\b|environment variables?"
    r"|tokens?\b|_token\b|secrets?\b|credentials?\b|passwords?\b|api[_ ]?keys?\b|\.aws\b|ssh"
    r" keys?\b|private keys?\b|\.npmrc\b|\.pypirc\b|kubeconfig\b|id_rsa\b|id_ed25519\b|"
    r"\.pem\b|/etc/passwd\b|hosts\.yml\b|inbox\b)",
    "standing_order": r"\b(?:remember|save|store|keep|record|memori[sz]e|note|add)\b"
    r"[^.\n]{0,50}\b(?:permanent\w*|forever|all future|every future|"
    r"future (?:sessions?|conversations?)|"
    r"from now on|as a (?:rule|standing|verified fact)|going forward|across all|to your "
    r"(?:notes|memory|project memory)|every (?:new )?session)\b|\bfrom (?:now|here) on\b|"
    r"\bgoing forward\b|\beach time you start\b|\bmemory system\b",
    "override": r"\b(?:previous|prior|earlier|old|existing|above|original|operator'?s?) "
    r"(?:guidance|instructions?|rules|policy|directions?|constraints)\b[^.\n]{0,40}\b(?:"
    r"outdated|obsolete|void|superseded|no longer|replaced|revoked)\b|\bsupersedes?\b|\bnew "
    r"(?:policy|directive|instructions?|operator instructions)\b|\bignor\w*\b|\bdisregard\b|"
    r"\bforget (?:what|everything|all)\b|\boutrank\b|\bno longer (?:want|need|expected)\b",
    "markup": r"</?(?:system|tool_output|instructions?)>|\[system\]|^\s*(?:human|user|system)"
    r"\s*\]?:",
    "urgent": r"\b(?:urgent|immediately|asap|right now|without delay|effective (?:today|"
    r"immediately)|apply now)\b",
    "external_url": r"(?:https?://|\bh77p)(?!(?:github\.com|docs\.|localhost|127\.0\.0\.1))",
    "raw_ip": r"\b\d{1,3}(?:\.\d{1,3}){3}\b",
}
_CUES: dict[str, re.Pattern[str]] = {}
_RX: dict[str, re.Pattern[str]] = {}


def _rx(name: str) -> re.Pattern[str]:
    """The learned detector's own expressions, compiled on first use."""
    if not _RX:
        # _CUES first: _RX non-empty is what tells another thread that both are filled.
        _CUES.update((cue, re.compile(p)) for cue, p in _CUE_PATTERNS.items())
        _RX.update(word=re.compile(_WORD), leety=re.compile(_LEETY), spaced=re.compile(_SPACED))
    return _RX[name]


# Obfuscation: a text that hides its words is suspicious in itself, and is read again with
# the disguise removed (Cyrillic look-alikes, leetspeak, letters spaced apart).
_CONFUSABLES = str.maketrans(
    "аеорсухѕіјАВЕКМНОРСТХҮ", "aeopcyxsijABEKMHOPCTXY"
)  # fmt: skip
_LEET = str.maketrans("013457$@", "oieastsa")
_LEETY = r"\b(?=\w*[a-z])(?=\w*[013457])[a-z013457]{4,}\b"
# Four or more single letters with a space, dot or dash between each: "a g e n t".
_SPACED = r"(?<![a-z])[a-z](?![a-z])(?:(?:\s?[-.]\s?|\s)[a-z](?![a-z])){3,}"


def _unconfuse(low: str) -> str:
    """Cyrillic look-alikes read as the Latin letters they imitate, but only where they hide
    Latin text: in a word that also holds Latin letters, or anywhere in a mostly Latin text (a
    look-alike standing alone among spaced letters). A Russian note is not a disguise."""
    if low.isascii():
        return low
    latin = sum(1 for ch in low if "a" <= ch <= "z")
    other = sum(1 for ch in low if ch.isalpha() and not ch.isascii())
    if latin > other:
        return low.translate(_CONFUSABLES)

    def mixed(m: re.Match[str]) -> str:
        word = m.group(0)
        return word.translate(_CONFUSABLES) if re.search("[a-z]", word) else word

    return re.sub(r"\w+", mixed, low)


def _deobfuscate(low: str) -> tuple[str, bool]:
    text = _unconfuse(low)
    changed = text != low
    leety = _rx("leety")
    leet = leety.sub(lambda m: m.group(0).translate(_LEET), text)
    if leet != text and any(sum(c.isdigit() for c in w) >= 2 for w in leety.findall(text)):
        text, changed = leet, True

    def join(m: re.Match[str]) -> str:
        return re.sub(r"[\s.\-]", "", m.group(0))

    spaced = _rx("spaced").sub(join, text)
    if spaced != text:
        text, changed = spaced, True
    return text, changed


# Character n-grams of the text (3 to 5, across word boundaries) beside the words: they carry
# what a bag of whole words loses (inflections, compounds, other languages' words, scripts with
# no spaces; docs/decisions.md). Each is worth _GRAM_WEIGHT / sqrt(max(count, _GRAM_FLOOR)):
# a fixed 0.4 up to ~500 characters, less beyond, so a long text's n-grams do not outvote its
# words. Without the floor a short chat line's few n-grams each weighed several times more, and
# 1.2 % of LoCoMo's benign turns ("Wow! What did you get?") scored as injections.
_GRAMS = (3, 4, 5)
_GRAM_WEIGHT = 16.0
_GRAM_FLOOR = 1600
# Features are hashed into 2**_BITS buckets: ~50k n-grams as a JSON dict took ~37 ms to parse
# at each process's first write; a float32 array of buckets loads in ~1 ms.
_BITS = 18
_WEIGHTS = "injection_weights.f32"

# Loaded on first use: a process that never scores text (most reads) never reads it.
_MODEL: tuple[array, float, float] | None = None


def _feature_parts(text: str) -> tuple[list[str], set[bytes], float]:
    """The named features (words, word pairs, cue groups), the character n-grams (UTF-8), and
    the value each n-gram carries."""
    low, obfuscated = _deobfuscate(normalise_text(text).lower())
    words = _rx("word").findall(low)
    named = {"w:" + w for w in words}
    named.update(f"b:{a} {b}" for a, b in zip(words, words[1:], strict=False))
    named.update("c:" + name for name, rx in _CUES.items() if rx.search(low))
    if obfuscated:
        named.add("c:obfuscated")
    spaced = " " + " ".join(low.split()) + " "
    if spaced.isascii():  # slicing the encoded text once is the n-grams' UTF-8, and cheaper
        raw = spaced.encode("ascii")
        grams = {raw[i : i + n] for n in _GRAMS for i in range(len(raw) - n + 1)}
    else:
        # surrogatepass: a lone surrogate (text decoded with surrogateescape) is still a text.
        grams = {
            spaced[i : i + n].encode("utf-8", "surrogatepass")
            for n in _GRAMS
            for i in range(len(spaced) - n + 1)
        }
    return sorted(named), grams, _GRAM_WEIGHT / max(_GRAM_FLOOR, len(grams)) ** 0.5


def classifier_features(text: str) -> dict[str, float]:
    """The features the learned detector sees, by name, with their values: words, word pairs,
    cue groups and character n-grams ("g:" + the n-gram)."""
    named, grams, value = _feature_parts(text)
    feats = dict.fromkeys(named, 1.0)
    feats.update(dict.fromkeys(["g:" + g.decode("utf-8", "surrogatepass") for g in grams], value))
    return feats


_MASK = (1 << _BITS) - 1
_GRAM_SEED = zlib.crc32(b"g:")  # crc32(gram, seed) == crc32(b"g:" + gram): no concatenation


def feature_bucket(name: str) -> int:
    """The weight bucket of one named feature (crc32: the same on every platform and run)."""
    return zlib.crc32(name.encode("utf-8", "surrogatepass")) & _MASK


def _buckets(text: str) -> tuple[list[int], list[int], float]:
    named, grams, value = _feature_parts(text)
    crc = zlib.crc32
    return [feature_bucket(n) for n in named], [crc(g, _GRAM_SEED) & _MASK for g in grams], value


def bucket_values(text: str) -> dict[int, float]:
    """The text's features summed into their buckets: what the weights multiply."""
    named, grams, value = _buckets(text)
    out: dict[int, float] = {}
    for b in named:
        out[b] = out.get(b, 0.0) + 1.0
    for b in grams:
        out[b] = out.get(b, 0.0) + value
    return out


def _model() -> tuple[array, float, float]:
    global _MODEL
    if _MODEL is None:
        import json
        import sys
        from pathlib import Path

        here = Path(__file__).parent
        raw = json.loads((here / "injection_weights.json").read_text("utf-8"))
        path = here / _WEIGHTS
        weights = array("f")
        # A damaged install (a truncated copy, a Git LFS pointer) says what is wrong.
        if raw.get("bits") != _BITS or path.stat().st_size != weights.itemsize << _BITS:
            raise RuntimeError(f"{path} does not hold 2**{_BITS} float32 weights: reinstall ZMem")
        with open(path, "rb") as f:
            weights.fromfile(f, 1 << _BITS)
        if sys.byteorder == "big":  # the file is little-endian
            weights.byteswap()
        _MODEL = (weights, float(raw["bias"]), float(raw["threshold"]))
    return _MODEL


def classifier_score(text: str) -> float:
    """The learned detector's logit for `text` (its threshold is in the weights file)."""
    weights, bias, _ = _model()
    named, grams, value = _buckets(text)
    at = weights.__getitem__
    return bias + sum(map(at, named)) + value * sum(map(at, grams))


def classified_as_injection(text: str) -> bool:
    return classifier_score(text) >= _model()[2]
