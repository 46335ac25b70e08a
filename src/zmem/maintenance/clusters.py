"""Planning a consolidation: clusters of near-duplicate live rows (per namespace and type,
each member similar to its keeper by cosine or token Jaccard, whichever says more), the number
guard, the write path's judge on every keeper-member pair (a member merges only where it would
fold; what it cannot decide is asked, never guessed), the contested guard with the optional NLI
judge, and the keeper's merged text. Pure computation over rows already read: nothing here
touches the store."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from zmem.capture import judge, stance, writer
from zmem.config import Settings
from zmem.db import consolidation as db
from zmem.db import memories
from zmem.embedding import PROFILE_DIMS, PROFILE_MODELS
from zmem.maintenance.nli import Judge
from zmem.models import MAX_CONTENT_CHARS, Memory
from zmem.retrieval.render import estimate_tokens
from zmem.tokens import first_sentence, jaccard, number_tokens, number_units, words


class Vectors(Protocol):
    """What consolidation needs of a store's embedding state (store.vectors.StoreVectors)."""

    def embed(self, content: str) -> writer.Vector: ...
    def for_write(self, vector: writer.Vector) -> writer.Vector: ...
    def semantic(self) -> writer.Semantic | None: ...


def _phrase(text: str) -> str:
    return " " + " ".join(words(text)) + " "


# ---- planning ---------------------------------------------------------------------------------

STAY_LIVE = ("parked", "asked")


@dataclass
class Member:
    id: str
    similarity: float
    # keeper | absorb (text appended) | subsumed | truncated | parked | asked (stays live: the
    # write path's judge cannot decide the pair, and the question is queued or already waits)
    action: str = "absorb"


@dataclass(frozen=True)
class Ask:
    """A question consolidate queues instead of guessing: what `new` (the later row, as a write
    of it would have asked) is to `old`, with the judge's verdict and evidence."""

    new: db.Row
    old: writer.Neighbour
    verdict: judge.Verdict


@dataclass
class Cluster:
    namespace: str
    type: str
    keeper: str
    members: list[Member]  # the keeper first
    decision: str = "merge"  # merge | parked | asked (nothing merges: only questions)
    reason: str | None = None
    content: str = ""  # the keeper's content after the merge
    would_lose_tokens: int = 0
    result_id: str | None = None  # after a real run: the row the cluster became
    applied: bool = False
    asks: list[Ask] = field(default_factory=list)  # the questions to queue (not in to_dict)

    @property
    def grows(self) -> bool:
        return any(m.action == "absorb" for m in self.members)

    @property
    def absorbing(self) -> list[Member]:
        """The members this cluster retires (parked and asked ones stay live)."""
        return [m for m in self.members[1:] if m.action not in STAY_LIVE]

    def to_dict(self) -> dict[str, Any]:
        return {
            "namespace": self.namespace,
            "type": self.type,
            "keeper": self.keeper,
            "members": [
                {"id": m.id, "similarity": round(m.similarity, 4), "action": m.action}
                for m in self.members
            ],
            "decision": self.decision,
            "reason": self.reason,
            "would_lose_tokens": self.would_lose_tokens,
            "result_id": self.result_id,
            "applied": self.applied,
        }


def _keeper_order(m: Memory) -> tuple[float, float, str, str]:
    # Highest confidence x total surface events, then confidence, then the earliest ingestion.
    return (
        -(m.confidence * (m.retrieval_count + m.surfaced_count)),
        -m.confidence,
        m.ingestion_ts,
        m.id,
    )


def _comparable(rows: Sequence[db.Row], settings: Settings, vectors: Vectors) -> Any:
    """Unit vectors of the rows (a numpy array, None where a row has none) when the store's
    profile is a real model; None when only tokens can be compared."""
    if vectors.semantic() is None:
        return None
    import numpy as np

    model = PROFILE_MODELS[settings.embed_profile]
    dim = PROFILE_DIMS[settings.embed_profile]
    matrix = np.zeros((len(rows), dim), dtype=np.float32)
    present = np.zeros(len(rows), dtype=bool)
    for i, r in enumerate(rows):
        if r.embedding is not None and r.memory.embedding_model == model:
            if len(r.embedding) == dim * 4:
                matrix[i] = np.frombuffer(r.embedding, dtype=np.float32)
                present[i] = True
    return matrix, present


