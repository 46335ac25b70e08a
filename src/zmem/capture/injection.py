"""Prompt-injection shape detection for memory text.

Owns the phrase patterns that mark text as instruction-shaped (aimed at the model that will later
read the memory) and the ``prompt-injection-risk`` tag. Precision first: descriptive coding
lessons must never tag, so every shape needs an imperative aimed at the model or its memory.
"""

from __future__ import annotations

import re
import unicodedata

INJECTION_TAG = "prompt-injection-risk"

# A space in a phrase template means "any run of whitespace/punctuation", so
# "ignore -- all *previous* instructions" still reads as the phrase it is.
_SEP = r"[\W_]{1,12}"
_FLAGS = re.IGNORECASE | re.MULTILINE

# Invisible format characters are a cheap way to split a trigger word; drop them first.
_INVISIBLE = dict.fromkeys(
    (0x00AD, 0x180E, 0x200B, 0x200C, 0x200D, 0x200E, 0x200F, 0x2060, 0xFEFF), None
)


def _phrase(template: str) -> re.Pattern[str]:
    return re.compile(template.replace(" ", _SEP), _FLAGS)


# Shared vocabulary (templates: spaces become _SEP when compiled by _phrase).
_NEG = r"(?:do not|don\W{0,2}t|dont|never|must not|mustn\W{0,2}t|should not|shouldn\W{0,2}t)"
_QUAL = r"(?:previous|prior|above|earlier|preceding|foregoing|system|developer)"
_RULE_NOUNS = (
    r"(?:instructions?|prompts?|directions|directives|guidelines|guidance|rules|commands"
    r"|constraints|programming|orders)"
)
_ORDERS = r"(?:instructions?|prompts?|directions|directives|guidelines|orders)"
_PRIVILEGED = (
    r"(?:system|administrator|admin|root|superuser|sysadmin|developer mode|god mode"
    r"|unrestricted|unfiltered|jailbroken|dan)"
)
_AUDIENCE = r"(?:the |any |a )?(?:users?|human|operator|anyone|anybody|them)"
_SELF = (
    r"(?:(?:this|these|that|the|my|your|any) (?:instructions?|memory|memories|notes?|prompts?"
    r"|directives?|system prompt)|the system prompt)"
)
_MEM_YOUR = (
    r"(?:memory store|memory bank|knowledge(?: |)base|long-term memory|stored memories"
    r"|saved memories|memories|memory|knowledge)"
)
_MEM_THE = r"(?:memory store|memory bank|knowledge(?: |)base|long-term memory|stored memories)"
# What may follow a memory noun: end of clause or a connective, never another noun
# ("memory limit", "memory store schema" are infrastructure talk).
_MEM_TAIL = (
    r"(?=\s*(?:$|[^\w\s]|(?:to|with|so|that|about|and|now|permanently|accordingly|immediately"
    r"|forever|as|for|since|because)\b))"
)
_MEM_TAIL_STRICT = (
    r"(?=\s*(?:$|[.!;:]|(?:so that|so it|accordingly|permanently|immediately|now"
    r"|to (?:say|state|read|reflect|include|contain|record|note|show))\b))"
)
_SECRET_NOUNS = (
    r"(?:api keys?|(?:api|access|auth|bearer|session|github|npm) tokens?|credentials"
    r"|secrets?|passwords?|env(?: vars?| file)?|environment variables|\.env(?: file)?"
    r"|ssh (?:private )?keys?|private keys?|~/\.(?:ssh|aws)\S*|id_rsa|id_ed25519)"
)
_SEND = r"(?:send|email|e-mail|forward|transmit|exfiltrate|leak|dump|beam)"
_EXTERNAL = (
    r"(?:https?://|www\.|\S+@\S+\.\w|\d{1,3}(?:\.\d{1,3}){3}|(?:me|us)\b"
    r"|this (?:url|address|endpoint|webhook|email|server|domain|link)"
    r"|(?:an |the )?(?:external|remote|third party|attacker|following)\b)"
)

# A subject/modal just before the verb makes it description, not command:
# "the agent may ignore previous instructions" is a lesson about agents.
_DESCRIPTIVE_LEAD = re.compile(
    r"(?:\b(?:will|would|can|could|may|might|should|to|not|never|often|sometimes|usually"
    r"|also|does|did|cannot)|n\W?t)[\W_]*$",
    re.IGNORECASE,
)
# Shapes whose verbs ("ignore", "act as", "pretend") also occur in descriptions of agents.
_VETO_WHEN_DESCRIPTIVE = frozenset({"override", "role_hijack"})

