"""Change-intent lineage unfold (explicit recall only): when a presented hit is the live head of
an update chain, its predecessors join as [PREVIOUSLY] rows, bounded by ZMEM_UNFOLD_TOP_K heads,
ZMEM_UNFOLD_MAX_HOPS per chain and ZMEM_UNFOLD_BUDGET in total. A chain never leaves the head's
namespace set; taint never hides a predecessor (the explicit render prefixes it instead)."""

from __future__ import annotations

from collections.abc import Sequence

from zmem.db import recall as db
from zmem.models import Hit
from zmem.retrieval.request import Tier
from zmem.retrieval.scoring import ScoringContext


def unfold(ctx: ScoringContext, hits: Sequence[Hit], tiers: Sequence[Tier]) -> list[Hit]:
    settings = ctx.settings
    spaces = {t.name: t.scope.namespaces for t in tiers}
    present = {h.id for h in hits}
    extras: list[Hit] = []
    heads = [h for h in hits if not h.extra][: settings.unfold_top_k]
    for head in heads:
        if not head.memory.live or head.memory.update_of is None:
            continue
        allowed = spaces.get(head.tier)
        current = head.memory
        for hop in range(1, settings.unfold_max_hops + 1):
            if len(extras) >= settings.unfold_budget or current.update_of is None:
                break
            previous = db.by_id(ctx.conn, current.update_of)
            if previous is None or (allowed is not None and previous.namespace not in allowed):
                break
            if previous.id not in present:
                present.add(previous.id)
                extras.append(
                    ctx.unmatched_hit(previous, head.tier, unfold_of=head.id, unfold_hop=hop)
                )
            current = previous
    return extras
