"""Write-time judgement measured on note pairs: each pair's older note is added to a fresh
store, then its newer one, through MemoryStore.add (the path every front end writes by), and
the outcome is read back: folded into the older row (a duplicate), stored with a contradicts
edge to it (a contradiction), or stored beside it (distinct). Scored against the pair's label,
per family and per side of a fixed split (tune: what rules may be chosen on; validation: what
is quoted)."""

from __future__ import annotations

import hashlib
import json
import tempfile
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

LABELS = ("duplicate", "contradiction", "distinct")
DECISIONS = {"duplicate": "folded", "contradiction": "flagged", "distinct": "kept apart"}
NAMESPACE = "project:judgement-eval"


@dataclass(frozen=True)
class Pair:
    id: str
    a: str
    b: str
    label: str
    family: str

    @property
    def side(self) -> str:
        """A fixed half of the set by a hash of the id: "tune" or "validation"."""
        return "validation" if hashlib.sha256(self.id.encode()).digest()[0] % 2 else "tune"


def load(path: Path) -> list[Pair]:
    pairs = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        doc = json.loads(line)
        if doc.get("label") not in LABELS:
            raise ValueError(f"{path}:{n}: label must be one of {', '.join(LABELS)}")
        pairs.append(Pair(doc["id"], doc["a"], doc["b"], doc["label"], doc["family"]))
    return pairs


ANSWER_FOR = {"duplicate": "same", "contradiction": "contradicts", "distinct": "distinct"}


@dataclass(frozen=True)
class Outcome:
    decided: str  # what the write path did on its own: a label of LABELS
    asked: str | None  # the answer the judge leaned to when it asked (None: it decided)
    answered: str | None = None  # with a scripted answerer: the store's state after resolve


def decide(
    pair: Pair, open_store: Callable[[Path], Any], work: Path, answer: bool = False
) -> Outcome:
    """What the write path did with the pair: folded b into a's row (duplicate), stored b with
    a contradicts edge to a (contradiction), or stored it beside a (distinct), and whether it
    asked about the pair. With `answer`, a scripted agent answers the question by the pair's
    label through `resolve`, and the store's state after it is read back."""
    with open_store(work / f"{pair.id}.sqlite") as store:
        first = store.add(pair.a, namespace=NAMESPACE, type="lesson", signal="user")
        second = store.add(pair.b, namespace=NAMESPACE, type="lesson", signal="user")
        if second.id == first.id or second.result == "deduped":
            decided = "duplicate"
        elif first.id in second.contradicts:
            decided = "contradiction"
        else:
            decided = "distinct"
        review = next((r for r in second.reviews if r["id"] == first.id), None)
        asked = review["likely"] if review else None
        if not answer:
            return Outcome(decided, asked)
        if review is None:
            return Outcome(decided, None, decided)
        done = store.resolve(second.id, first.id, ANSWER_FOR[pair.label], by="scripted")
        state = {"folded": "duplicate", "contradicts": "contradiction"}.get(done["result"])
        return Outcome(decided, asked, state or "distinct")


@dataclass
class Score:
    """Decisions against labels for one group of pairs."""

    confusion: Counter[tuple[str, str]] = field(default_factory=Counter)  # (label, decided)
    asked: Counter[str] = field(default_factory=Counter)  # label -> pairs the judge asked about
    answered: Counter[tuple[str, str]] = field(default_factory=Counter)  # after a scripted agent

    def add(self, label: str, outcome: Outcome | str) -> None:
        if isinstance(outcome, str):
            outcome = Outcome(outcome, None)
        self.confusion[(label, outcome.decided)] += 1
        if outcome.asked is not None:
            self.asked[label] += 1
        if outcome.answered is not None:
            self.answered[(label, outcome.answered)] += 1

    def count(self, label: str | None = None, decided: str | None = None) -> int:
        return sum(
            n
            for (lab, dec), n in self.confusion.items()
            if (label is None or lab == label) and (decided is None or dec == decided)
        )

    @property
    def pairs(self) -> int:
        return self.count()

    @property
    def accuracy(self) -> float:
        return sum(self.count(lab, lab) for lab in LABELS) / max(1, self.pairs)

    @property
    def flag_precision(self) -> float | None:
        flagged = self.count(decided="contradiction")
        return self.count("contradiction", "contradiction") / flagged if flagged else None

    @property
    def fold_precision(self) -> float | None:
        folded = self.count(decided="duplicate")
        return self.count("duplicate", "duplicate") / folded if folded else None

    @property
    def flag_recall(self) -> float | None:
        opposite = self.count("contradiction")
        return self.count("contradiction", "contradiction") / opposite if opposite else None

    @property
    def fold_recall(self) -> float | None:
        same = self.count("duplicate")
        return self.count("duplicate", "duplicate") / same if same else None

    @property
    def wrong_folds(self) -> int:
        """Pairs that are not the same note but were folded: a lost memory."""
        return self.count("distinct", "duplicate") + self.count("contradiction", "duplicate")

    @property
    def coverage(self) -> float | None:
        """Of the true duplicates and contradictions: decided rightly, or asked about. A pair
        the judge asked about is stored as written and still counts as decided (distinct) in
        the confusion: `asked` tells them apart, hence the subtraction."""
        total = self.count("duplicate") + self.count("contradiction")
        if not total:
            return None
        rightly = self.count("duplicate", "duplicate") + self.count(
            "contradiction", "contradiction"
        )
        return (rightly + self.asked["duplicate"] + self.asked["contradiction"]) / total

    @property
    def distinct_asked(self) -> float | None:
        distinct = self.count("distinct")
        return self.asked["distinct"] / distinct if distinct else None

    @property
    def answered_accuracy(self) -> float | None:
        """With a scripted answerer that follows the labels: the share of pairs the store
        ends as labelled (what a perfect agent reaches)."""
        n = sum(self.answered.values())
        return sum(v for (lab, got), v in self.answered.items() if lab == got) / n if n else None


def run(
    pairs: Iterable[Pair],
    open_store: Callable[[Path], Any],
    progress: Callable[[int], None] | None = None,
    answer: bool = False,
) -> list[tuple[Pair, Outcome]]:
    """(pair, outcome) for every pair, each on a fresh store in a temporary directory."""
    out = []
    with tempfile.TemporaryDirectory(prefix="zmem-judgement-") as tmp:
        for n, pair in enumerate(pairs, start=1):
            out.append((pair, decide(pair, open_store, Path(tmp), answer)))
            if progress is not None:
                progress(n)
    return out


def score(
    results: Iterable[tuple[Pair, Outcome | str]], key: Callable[[Pair], str]
) -> dict[str, Score]:
    """Scores grouped by key(pair), plus "all"."""
    groups: dict[str, Score] = {"all": Score()}
    for pair, decided in results:
        groups.setdefault(key(pair), Score()).add(pair.label, decided)
        groups["all"].add(pair.label, decided)
    return groups
