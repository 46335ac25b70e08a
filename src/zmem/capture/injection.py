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


def _normalise(text: str) -> str:
    if text.isascii():
        return text  # ASCII is NFKC-stable and holds no invisible format characters
    return unicodedata.normalize("NFKC", text).translate(_INVISIBLE)


def _descriptive(text: str, start: int) -> bool:
    return _DESCRIPTIVE_LEAD.search(text[max(0, start - 24) : start]) is not None


def injection_shapes(text: str) -> list[str]:
    """Sorted unique names of the injection shapes present in ``text``."""
    norm = _normalise(text)
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


# ---- the learned detector ------------------------------------------------------------------
# The shapes above are precise but know only the phrasings they spell out. Beside them, a
# logistic model over the text's words, word pairs and a few cue groups (who is addressed, what
# is asked: concealment, claimed authority, a dangerous command, secrets leaving, a standing
# order) scores every text. Its weights and threshold are trained by scripts/train_injection.py
# on one half of eval/injection_set.jsonl (split by family) and the tune projects of the coding
# corpus; the other half is what docs/benchmarks.md reports.

_WORD = r"[a-z0-9_][a-z0-9_\-\.]*"
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


def _deobfuscate(low: str) -> tuple[str, bool]:
    text = low.translate(_CONFUSABLES)
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


# Loaded on first use: a process that never scores text (most reads) never parses it.
_MODEL: tuple[dict[str, float], float, float] | None = None


def classifier_features(text: str) -> set[str]:
    """The features the learned detector sees: words, word pairs and cue groups."""
    low, obfuscated = _deobfuscate(_normalise(text).lower())
    words = _rx("word").findall(low)
    feats = {"w:" + w for w in words}
    feats.update("b:" + a + " " + b for a, b in zip(words, words[1:], strict=False))
    feats.update("c:" + name for name, rx in _CUES.items() if rx.search(low))
    if obfuscated:
        feats.add("c:obfuscated")
    return feats


def _model() -> tuple[dict[str, float], float, float]:
    global _MODEL
    if _MODEL is None:
        import json
        from pathlib import Path

        raw = json.loads((Path(__file__).with_name("injection_weights.json")).read_text("utf-8"))
        _MODEL = (raw["weights"], float(raw["bias"]), float(raw["threshold"]))
    return _MODEL


def classifier_score(text: str) -> float:
    """The learned detector's logit for `text` (its threshold is in the weights file)."""
    weights, bias, _ = _model()
    get = weights.get
    return bias + sum(get(f, 0.0) for f in classifier_features(text))


def classified_as_injection(text: str) -> bool:
    return classifier_score(text) >= _model()[2]
