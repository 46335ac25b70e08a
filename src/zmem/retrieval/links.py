"""1-hop link expansion: after the tiers are cut to their limits, each matched row's related,
supports and contradicts neighbours join the result, up to the link budget. Neighbours stay in
the tier's namespace set and the --as-of window; contradicts neighbours must clear the floor and
carry [CONTESTED LINK]. One indexed lookup per result row, nothing more (no graph walk)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from zmem.db import recall as db
from zmem.models import Hit
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
        for m, relation, score in db.neighbours(ctx.conn, h.id, EXPAND_RELATIONS, scopes[h.tier]):
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
