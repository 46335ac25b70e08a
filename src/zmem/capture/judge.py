"""The write-time judge: what a new note is to one near neighbour. It decides (fold as a
duplicate, link as a contradiction, keep apart) only inside the bands where the word rules were
measured reliable on the dev pair sets, and elsewhere asks: the note is stored as written and
the write returns a review for the agent that wrote it (docs/decisions.md, "Decide when sure,
ask the agent when not"). Pure: the writer brings the two texts and their similarities."""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any

from zmem.capture import stance
from zmem.tokens import NEGATIONS, STOP_WORDS, flag_tokens, number_tokens, number_units, words

# The decisions.
FOLD, CONTRADICT, APART, ASK = "fold", "contradicts", "apart", "ask"
# The answers a review takes (`zmem resolve NEW OLD --as ...`).
ANSWERS = ("same", "replaces", "contradicts", "distinct")

# Calibrated on the tune side of eval/judge_pairs.jsonl and eval/judge_pairs2.jsonl
# (scripts/eval_judgement.py; the figures in docs/decisions.md):
# - a fold needs the words themselves to match (similarity-token Jaccard): a high cosine alone
#   folded two true contradictions ("single quotes" / "double quotes instead of single");
FOLD_JACCARD = 0.85
# - the readings of opposite stances that were never wrong there; another reading of an
#   opposition (a negation more on one side) is asked: it was a paraphrase a quarter of the time;
RELIABLE_OPPOSITES = frozenset(
    {"preference-swapped", "rejects-the-preferred", "antonym", "rejects-what-other-affirms"}
)
# ... and only between notes that are close (a link-level cosine, or half their words);
CONTRADICT_COSINE = 0.70
CONTRADICT_JACCARD = 0.5
# - below these nothing is asked: the pair is kept apart without a question (a neighbour that
#   far off was a duplicate or a contradiction too rarely to be worth the agent's attention).
ASK_COSINE = 0.55
ASK_JACCARD = 0.5  # a store without a real model (the fake profile) has only the words

# Notes longer than this are never read as one sentence with a span swapped (the alignment
# costs the product of the two lengths, inside the write lock).
SWAP_MAX_WORDS = 60
# Words a swap of scope is never made of (a negation swapped is the stance's business).
_FILLER = STOP_WORDS | NEGATIONS

LIKELY = {stance.SAME: "same", stance.OPPOSITE: "contradicts", stance.APART: "distinct"}


@dataclass(frozen=True)
class Evidence:
    """What the judge read from a pair: how alike they are, and what differs."""

    jaccard: float
    cosine: float | None
    relation: str  # stance.SAME / OPPOSITE / APART
    reading: str  # the stance rule that decided the relation
    changed: tuple[str, ...]  # anchors both notes state, differently: number, unit, flag
    one_sided: tuple[str, ...]  # anchors only one of them states
    swapped: tuple[tuple[str, str], ...]  # the same sentence with these words replaced

    def to_dict(self) -> dict[str, Any]:
        differs = [*self.changed, *(f"{a} on one side" for a in self.one_sided)]
        if self.relation == stance.OPPOSITE:
            differs.append("negation" if "negation" in self.reading else "stance")
        if self.swapped:
            differs.append("scope: " + "; ".join(f"{a} / {b}" for a, b in self.swapped))
        return {
            "similarity": round(self.cosine if self.cosine is not None else self.jaccard, 3),
            "jaccard": round(self.jaccard, 3),
            "cosine": None if self.cosine is None else round(self.cosine, 3),
            "reading": self.reading,
            "differs": differs,
        }


@dataclass(frozen=True)
class Verdict:
    decision: str  # FOLD, CONTRADICT, APART or ASK
    likely: str | None = None  # for ASK: the answer the words lean to (one of ANSWERS)
    evidence: Evidence | None = None  # what it was decided on (a question reports it)


def _anchors(text: str) -> tuple[frozenset[str], Any, frozenset[str]]:
    return number_tokens(frozenset(words(text))), number_units(text), flag_tokens(text)