_TEMPLATES: dict[str, tuple[str, ...]] = {
    "override": (
        rf"\b(?:ignore|disregard|forget) (?:(?:all|any|every) (?:of )?)?"
        rf"(?:(?:the|your|my|these|those|any) )?(?:{_QUAL} )+(?:\w+ )?{_RULE_NOUNS}\b",
        # Without a qualifier only "all/your instructions" is unambiguous ("ignore all rules"
        # is linter talk).
        rf"\b(?:ignore|disregard|forget) (?:(?:all|any|every) (?:of )?(?:(?:the|your|my) )?"
        rf"|your ){_ORDERS}\b",
        # A header announcing replacement orders ("new system prompt:", "updated
        # instructions -"): descriptive mentions ("the new system prompt for the bot lives in
        # prompts/") have no punctuation straight after the noun.
        r"\b(?:new|updated|revised|real|actual|true) (?:system (?:prompt|message|instructions?)"
        r"|instructions)\s*(?:[:,\-\u2013\u2014]|is\s*:)",
        r"\b(?:ignore|disregard|forget) (?:everything|all|anything)(?: that)? "
        r"(?:you(?:\W?ve| have| were| are)? (?:been )?(?:told|taught|instructed|given)"
        r"|above|before this|so far|i (?:said|told you))\b",
    ),
    "role_hijack": (
        # Clause-initial only: "after login you are now a collaborator" is narration.
        r"(?:^|(?<=[.!?;:\"'`>*#(\[-]))\s*you(?: are|\W?re) now (?:(?:a|an|the|my) \w"
        r"|dan\b|in (?:developer|god|jailbreak|unrestricted) mode|unrestricted|jailbroken)",
        r"\bfrom now on (?:you(?: are|\W?re) (?:a|an|the|my|no longer|dan)\b"
        r"|you(?: will|\W?ll) (?:act|behave|respond|pretend|roleplay) as\b)",
        rf"\b(?:act|behave|respond|operate) as (?:if you (?:are|were) )?(?:(?:the|a|an|my) )?"
        rf"{_PRIVILEGED}(?: (?:administrator|admin|prompt|message|role|user|account))?"
        r"(?=\s*(?:$|[^\w\s]|(?:and|from|now|until|for|with)\b))",
        rf"\bpretend (?:to be|(?:that )?you(?: are|\W?re)) (?:(?:the|a|an|my) )?{_PRIVILEGED}\b",
        r"\byour new (?:role|persona|identity|name|purpose) (?:is|will be)\b",
        r"\byou(?: are|\W?re) no longer (?:(?:an|a|the) )?"
        r"(?:ai|assistant|language model|chatbot|bound by|restricted|claude|chatgpt)\b",
    ),
    "concealment": (
        # The object must be the text itself ("this instruction") or "this" aimed at the user:
        # "never reveal stack traces to the user" is a security lesson.
        rf"\b{_NEG} (?:mention|reveal|disclose|divulge|repeat|discuss|acknowledge) "
        rf"(?:{_SELF}(?=\s*(?:$|[^\w\s]|(?:to|from|with|unless|or|and)\b))"
        rf"|(?:this|these|any of this)(?:\s*[.!]| (?:to|from|with) {_AUDIENCE}\b))",
        rf"\b{_NEG} (?:tell|inform|notify|alert) (?:the )?(?:users?|human|operator)"
        r"(?=\s*(?:$|[.!;)]|about (?:this|these|it|that|any)\b|(?:that|what) you\b"
        r"|anything\b))",
        rf"\bkeep (?:(?:this|these|it|that) (?:a )?secret from {_AUDIENCE}\b"
        rf"|{_SELF} (?:a )?secret\b)",
        rf"\b(?:hide|conceal|withhold) (?:this|these|{_SELF}) from {_AUDIENCE}\b",
    ),
    "store_mutation": (
        r"\b(?:update|modify|change|edit|overwrite|rewrite|alter|delete|erase|wipe|clear|purge"
        rf"|reset|corrupt|poison|replace) your {_MEM_YOUR}{_MEM_TAIL}",
        r"\b(?:add|write|store|save|insert|append|record|put|commit|persist|remember|inject|keep)"
        rf" (?:(?:this|these|that|it|the following) )?(?:to|in|into|inside|within) "
        rf"(?:your {_MEM_YOUR}|the {_MEM_THE}){_MEM_TAIL}",
        # clear/reset/wipe "the memory store" is test setup; only rewriting it is suspicious.
        rf"\b(?:update|modify|overwrite|rewrite|alter|corrupt|poison) the {_MEM_THE}"
        rf"{_MEM_TAIL_STRICT}",
        r"\bremember (?:this|that|the following|these (?:facts|instructions|rules)) "
        r"(?:forever|permanently|for all future|in all future)\b",
        # Plain "remember to always X" is how lessons are phrased; only future-session scope
        # turns it into a standing order.
        r"\bremember to always\b[^.\n]{0,120}?\b(?:in|for|across|during) (?:all |every )?"
        r"(?:future|subsequent) (?:sessions?|conversations?|chats?|responses?|interactions?)",
    ),
    "exfiltration": (
        rf"\b{_SEND} (?:all (?:of )?)?(?:your|the user\W?s|all|any) (?:contents of )?"
        rf"(?:\w+ )?{_SECRET_NOUNS} (?:to|into|via|over to|at)\b",
        # "send the token to the server" is auth plumbing unless the destination is external.
        rf"\b(?:{_SEND}|upload|post|paste) the (?:contents of )?(?:\w+ )?{_SECRET_NOUNS} "
        rf"(?:to|into|via|over to|at) {_EXTERNAL}",
        r"\b(?:send|email|forward|transmit|exfiltrate|leak) the (?:contents of (?:the |your )?)?"
        r"(?:environment variables|env vars|ssh (?:private )?keys?|private keys?|secrets"
        r"|\.env(?: file)?|~/\.(?:ssh|aws)\S*|system prompt) (?:to|into|via|over to|at)\b",
        # Aimed at the reader's own knowledge: "reveal every key you have seen".
        # A modal before the verb makes it a description of a bug, not an order.
        r"(?<!would\s)(?<!could\s)(?<!might\s)(?<!will\s)(?<!can\s)(?<!may\s)(?<!to\s)"
        r"\b(?:print|echo|output|reveal|display|dump|show|list|leak|repeat|disclose|tell me) "
        r"(?:all|every|each|any) (?:of )?(?:the |your )?(?:\w+ ){0,2}(?:keys?|tokens?"
        r"|passwords?|secrets?|credentials) (?:that )?you(?:\W?ve| have| can| know| saw"
        r"| remember| were given)\b",
        r"\b(?:print|echo|output|reveal|display|include|dump|show|list|write|paste|leak|repeat)"
        rf" (?:all (?:of )?)?(?:the |your |my |any )?(?:{_SECRET_NOUNS}|system prompt"
        r"|hidden instructions) (?:in|into|within|as part of) your "
        r"(?:response|reply|answer|next message|output)",
    ),
    "system_marker": (
        r"<\|(?:im_start|im_end|im_sep|system|user|assistant|endoftext|begin_of_text"
        r"|end_of_text|start_header_id|end_header_id|eot_id|eom_id)\|>"
        r"|\[/?INST\]|<</?SYS>>|</?system(?:[_-](?:prompt|message|instructions?))?>",
        # The fences memory is injected in (ours and Hermes'): no note has a reason to
        # spell them, and one that does is trying to end the block and speak as the host.
        r"</?\s*(?:zmem-memories|memory-context)\b",
        r"^[^\S\n]*#{1,6}\s*(?:system|instructions?)(?:\s+prompt)?\s*:",
        # Upper-case only: "System: Ubuntu 22.04" in a bug report is not a role header.
        r"^[^\S\n]*(?-i:SYSTEM)(?:\s+(?-i:PROMPT))?\s*:",
    ),
}