def _similar_pairs(
    toks: Sequence[frozenset[str]], threshold: float, embedded: Any
) -> dict[int, dict[int, float]]:
    """{i: {j: similarity}} for every pair of rows (their similarity tokens `toks`) at or
    above `threshold`: token Jaccard by
    prefix filtering (two sets with Jaccard >= t share one of their p rarest tokens), plus the
    cosine of their vectors, in blocks of one matrix product."""
    out: dict[int, dict[int, float]] = defaultdict(dict)
    df: dict[str, int] = defaultdict(int)
    for t in toks:
        for w in t:
            df[w] += 1
    index: dict[str, list[int]] = defaultdict(list)
    for i, t in enumerate(toks):
        if not t:
            continue
        ordered = sorted(t, key=lambda w: (df[w], w))
        p = len(ordered) - int(threshold * len(ordered) - 1e-9) + 1  # |A| - ceil(t|A|) + 1
        seen: set[int] = set()
        for w in ordered[:p]:
            for j in index[w]:
                if j in seen:
                    continue
                seen.add(j)
                inter = len(t & toks[j])
                sim = inter / (len(t) + len(toks[j]) - inter)
                if sim >= threshold:
                    out[i][j] = out[j][i] = sim
            index[w].append(i)
    if embedded is not None:
        import numpy as np

        matrix, present = embedded
        idx = np.flatnonzero(present)
        sub = matrix[idx]
        for start in range(0, len(idx), 512):
            block = sub[start : start + 512] @ sub.T
            rr, cc = np.nonzero(block >= threshold)
            for a, b in zip(rr.tolist(), cc.tolist(), strict=True):
                i, j = int(idx[start + a]), int(idx[b])
                if i != j:
                    sim = float(block[a, b])
                    if sim > out[i].get(j, 0.0):
                        out[i][j] = sim
    return out


