"""The team hub's check (issue 32): whether this data dir shares namespaces with a hub, which,
as which role, when it last pushed and pulled, and the last error, read from what the last sync
recorded. Doctor never reaches the network: `zmem sync --status` asks the hub itself."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from zmem import config
from zmem.doctor.base import NA, OK, WARN, check
from zmem.errors import ZMemError


def hub(settings: config.Settings) -> dict[str, Any]:
    from zmem.sync import hub_local as team

    try:
        cfg = team.load_config(settings.data_dir)
    except ZMemError as exc:
        return check("hub", WARN, str(exc))
    if cfg is None:
        return check("hub", NA, "this data dir shares nothing with a team hub", joined=False)
    rec = team.recorded(settings.data_dir)
    st = rec.status
    try:
        where = team.hubdb.describe(cfg.url)
    except ZMemError as exc:  # a hub.json edited by hand: the check says so, nothing fails
        return check("hub", WARN, f"the hub record names no usable hub ({exc}); `zmem hub leave`")
    quarantined = rec.quarantine_counts.get("pull", 0)
    refused = rec.quarantine_counts.get("push", 0)
    extra = {
        "joined": True, "hub": where, "role": cfg.role, "machine": cfg.machine,
        "namespaces": cfg.namespaces, "last_push": st.get("last_push"),
        "last_pull": st.get("last_pull"), "last_error": st.get("last_error"),
        "writers": [list(w) for w in rec.writers], "quarantined": quarantined,
        "refused": refused, "quarantine": rec.quarantine,
    }  # fmt: skip
    shared = f"{', '.join(cfg.namespaces)} with {where} as {cfg.role}"
    if Path(settings.store_path).resolve() != Path(cfg.store).resolve():
        return check("hub", WARN, f"joined for the store {cfg.store}, not this one", **extra)
    if quarantined or refused:
        return check(
            "hub", WARN,
            f"sharing {shared}; {quarantined} object(s) from the hub quarantined and "
            f"{refused} of this store's refused by it (`zmem sync --status` lists them)",
            **extra,
        )  # fmt: skip
    if st.get("last_error"):
        return check(
            "hub", WARN, f"sharing {shared}; the last sync failed: {st['last_error']}", **extra
        )
    if not st.get("last_pull"):
        return check("hub", WARN, f"sharing {shared}; never synced: run `zmem sync`", **extra)
    return check("hub", OK, f"sharing {shared}; last pull {st['last_pull']}", **extra)