# Each shape's templates are compiled when a text first holds its anchors: compiling them all
# cost ~12 ms at import, paid by every process importing the capture policy, the cold prompt
# hook included, whose rows (read-time reclassification) mostly hold no anchor at all.
_BY_SHAPE: dict[str, tuple[re.Pattern[str], ...]] = {}


def _shape_rx(shape: str) -> tuple[re.Pattern[str], ...]:
    found = _BY_SHAPE.get(shape)
    if found is None:
        found = _BY_SHAPE[shape] = tuple(_phrase(t) for t in _TEMPLATES[shape])
    return found


def compiled() -> list[tuple[str, re.Pattern[str]]]:
    """Every (shape, compiled template), in template order."""
    return [(shape, rx) for shape in _TEMPLATES for rx in _shape_rx(shape)]


# A shape's anchor groups: every template of the shape contains a word of each group, so a text
# missing every word of some group cannot match the shape and its regexes are skipped: most
# lessons hold no anchor at all (0.09 ms -> 0.01 ms per write). Plain substring tests on a
# lower-cased, mark-stripped copy: an alternation regex with IGNORECASE cost more than the
# templates it was meant to skip. Exfiltration and role hijack need two groups: "you", "key",
# "token" and "env" are everyday words in coding lessons, and those shapes' regexes are the
# costliest (0.11 ms for exfiltration's five on a 200-character lesson).
_ANCHORS: dict[str, tuple[tuple[str, ...], ...]] = {
    "override": (
        ("ignore", "disregard", "forget", "new", "updated", "revised", "real", "actual", "true"),
    ),
    "role_hijack": (
        # "you are now", "from now on you", "your new role", "you are no longer"; or the verb
        # of "act as" / "pretend to be" (in both groups).
        ("you", "pretend", "act", "behave", "respond", "operate"),
        ("now", "new", "longer", "pretend", "act", "behave", "respond", "operate"),
    ),
    "concealment": (
        (
            "mention",
            "reveal",
            "disclose",
            "divulge",
            "repeat",
            "discuss",
            "acknowledge",
            "tell",
            "inform",
            "notify",
            "alert",
            "secret",
            "hide",
            "conceal",
            "withhold",
        ),
    ),
    "store_mutation": (("memor", "knowledge", "remember"),),
    "exfiltration": (
        # What is taken (_SECRET_NOUNS, "system prompt", "hidden instructions") ...
        (
            "key",
            "password",
            "token",
            "credential",
            "secret",
            "env",
            "ssh",
            "aws",
            "id_rsa",
            "id_ed25519",
            "system",
            "hidden",
        ),
        # ... and the verb that moves or shows it (_SEND and the templates' own verbs).
        (
            "send",
            "mail",
            "forward",
            "transmit",
            "exfiltrate",
            "leak",
            "dump",
            "beam",
            "upload",
            "post",
            "paste",
            "print",
            "echo",
            "output",
            "reveal",
            "display",
            "show",
            "list",
            "repeat",
            "disclose",
            "tell",
            "include",
            "write",
        ),
    ),
    "system_marker": (
        (
            "<|",
            "[inst",
            "[/inst",
            "<<sys",
            "<</sys",
            "system",
            "instruction",
            "zmem-memories",
            "memory-context",
        ),
    ),
}
assert set(_ANCHORS) == set(_TEMPLATES)