def swapped(old: str, new: str) -> tuple[tuple[str, str], ...]:
    """The words replaced when `new` is `old` with one or two short spans swapped and the rest
    in the same order ("The api service uses Redis" / "The web service uses Redis"): the same
    sentence said of something else. Empty when the two are worded apart."""
    a, b = words(old), words(new)
    if max(len(a), len(b)) > SWAP_MAX_WORDS:
        return ()  # a long note is not "the same sentence"; and the alignment is quadratic
    match = difflib.SequenceMatcher(a=a, b=b, autojunk=False)
    ops = match.get_opcodes()
    kept = sum(i2 - i1 for tag, i1, i2, _, _ in ops if tag == "equal")
    spans = []
    for tag, i1, i2, j1, j2 in ops:
        if tag == "equal":
            continue
        x = [w for w in a[i1:i2] if w not in _FILLER]
        y = [w for w in b[j1:j2] if w not in _FILLER]
        if not x and not y:
            continue  # an article, a preposition or a negation word: not a scope
        if not x or not y or len(x) > 3 or len(y) > 3:
            return ()  # something added or dropped, or rewritten: worded apart
        spans.append((" ".join(x), " ".join(y)))
    return tuple(spans) if 1 <= len(spans) <= 2 and kept >= 3 else ()


def evidence(old: str, new: str, jaccard: float, cosine: float | None) -> Evidence:
    relation, reading = stance.explain(old, new)
    changed, one_sided = [], []
    for name, x, y in zip(("number", "unit", "flag"), _anchors(old), _anchors(new), strict=True):
        if x != y:
            (changed if x and y else one_sided).append(name)
    return Evidence(
        jaccard, cosine, relation, reading, tuple(changed), tuple(one_sided), swapped(old, new)
    )


def judge(e: Evidence) -> Verdict:
    """The decision for one pair, in the order the bands were calibrated."""
    close = (e.cosine is not None and e.cosine >= CONTRADICT_COSINE) or (
        e.jaccard >= CONTRADICT_JACCARD
    )
    if e.relation == stance.OPPOSITE:
        if e.reading in RELIABLE_OPPOSITES and close and not e.changed:
            return Verdict(CONTRADICT)
        if e.jaccard >= FOLD_JACCARD and not e.changed:
            # The spec's polarity guard: a near-identical hit whose stance disagrees is linked
            # as a contradiction, whatever reading found the disagreement.
            return Verdict(CONTRADICT)
    if e.changed:
        return Verdict(APART)  # another number, unit or flag: another fact
    if e.swapped and e.relation != stance.OPPOSITE:
        return Verdict(APART)  # the same sentence about another scope
    if e.relation == stance.SAME and e.jaccard >= FOLD_JACCARD and not e.one_sided:
        return Verdict(FOLD)
    asked = (e.cosine is not None and e.cosine >= ASK_COSINE) or (
        e.cosine is None and e.jaccard >= ASK_JACCARD
    )
    if asked:
        return Verdict(ASK, LIKELY[e.relation], e)
    return Verdict(APART)


def question(
    new_id: str, old_id: str, old_text: str | None, verdict: Verdict, evidence: dict[str, Any]
) -> dict[str, Any]:
    """One review as a write reports it: the other row, the evidence, the question, and the
    command that answers it. The other row's text is None when it must not reach an agent's
    context unasked (an injection risk, the web): the write says so instead."""
    return {
        "id": old_id,
        "text": old_text if old_text is not None else "[withheld: `zmem get` shows it]",
        "question": "Is the new memory the same as this one, does it replace it, does it "
        "contradict it, or is it a distinct fact?",
        "likely": verdict.likely,
        "evidence": evidence,
        "answer": f"resolve new={new_id} old={old_id} as={'|'.join(ANSWERS)} (MCP/Hermes "
        f"tool), or: zmem resolve {new_id} {old_id} --as {'|'.join(ANSWERS)}",
    }