def plan_clusters(
    rows: Sequence[db.Row],
    settings: Settings,
    vectors: Vectors,
    threshold: float,
    contradicting: set[frozenset[str]],
    nli: Judge | None,
    merge_contested: bool,
    asked: Mapping[frozenset[str], str | None] | None = None,
) -> list[Cluster]:
    """Clusters of `rows` (one namespace and type at a time): in keeper order, each row not yet
    taken gathers the untaken rows similar to it with the same numbers; the gatherer is the
    keeper, since any better-ranked row similar to it would have gathered it first. A member
    merges only where the write path's judge would fold it into the keeper (or the pair was
    answered `same`); a pair the judge cannot decide stays live as a question. `asked` holds
    the pairs already asked, with their answer (None while pending): never asked twice, and
    one answered otherwise never merges."""
    asked = asked or {}
    groups: dict[tuple[str, str], list[db.Row]] = defaultdict(list)
    for r in rows:
        groups[(r.memory.namespace, r.memory.type)].append(r)
    clusters: list[Cluster] = []
    for (namespace, type_), group in sorted(groups.items()):
        group.sort(key=lambda r: _keeper_order(r.memory))
        toks = [frozenset(r.norm.split()) for r in group]
        embedded = _comparable(group, settings, vectors)
        pairs = _similar_pairs(toks, threshold, embedded)
        # A row's numbers and the units it states them in, read once per row.
        numbers = [
            (number_tokens(frozenset(words(r.memory.content))), number_units(r.memory.content))
            for r in group
        ]
        taken: set[int] = set()
        for i, r in enumerate(group):
            if i in taken:
                continue
            near = sorted(
                (j for j, _ in pairs.get(i, {}).items() if j not in taken and j != i),
                key=lambda j: (-pairs[i][j], j),
            )
            # The number guard: a changed number, or a number in another unit, is a different
            # fact, never a duplicate.
            near = [j for j in near if numbers[j] == numbers[i]]
            # The judge runs on these candidates only, never on every pair of the group.
            fates = {j: _fate(r, group[j], jaccard(toks[i], toks[j]), _cosine(embedded, i, j),
                              asked, contradicting) for j in near}  # fmt: skip
            merging = [j for j in near if fates[j].merges]
            waiting = [j for j in near if fates[j].waits]
            if not merging and not waiting:
                continue
            cluster = Cluster(
                namespace, type_, r.memory.id,
                [Member(r.memory.id, 1.0, "keeper")]
                + [Member(group[j].memory.id, pairs[i][j]) for j in merging],
            )  # fmt: skip
            members = [r.memory] + [group[j].memory for j in merging]
            _guard(cluster, members, contradicting, nli, merge_contested)
            _compose(cluster, members)
            # A contested member the guard parks is asked about when the judge could not
            # decide the pair either (a prohibition one of them adds); a decided contradiction
            # is parked without a question.
            for j, m in zip(merging, cluster.members[1:], strict=True):
                if m.action == "parked" and fates[j].ask is not None:
                    cluster.asks.append(fates[j].ask)
            cluster.members += [Member(group[j].memory.id, pairs[i][j], "asked") for j in waiting]
            cluster.asks += [fates[j].ask for j in waiting if fates[j].ask is not None]
            if waiting and cluster.reason is None:
                cluster.reason = (
                    f"{len(waiting)} member(s) asked: the write path's judge cannot decide them"
                )
            if not cluster.absorbing:
                parked = any(m.action == "parked" for m in cluster.members)
                cluster.decision = "parked" if parked else "asked"
            clusters.append(cluster)
            # A parked or asked member stays free: it may still merge with rows that agree with
            # it (a polarity variant that won the keeper rule would otherwise strand its
            # opposites).
            taken.add(i)
            taken.update(j for j, m in zip(merging + waiting, cluster.members[1:], strict=True)
                         if m.action not in STAY_LIVE)  # fmt: skip
    return clusters


@dataclass(frozen=True)
class _Fate:
    merges: bool  # a member of the merge (the contested guard may still park it)
    waits: bool = False  # stays live as a question: queued now (`ask`) or already waiting
    ask: Ask | None = None


def _cosine(embedded: Any, i: int, j: int) -> float | None:
    """The model's cosine of two rows, as the write path's vector lane reads it; None without
    a model or a vector."""
    if embedded is None:
        return None
    matrix, present = embedded
    return float(matrix[i] @ matrix[j]) if present[i] and present[j] else None


def _fate(
    keeper: db.Row,
    row: db.Row,
    jac: float,
    cos: float | None,
    asked: Mapping[frozenset[str], str | None],
    contradicting: set[frozenset[str]],
) -> _Fate:
    """What `row` is to its keeper. The write path's judge decides, on the evidence a write of
    the later row would have had: only a fold merges, what it cannot decide is asked. A pair
    asked before follows its answer (None: still waiting). The one exception is a pair whose
    only obstacle is the stance: it goes to the contested guard, which parks it unless the
    NLI judge or --merge-contested clears it, as before the judge."""
    pair = frozenset((keeper.memory.id, row.memory.id))
    if pair in asked:
        answer = asked[pair]
        return _Fate(answer == "same", answer is None)
    old, new = sorted((keeper, row), key=lambda x: (x.memory.ingestion_ts, x.memory.id))
    e = judge.evidence(old.memory.content, new.memory.content, jac, cos)
    verdict = judge.judge(e)
    if verdict.decision == judge.FOLD:
        return _Fate(True)
    # A pair linked contradicts is a disagreement someone recorded: nothing to ask about.
    ask = None
    if verdict.decision == judge.ASK and pair not in contradicting:
        ask = Ask(new, _neighbour(old, e), verdict)
    if (
        stance.opposed_for_merging(keeper.memory.content, row.memory.content)
        and judge.judge(replace(e, relation=stance.SAME)).decision == judge.FOLD
    ):
        return _Fate(True, False, ask)
    return _Fate(False, ask is not None, ask)