def _anchor_text(norm: str) -> str:
    low = norm.lower()
    if low.isascii():
        return low
    # The templates match case-insensitively, where "İ" equals "i"; lower() turns it into
    # "i" + a combining dot, so marks are stripped to keep every anchor a true superset. The
    # regex engine also equates dotless "ı" with "i", which lower() keeps apart.
    low = low.replace("ı", "i")
    return "".join(ch for ch in unicodedata.normalize("NFD", low) if not unicodedata.combining(ch))


def normalise_text(text: str) -> str:
    if text.isascii():
        return text  # ASCII is NFKC-stable and holds no invisible format characters
    return unicodedata.normalize("NFKC", text).translate(_INVISIBLE)


def _descriptive(text: str, start: int) -> bool:
    return _DESCRIPTIVE_LEAD.search(text[max(0, start - 24) : start]) is not None


def injection_shapes(text: str) -> list[str]:
    """Sorted unique names of the injection shapes present in ``text``."""
    norm = normalise_text(text)
    has = _anchor_text(norm).__contains__  # map() keeps the ~60 substring tests in C
    found = []
    for shape, groups in _ANCHORS.items():
        if all(any(map(has, g)) for g in groups) and _matches(shape, norm):
            found.append(shape)
    return sorted(found)


def _matches(shape: str, norm: str) -> bool:
    veto = shape in _VETO_WHEN_DESCRIPTIVE
    for rx in _shape_rx(shape):
        for m in rx.finditer(norm):
            if not (veto and _descriptive(norm, m.start())):
                return True
    return False


def is_injection_risk(text: str) -> bool:
    """True when ``text`` has any injection shape."""
    return bool(injection_shapes(text))
