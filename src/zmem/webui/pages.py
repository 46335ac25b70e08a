"""The inspector's read-only pages (GET): overview, the memory browser, search with the explain
verdicts, one memory with its lineage and as-of view, entities, the correction queue, and
health. Each gathers through the store (no telemetry: a person looking is not an agent
recalling) and hands plain values to its template."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from zmem import config
from zmem.capture.judge import ANSWERS
from zmem.errors import UsageError
from zmem.hosts import sidecars
from zmem.models import GLOBAL_NAMESPACE, LINK_RELATIONS, MEMORY_TYPES, TAINTS, Memory
from zmem.retrieval.explain import Verdict
from zmem.retrieval.request import RecallRequest
from zmem.webui import charts
from zmem.webui.app import Inspector

PAGE_ROWS = 50
ENTITY_ROWS = 200
SEARCH_MODES = ("explicit", "passive")
DRY_RUNS = ("consolidate", "organize", "sweep")


def _int(value: str | None, name: str, low: int, high: int) -> int | None:
    if value in (None, ""):
        return None
    try:
        n = int(value)
    except ValueError:
        raise UsageError(f"{name} must be a whole number") from None
    if not low <= n <= high:
        raise UsageError(f"{name} must be between {low} and {high}")
    return n


async def overview(ui: Inspector, request: Request) -> Response:
    data = await ui.call(ui.store.overview)
    today = config.now().date()
    daily = data["daily"]
    return ui.render(
        request,
        "overview.html",
        data=data,
        growth=charts.growth(daily["added"], daily["retired"]),
        retrieved=charts.activity(daily["retrieved"], today),
        surfaced=charts.activity(daily["surfaced"], today),
    )


async def memories(ui: Inspector, request: Request) -> Response:
    q = request.query_params
    filters = {
        "namespace": q.get("namespace", ""),
        "type": q.get("type", ""),
        "taint": q.get("taint", ""),
        "tag": q.get("tag", ""),
        "state": q.get("state", "live"),
    }
    before = _int(q.get("before"), "before", 1, 2**62)
    if filters["state"] not in ("live", "all"):
        raise UsageError("state must be live or all")
    rows = await ui.call(
        ui.store.browse,
        namespace=filters["namespace"],
        type=filters["type"],
        taint=filters["taint"],
        tag=filters["tag"],
        include_superseded=filters["state"] == "all",
        before=before,
        limit=PAGE_ROWS,
    )
    more = {k: v for k, v in filters.items() if v}
    if len(rows) == PAGE_ROWS:
        more["before"] = str(rows[-1].rowid)
    return ui.render(
        request,
        "memories.html",
        rows=rows,
        filters=filters,
        next_query=more if "before" in more else None,
        types=MEMORY_TYPES,
        taints=TAINTS,
    )


def _search_request(q: Any) -> tuple[RecallRequest | None, dict[str, Any]]:
    form = {
        "q": q.get("q", ""),
        "mode": q.get("mode", "explicit"),
        "kind": q.get("kind", "recall"),
        "namespace": q.get("namespace", ""),
        "include_global": q.get("include_global") == "1",
        "as_of": q.get("as_of", ""),
        "limit": q.get("limit", ""),
        "target": q.get("target", ""),
    }
    if not form["q"].strip():
        return None, form
    if form["mode"] not in SEARCH_MODES:
        raise UsageError(f"mode must be one of: {', '.join(SEARCH_MODES)}")
    if form["kind"] not in ("recall", "search"):
        raise UsageError("kind must be recall or search")
    options: dict[str, Any] = {
        "kind": form["kind"],
        "namespace": form["namespace"].strip() or None,
        "include_global": form["include_global"],
        "as_of": form["as_of"].strip() or None,
        "limit": _int(form["limit"], "limit", 1, 100),
        "telemetry": False,
    }
    if form["mode"] == "passive":
        return RecallRequest.prefetch(form["q"], **options), form
    return RecallRequest.explicit(form["q"], **options), form


async def search(ui: Inspector, request: Request) -> Response:
    req, form = _search_request(request.query_params)
    if req is None:
        return ui.render(request, "search.html", form=form, report=None)
    target = form["target"].strip() or None
    report, verdicts, effective = await ui.call(ui.store.explain, req, target=target)
    shown = {h.id for h in report.hits}
    by_id: dict[str, Verdict] = {v.id: v for v in verdicts if v.id}
    others = [v for v in verdicts if v.id not in shown]
    rows = await ui.call(ui.store.rows, [v.id for v in others if v.id])
    return ui.render(
        request,
        "search.html",
        form=form,
        report=report,
        verdict_of=by_id,
        others=[(v, rows.get(v.id or "")) for v in others],
        effective=effective,
    )


def _stops(ui: Inspector, versions: list[Memory]) -> list[dict[str, str | None]]:
    """The instants the as-of slider stops at: each version's start, and the end of the last
    one if it was retired, each with the version valid there (None: nothing valid)."""
    starts = {v.valid_from for v in versions}
    ends = {v.valid_until for v in versions if v.valid_until}
    stops = []
    for at in sorted(starts | ends):
        valid = ui.store.version_at(versions, at)
        stops.append({"at": at, "id": valid.id if valid else None})
    return stops


async def memory(ui: Inspector, request: Request) -> Response:
    as_of = request.query_params.get("as_of", "").strip()
    described = await ui.call(ui.store.describe, request.path_params["memory_id"])
    versions = await ui.call(ui.store.lineage, described["id"])
    at_version = None
    if as_of:
        as_of = config.normalize_instant(as_of)
        at_version = ui.store.version_at(versions, as_of)
    others = [link["other"] for link in described["links"]]
    rows = await ui.call(ui.store.rows, others + list(described["merged_from"]))
    successor = {v.update_of: v.id for v in versions if v.update_of}
    stops = _stops(ui, versions)
    # The slider starts where the page is: at the as-of instant's stop, else at the last one.
    slider = len(stops) - 1
    if as_of:
        slider = max([i for i, s in enumerate(stops) if (s["at"] or "") <= as_of], default=0)
    return ui.render(
        request,
        "memory.html",
        m=described,
        versions=versions,
        successor=successor,
        stops=stops,
        slider=slider,
        as_of=as_of,
        at_version=at_version,
        linked=rows,
        relations=LINK_RELATIONS,
        error=None,
    )


async def entities(ui: Inspector, request: Request) -> Response:
    return await entity_page(ui, request, request.query_params.get("q", ""), None)


async def entity_page(ui: Inspector, request: Request, q: str, plan: Any) -> Response:
    """The entity list (most linked first, filtered by name or alias), with a merge plan to
    confirm when there is one."""
    needle = q.strip().lower()
    found = await ui.call(ui.store.entities)
    if needle:
        found = [
            e for e in found if needle in e.name.lower() or any(needle in a for a in e.aliases)
        ]
    found.sort(key=lambda e: (-e.links, e.name.lower()))
    return ui.render(
        request,
        "entities.html",
        entities=found[:ENTITY_ROWS],
        matched=len(found),
        q=needle,
        plan=plan,
    )


async def queue(ui: Inspector, request: Request) -> Response:
    queues = await ui.call(sidecars.all_queues, ui.settings.data_dir)
    return ui.render(request, "queue.html", queues=queues, types=MEMORY_TYPES)


async def reviews(ui: Inspector, request: Request) -> Response:
    pending = await ui.call(ui.store.reviews, None, 200)
    return ui.render(request, "reviews.html", reviews=pending, answers=ANSWERS)


def _dry_run(ui: Inspector, job: str) -> dict[str, Any]:
    """One maintenance job's dry run, as the lines its CLI prints and its JSON document."""
    from zmem.maintenance import consolidate, organize, sweep

    if job == "consolidate":
        report = ui.store.consolidate(dry_run=True, force=True).to_dict()
        return {"lines": [*consolidate.cluster_lines(report), consolidate.summary_line(report)]}
    if job == "organize":
        report = ui.store.organize(dry_run=True, force=True).to_dict()
        return {"lines": [organize.summary_line(report)]}
    result = sweep.sweep([ui.settings.data_dir], ui.settings.sentinel_sweep_days, dry_run=True)
    return {"lines": [result.summary_line()]}


def _health(ui: Inspector) -> dict[str, Any]:
    from zmem import doctor
    from zmem.maintenance import backup

    report = doctor.run(store_path=str(ui.settings.store_path))
    return {
        "doctor": report,
        "last_backup": backup.last_backup(ui.settings.data_dir),
        "stats": ui.store.totals(),
    }


async def health(ui: Inspector, request: Request) -> Response:
    job = request.query_params.get("dry_run", "")
    if job and job not in DRY_RUNS:
        raise UsageError(f"dry_run must be one of: {', '.join(DRY_RUNS)}")
    data = await ui.call(_health, ui)
    dry = await ui.call(_dry_run, ui, job) if job else None
    return ui.render(
        request,
        "health.html",
        data=data,
        job=job,
        dry=dry,
        jobs=DRY_RUNS,
        global_ns=GLOBAL_NAMESPACE,
    )