def _neighbour(old: db.Row, e: judge.Evidence) -> writer.Neighbour:
    """`old` as the write path's neighbour of the later row (what ask_about records)."""
    m = old.memory
    candidate = memories.Candidate(
        m.id, m.content, old.norm, m.tags, m.taint, m.confidence, m.signal, m.trust_score
    )
    return writer.Neighbour(
        candidate,
        max(e.jaccard, e.cosine or 0.0),
        e.relation != stance.OPPOSITE,
        not e.changed and not e.one_sided,
        e.relation == stance.APART,
        e.jaccard,
        e.cosine,
    )


def _guard(
    cluster: Cluster,
    members: Sequence[Memory],
    contradicting: set[frozenset[str]],
    nli: Judge | None,
    merge_contested: bool,
) -> None:
    """The contested guard. A pair of members is flagged when their stances are opposite
    (capture.stance, as the write path decides its `contradicts` links) or when they are kept
    apart with different negations (stance.opposed_for_merging), and held when they
    carry a contradicts link without that (a disagreement recorded by someone, which no word
    list explains).
    The NLI judge clears the cluster only with entailment on EVERY flagged pair and no held one;
    --merge-contested clears it outright. Otherwise each member that disagrees with the keeper,
    or is linked contradicts to a member being merged, is parked and stays live; the members
    that agree still merge."""
    ids = [m.id for m in members]
    pairs = [(a, b) for a in range(len(ids)) for b in range(a + 1, len(ids))]
    opposite = {
        (a, b) for a, b in pairs
        if stance.opposed_for_merging(members[a].content, members[b].content)
    }  # fmt: skip
    flagged = [p for p in pairs if p in opposite]
    held = [
        (a, b) for a, b in pairs
        if (a, b) not in opposite and frozenset((ids[a], ids[b])) in contradicting
    ]  # fmt: skip
    if not flagged and not held:
        return
    if merge_contested:
        cluster.reason = "contested; merged by --merge-contested"
        return
    verdict = None
    if nli is not None and flagged and not held:
        verdicts = [
            nli.verdict(first_sentence(members[a].content), first_sentence(members[b].content))
            for a, b in flagged
        ]
        if all(v == "entailment" for v in verdicts):
            cluster.reason = "contested; the NLI judge found entailment on every flagged pair"
            return
        verdict = next(v for v in verdicts if v != "entailment")
    merging = {0}
    for k in range(1, len(ids)):
        clash = (0, k) in opposite or any(
            frozenset((ids[k], ids[j])) in contradicting for j in merging
        )
        if clash:
            cluster.members[k].action = "parked"
        else:
            merging.add(k)
    why = "contested: members state opposite things or carry a contradicts link"
    if verdict is not None:
        why += f" (NLI judge: {verdict})"
    cluster.reason = why
    if len(merging) == 1:
        cluster.decision = "parked"


def _compose(cluster: Cluster, members: Sequence[Memory]) -> None:
    """The keeper's merged text: each absorbed row's whole text appended unless the text so far
    already holds it word for word; past the size cap an absorb is recorded as truncated."""
    content = members[0].content
    for member, row in zip(cluster.members[1:], members[1:], strict=True):
        if member.action == "parked":
            continue
        if _phrase(row.content) in _phrase(content):
            member.action = "subsumed"
        elif len(content) + 1 + len(row.content) > MAX_CONTENT_CHARS:
            member.action = "truncated"
            cluster.would_lose_tokens += estimate_tokens(row.content)
        else:
            content = content + "\n" + row.content
    cluster.content = content
