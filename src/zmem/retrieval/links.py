"""1-hop link expansion: after the tiers are cut to their limits, each matched row's related,
supports and contradicts neighbours join the result, up to the link budget. Neighbours stay in
the tier's namespace set and the --as-of window; contradicts neighbours must clear the floor and
carry [CONTESTED LINK]. One indexed lookup per result row, nothing more (no graph walk)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import replace

from zmem.db import recall as db
from zmem.db.recall import Scope
from zmem.models import Hit, Memory
from zmem.retrieval.request import RecallRequest, Tier
from zmem.retrieval.scoring import ScoringContext

EXPAND_RELATIONS = ("related", "supports", "contradicts")


def expand(
    ctx: ScoringContext,
    hits: Sequence[Hit],
    tiers: Sequence[Tier],
    req: RecallRequest,
    floor: float,
) -> list[Hit]:
    scopes = {t.name: replace(t.scope, floor=0.0) for t in tiers}
    present = {h.id for h in hits}
    extras: list[Hit] = []
    for h in hits:
        if len(extras) >= req.link_budget:
            break
        for m, relation, score in _strongest(ctx, h.id, scopes[h.tier], req.link_budget, present):
            if m.id in present:
                continue
            if req.passive and ctx.passive_block(m) is not None:
                continue  # a passive surface never shows such a row, link or not
            contested = relation == "contradicts"
            if contested and ctx.effective(m)[0] < floor:
                continue
            present.add(m.id)
            extras.append(
                ctx.unmatched_hit(
                    m,
                    h.tier,
                    link_of=h.id,
                    link_relation=relation,
                    link_score=score,
                    contested_link=contested,
                )
            )
            if len(extras) >= req.link_budget:
                break
    return extras


def _strongest(
    ctx: ScoringContext, memory_id: str, scope: Scope, budget: int, present: set[str]
) -> Iterator[tuple[Memory, str, float | None]]:
    """db.neighbours in order, read a page at a time: expansion takes a couple of rows, and a
    row written among near-duplicates is linked to a hundred of them (~2 ms to build them
    all). The first page covers the rows expansion skips for being listed already (each
    neighbour comes once per link direction); a later page is four times the last."""
    page = 2 * (budget + len(present))
    done = 0
    while True:
        found = db.neighbours(ctx.conn, memory_id, EXPAND_RELATIONS, scope, page)
        yield from found[done:]
        if len(found) < page:
            return
        done, page = len(found), 4 * page
