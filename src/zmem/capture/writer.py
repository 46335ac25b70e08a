"""The write path inside one transaction: each near neighbour judged (capture.judge: fold,
contradiction, apart, or a question recorded for the agent), link generation to neighbours
above the link threshold, trust events, and entity links. Candidates come from FTS by prefix
filtering and the vector index's nearest rows, never a scan."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import apsw

from zmem.capture import judge, stance
from zmem.capture.entities import EntityMention, extract_entities
from zmem.capture.injection import is_injection_risk
from zmem.capture.policy import Prepared, merge_tags
from zmem.db import graph, memories, reviews, vectors
from zmem.models import (
    INJECTION_TAG,
    SYSTEM_TAGS,
    TRUST_CONTRADICTION_DELTA,
    TRUST_CORROBORATION_DELTA,
    WriteResult,
    clamp_trust,
    worst_taint,
)
from zmem.tokens import (
    flag_tokens,
    jaccard,
    number_tokens,
    number_units,
    similarity_norm,
    words,
)

# Jaccard on similarity tokens above which two rows say the same thing. Deliberately well above
# the link threshold: a false merge loses a memory, a missed merge only costs a duplicate.
DEDUP_THRESHOLD = 0.85
LINKS_PER_WRITE = 8
# Questions one write may return (issue 50: at most two, the closest first).
REVIEWS_PER_WRITE = 2
LINK_SCAN_BUDGET = 64
MIN_MATCH = 2

# (vector bytes, model marker) computed before the write lock is taken.
Vector = tuple[bytes, str] | None


def _uuid4() -> object:
    # Imported on the first write, not with the module: uuid imports platform (~2.8 ms), and
    # the cold prompt hook imports this module without ever writing a row.
    import uuid

    return uuid.uuid4()


@dataclass(frozen=True)
class Neighbour:
    candidate: memories.Candidate
    similarity: float
    same_polarity: bool  # not opposite stances (capture.stance)
    same_anchors: bool  # the same numbers, units and flags: a change is another fact
    apart: bool = False  # the same sentence about another scope, number or unit
    jaccard: float = 0.0  # similarity-token Jaccard, whichever lane found the row
    cosine: float | None = None  # the model's cosine, when the vector lane found it


@dataclass(frozen=True)
class Prefix:
    """Candidate terms and how many of them a candidate must hold."""

    terms: list[str]
    min_match: int
    postings: int  # upper bound on the rows the query can touch
    stats: dict[str, memories.TermStat] = field(default_factory=dict)
    # Every dedup term of the text whose posting list is dropped: the insert need not send it.
    saturated: frozenset[str] = frozenset()


def prefix_terms(stats: dict[str, memories.TermStat], threshold: float) -> Prefix:
    """Prefix filtering. A row with Jaccard >= t against A misses at most m = floor((1 - t)|A|)
    of A's tokens, so among *any* m + c of them it holds at least c. Taking the m + c rarest
    terms that still have posting lists keeps the lists short; c = 2 turns "any of them" into
    "two of them", which cut candidate rows from ~50 to ~0 per write at 100k rows. A term no
    row holds cannot be held by a candidate either: it is dropped, and when too few seen terms
    remain no row can reach the threshold at all. Only when A holds at most m listed terms
    (nearly every word is common) does the query fall back to the text index."""
    slack = math.floor((1.0 - threshold) * len(stats) + 1e-9)

    def rarest(terms: list[str], k: int) -> list[str]:
        return sorted(terms, key=lambda t: (stats[t].df, t))[:k]

    listed = rarest([t for t, st in stats.items() if st.listed], slack + MIN_MATCH)
    need = len(listed) - slack  # fewer when A is short: a candidate holds all but slack
    if need < 1:
        listed = rarest(list(stats), slack + MIN_MATCH)
        need = len(listed) - slack
    seen = [t for t in listed if stats[t].df > 0]
    if len(seen) < need:
        return Prefix([], 1, 0)
    return Prefix(seen, need, sum(stats[t].df for t in seen), {t: stats[t] for t in seen})


def candidate_terms(
    conn: apsw.Connection, namespace: str, tokens: frozenset[str], link_threshold: float
) -> Prefix:
    """The candidate query for a write. Dedup is always exact. Links come from the same
    candidate set (the spec's "neighbors dedup already computed"): exact for the link threshold
    while its posting lists hold at most LINK_SCAN_BUDGET rows, else only neighbours that share
    rarer terms. On a dense 30k-row store the exact link prefix cost 3.5x the candidate rows
    (bench/write_path.py)."""
    if not tokens:
        return Prefix([], 1, 0)
    stats = memories.term_stats(conn, memories.dedup_terms(namespace, sorted(tokens)))
    prefix = prefix_terms(stats, min(link_threshold, DEDUP_THRESHOLD))
    if prefix.postings > LINK_SCAN_BUDGET:
        prefix = prefix_terms(stats, DEDUP_THRESHOLD)
    saturated = frozenset(t for t, st in stats.items() if not st.listed)
    return replace(prefix, saturated=saturated) if saturated else prefix


@dataclass(frozen=True)
class Semantic:
    """Cosine thresholds of a real embedding profile: at `dedup` two texts say the same thing
    (the polarity and number guards still apply), at `link` they are related."""

    dedup: float
    link: float


def find_neighbours(
    conn: apsw.Connection,
    content: str,
    norm: str,
    namespace: str,
    threshold: float,
    exclude: Sequence[str] = (),
    vector: Vector = None,
    semantic: Semantic | None = None,
    link_threshold: float = 0.75,
    review_cosine: float | None = None,
) -> tuple[list[Neighbour], frozenset[str]]:
    """Live rows of the namespace with similarity >= threshold, best first. Similarity is token
    Jaccard, or, when the store embeds with a real model, the cosine of the two vectors put on
    the same scale (cosine >= semantic.dedup counts as a dedup-level match, >= semantic.link
    as a link-level one), whichever says more. With `review_cosine`, a row the vector lane
    finds at least that close comes too, below every link level (similarity 0): the judge may
    ask about it. Also returns the text's saturated dedup terms (Prefix.saturated), read in the
    caller's transaction."""
    tokens = frozenset(norm.split())
    if not tokens:
        return _same_words(conn, content, namespace, exclude), frozenset()
    scored: dict[str, float] = {}
    cosines: dict[str, float] = {}
    prefix = candidate_terms(conn, namespace, tokens, threshold)
    if prefix.terms:
        for other_id, other_norm in memories.similar_norms(
            conn, prefix.stats, namespace, exclude, prefix.min_match
        ):
            sim = jaccard(tokens, frozenset(other_norm.split()))
            if sim >= threshold:
                scored[other_id] = sim
    if vector is not None and semantic is not None:
        for other_id, cos in vectors.nearest_ids(
            conn, vector[0], namespace, LINKS_PER_WRITE, exclude
        ):
            cosines[other_id] = cos
            if review_cosine is not None and cos >= review_cosine:
                scored.setdefault(other_id, 0.0)
            # A link-level match must stay below the dedup level whatever the operator set
            # ZMEM_LINK_THRESHOLD to: related is not the same.
            link_level = min(link_threshold, DEDUP_THRESHOLD - 1e-6)
            level = (
                DEDUP_THRESHOLD if cos >= semantic.dedup
                else link_level if cos >= semantic.link
                else 0.0
            )  # fmt: skip
            if level >= threshold and level > scored.get(other_id, 0.0):
                scored[other_id] = level
    if not scored:
        return [], prefix.saturated
    # The anchors a fold must keep: numbers, the units they are stated in, command-line flags.
    mine = (number_tokens(tokens), number_units(content), flag_tokens(content))
    found = []
    for cand in memories.candidates(conn, list(scored)):
        relation = stance.relation(cand.content, content)
        theirs = frozenset(cand.content_norm.split())
        found.append(
            Neighbour(
                cand,
                scored[cand.id],
                relation != stance.OPPOSITE,
                (number_tokens(theirs), number_units(cand.content), flag_tokens(cand.content))
                == mine,
                relation == stance.APART,
                jaccard(tokens, theirs),
                cosines.get(cand.id),
            )
        )
    found.sort(key=lambda n: (-n.similarity, n.candidate.id))
    return found, prefix.saturated


def _same_words(
    conn: apsw.Connection, content: str, namespace: str, exclude: Sequence[str]
) -> list[Neighbour]:
    """Text made only of stop words ("it is what it is") has nothing to compare by similarity;
    it dedups against rows with exactly the same words, found as an FTS phrase."""
    mine = words(content)
    ids = memories.phrase_ids(conn, mine, namespace, exclude)
    return [
        Neighbour(cand, 1.0, True, True, jaccard=1.0)
        for cand in memories.candidates(conn, ids)
        if words(cand.content) == mine
    ]


def link_entities(
    conn: apsw.Connection, memory_id: str, content: str, tags: Sequence[str], at: str
) -> None:
    """Link the memory to the entities its text and tags mention (link_entities_many)."""
    link_entities_many(conn, [(memory_id, extract_entities(content, tags))], at)


def link_entities_many(
    conn: apsw.Connection, items: Sequence[tuple[str, Sequence[EntityMention]]], at: str
) -> None:
    """For each (memory id, its mentions), in order: resolve each mention to an entity (its
    first alias that exists wins, else a new entity), give the entity the mention's missing
    aliases, and link the memory to it. The existing aliases of every mention are read in one
    statement and the resolution is replayed in Python, mention by mention, exactly as a
    lookup-then-insert per mention would see it (a later mention, in this memory or a later
    one, may resolve through an alias an earlier one just added); the new entities, aliases
    and links are then written in one batch each. Bulk ingest passes a batch of rows whose
    mentions its workers extracted; an add passes one."""
    if not any(mentions for _, mentions in items):
        return
    aliases = list({a: None for _, mentions in items for m in mentions for a in m.aliases})
    owner = graph.alias_owners(conn, aliases)
    new_entities: list[tuple[str, str, str, str]] = []
    new_aliases: list[tuple[str, str]] = []
    links: list[tuple[str, str]] = []
    for memory_id, mentions in items:
        for mention in mentions:
            entity_id = next((owner[a] for a in mention.aliases if a in owner), None)
            if entity_id is None:
                entity_id = str(_uuid4())
                new_entities.append((entity_id, mention.kind, mention.name, at))
            for alias in mention.aliases:
                if alias not in owner:  # ON CONFLICT DO NOTHING: an owned alias stays its owner's
                    owner[alias] = entity_id
                    new_aliases.append((alias, entity_id))
            links.append((memory_id, entity_id))
    graph.insert_entities(conn, new_entities)
    graph.insert_aliases(conn, new_aliases)
    graph.link_pairs(conn, links)


def contradict(conn: apsw.Connection, a: str, b: str, at: str, score: float | None = None) -> bool:
    """Insert a contradicts pair (both directions) and apply the trust event once."""
    new = graph.insert_link(conn, a, b, "contradicts", score, at)
    new = graph.insert_link(conn, b, a, "contradicts", score, at) or new
    if new:
        memories.add_trust(conn, a, TRUST_CONTRADICTION_DELTA)
        memories.add_trust(conn, b, TRUST_CONTRADICTION_DELTA)
    return new


def _refresh_twin(conn: apsw.Connection, twin: memories.Candidate, row: Prepared, at: str) -> None:
    corroborate(conn, twin, row.tags, row.taint, row.confidence, row.signal, at)


def corroborate(
    conn: apsw.Connection,
    twin: memories.Candidate,
    tags: Sequence[str],
    taint: str,
    confidence: float,
    signal: str,
    at: str,
) -> None:
    """The dedup refresh: the twin takes the other's tags and worse taint, the higher of the
    two confidences (with its signal), and the corroboration's trust."""
    better = confidence > twin.confidence
    merged = merge_tags(twin.tags, tags)
    memories.refresh(
        conn,
        twin.id,
        tags=merged,
        taint=worst_taint(twin.taint, taint),
        confidence=confidence if better else twin.confidence,
        signal=signal if better else twin.signal,
        trust_score=clamp_trust(twin.trust_score + TRUST_CORROBORATION_DELTA),
        at=at,
    )
    if merged != twin.tags:
        # New tags can name new entities (entity:X); the twin's links follow, as a link
        # neighbour's do when it absorbs tags.
        graph.unlink_memory_entities(conn, twin.id)
        link_entities(conn, twin.id, twin.content, merged, at)


def _absorb_tags(
    conn: apsw.Connection, neighbour: memories.Candidate, tags: Sequence[str], at: str
) -> None:
    extra = [t for t in tags if t not in SYSTEM_TAGS]
    merged = merge_tags(neighbour.tags, extra)
    if merged == neighbour.tags:
        return
    memories.set_tags(conn, neighbour.id, merged)
    graph.unlink_memory_entities(conn, neighbour.id)
    link_entities(conn, neighbour.id, neighbour.content, merged, at)


def judge_neighbours(
    content: str, neighbours: Sequence[Neighbour]
) -> list[tuple[Neighbour, judge.Verdict]]:
    """The judge's verdict on each neighbour of `content` (capture.judge)."""
    return [
        (n, judge.judge(judge.evidence(n.candidate.content, content, n.jaccard, n.cosine)))
        for n in neighbours
    ]


def link_neighbours(
    conn: apsw.Connection,
    memory_id: str,
    tags: Sequence[str],
    judged: Sequence[tuple[Neighbour, judge.Verdict]],
    at: str,
    link_threshold: float,
) -> tuple[list[str], list[str]]:
    """The write-time linker: a contradicts pair where the judge decided one, related edges
    (both directions) to the best other neighbours at the link level; a related neighbour
    absorbs the row's tags. A pair the judge asks about that may contradict gets no edge until
    it is answered.
    Returns (related ids, contested ids). Also organize's link backfill for older rows."""
    related: list[str] = []
    contested: list[str] = []
    for n, verdict in judged:
        if len(related) + len(contested) >= LINKS_PER_WRITE:
            break
        score = round(n.similarity if n.similarity else (n.cosine or n.jaccard), 4)
        if verdict.decision == judge.CONTRADICT:
            contradict(conn, memory_id, n.candidate.id, at, score)
            contested.append(n.candidate.id)
            continue
        if verdict.decision == judge.ASK and verdict.likely == "contradicts":
            continue  # neither related nor contradicting until someone answers
        # Dedup-window pairs always get an edge, even when the operator set the link
        # threshold above the dedup threshold.
        if n.similarity < link_threshold and n.similarity < DEDUP_THRESHOLD:
            continue
        graph.insert_link(conn, memory_id, n.candidate.id, "related", score, at)
        graph.insert_link(conn, n.candidate.id, memory_id, "related", score, at)
        _absorb_tags(conn, n.candidate, tags, at)
        related.append(n.candidate.id)
    return related, contested


def to_ask(
    conn: apsw.Connection, memory_id: str, judged: Sequence[tuple[Neighbour, judge.Verdict]]
) -> list[tuple[Neighbour, judge.Verdict]]:
    """The questions ask_about would record about `memory_id`, the closest first; reads only
    (a consolidate --dry-run counts them)."""
    asked = [(n, v) for n, v in judged if v.decision == judge.ASK]
    if not asked:
        return []
    known = reviews.answered_pairs(conn, memory_id, [n.candidate.id for n, _ in asked])
    asked = [(n, v) for n, v in asked if n.candidate.id not in known]
    asked.sort(key=lambda nv: (-(nv[0].cosine or nv[0].jaccard), nv[0].candidate.id))
    return asked[:REVIEWS_PER_WRITE]


def ask_about(
    conn: apsw.Connection,
    memory_id: str,
    namespace: str,
    judged: Sequence[tuple[Neighbour, judge.Verdict]],
    at: str,
    origin: str,
) -> tuple[dict[str, Any], ...]:
    """Record the judge's questions about `memory_id` (at most REVIEWS_PER_WRITE, the closest
    first), skipping pairs already asked or answered; returns them as the write reports
    them."""
    out = []
    for n, verdict in to_ask(conn, memory_id, judged):
        assert verdict.evidence is not None  # an ASK carries what it asks about
        e = verdict.evidence.to_dict()
        reviews.ask(conn, memory_id, n.candidate.id, namespace, verdict.likely, e, origin, at)
        c = n.candidate
        # The passive surfaces' rule: a row that may carry an injected instruction, or came
        # from the web, is not put in front of the agent by a write it did not ask for.
        risky = INJECTION_TAG in c.tags or is_injection_risk(c.content)
        text = None if c.taint == "untrusted_web" or risky else c.content
        out.append(judge.question(memory_id, c.id, text, verdict, e))
    return tuple(out)


def new_memory(
    row: Prepared, new_id: str, norm: str, at: str, vector: Vector, update_of: str | None
) -> memories.NewMemory:
    """The row to insert for a prepared write (also organize's summaries, which skip dedup)."""
    return memories.NewMemory(
        id=new_id,
        content=row.content,
        content_norm=norm,
        type=row.type,
        tags=row.tags,
        namespace=row.namespace,
        signal=row.signal,
        confidence=row.confidence,
        taint=row.taint,
        source_ref=row.source_ref,
        source_hash=row.source_hash,
        created_at=at,
        update_of=update_of,
        embedding=vector[0] if vector else None,
        embedding_model=vector[1] if vector else None,
    )


def write(
    conn: apsw.Connection,
    row: Prepared,
    *,
    at: str,
    link_threshold: float,
    vector: Vector = None,
    update_of: str | None = None,
    exclude: Sequence[str] = (),
    semantic: Semantic | None = None,
    origin: str = "write",
) -> WriteResult:
    """Store `row` (or fold it into a twin the judge is sure of); what the judge cannot decide
    is stored as written and asked about (the result's reviews). `origin` says who will see
    the questions: "write" (the caller returns them) or "queue" (no one is there to ask).
    Must run inside a transaction."""
    threshold = min(link_threshold, DEDUP_THRESHOLD)
    norm = similarity_norm(row.content)
    neighbours, saturated = find_neighbours(
        conn, row.content, norm, row.namespace, threshold, exclude, vector, semantic,
        link_threshold, judge.ASK_COSINE,
    )  # fmt: skip
    judged = judge_neighbours(row.content, neighbours)
    twins = [n for n, v in judged if v.decision == judge.FOLD]
    if twins:
        twin = max(twins, key=lambda n: (n.jaccard, n.similarity)).candidate
        _refresh_twin(conn, twin, row, at)
        if update_of is not None:
            graph.insert_link(conn, twin.id, update_of, "updates", None, at)
        return WriteResult(twin.id, "deduped", False, row.warnings, replaced=update_of)

    new_id = str(_uuid4())
    memories.insert(conn, new_memory(row, new_id, norm, at, vector, update_of), saturated=saturated)
    if update_of is not None:
        graph.insert_link(conn, new_id, update_of, "updates", None, at)

    related, contested = link_neighbours(conn, new_id, row.tags, judged, at, link_threshold)
    link_entities(conn, new_id, row.content, row.tags, at)
    asked = ask_about(conn, new_id, row.namespace, judged, at, origin)
    return WriteResult(
        new_id, "stored", True, row.warnings, tuple(related), tuple(contested),
        replaced=update_of, reviews=asked,
    )  # fmt: skip
