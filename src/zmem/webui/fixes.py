"""The inspector's writes (POST): update, invalidate, contradict, link and feedback on a
memory; entity merge in two steps (preview, then confirm); accept or drop a queued correction.
Every one checks the CSRF field, then calls the same MemoryStore method the CLI calls, so the
validation, the capture policy and the refusals are the CLI's; a refusal re-renders the page
with the one-line message and writes nothing. Success redirects (303) to a page that says so."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from zmem.errors import NotFound, UsageError
from zmem.hosts import sidecars
from zmem.models import FEEDBACK_VERDICTS, LINK_RELATIONS, MEMORY_TYPES
from zmem.webui import pages
from zmem.webui.app import Inspector

MEMORY_ACTIONS = ("update", "invalidate", "contradict", "link", "feedback")


def _required(fields: dict[str, str], name: str, label: str | None = None) -> str:
    value = fields.get(name, "").strip()
    if not value:
        raise UsageError(f"{label or name} is required")
    return value


def _apply(ui: Inspector, memory_id: str, action: str, fields: dict[str, str]) -> tuple[str, str]:
    """Run one fix; returns (the memory page to show next, the DONE key)."""
    store = ui.store
    if action == "update":
        content = fields.get("content", "")
        if not content.strip():
            raise UsageError("the new content is empty")
        result = store.update(memory_id, content)
        return result.id, "updated"
    if action == "invalidate":
        store.invalidate(memory_id, fields.get("reason"))
        return memory_id, "invalidated"
    if action == "contradict":
        other = _required(fields, "other", "the other memory's id")
        store.contradict(memory_id, other, fields.get("reason"))
        return memory_id, "contradicted"
    if action == "link":
        relation = fields.get("relation", "")
        if relation not in LINK_RELATIONS:
            raise UsageError(f"relation must be one of: {', '.join(LINK_RELATIONS)}")
        other = _required(fields, "other", "the other memory's id")
        store.add_link(memory_id, other, relation, reason=fields.get("reason") or None)
        return memory_id, "linked"
    verdict = fields.get("verdict", "")
    if verdict not in FEEDBACK_VERDICTS:
        raise UsageError(f"verdict must be one of: {', '.join(FEEDBACK_VERDICTS)}")
    store.feedback(memory_id, verdict)
    return memory_id, verdict


async def memory_fix(ui: Inspector, request: Request) -> Response:
    fields = await ui.form(request)
    if isinstance(fields, Response):
        return fields
    action = request.path_params["action"]
    if action not in MEMORY_ACTIONS:
        return ui.error(request, NotFound(f"no such action: {action}"))
    memory_id = await ui.call(ui.store.resolve_id, request.path_params["memory_id"])
    shown, done = await ui.call(_apply, ui, memory_id, action, fields)
    return ui.redirect(f"/memory/{shown}", done)


async def entity_merge(ui: Inspector, request: Request) -> Response:
    fields = await ui.form(request)
    if isinstance(fields, Response):
        return fields
    confirm = fields.get("confirm") == "1"
    source = _required(fields, "source", "the entity to merge")
    target = _required(fields, "target", "the entity to keep")
    plan = await ui.call(ui.store.merge_entities, source, target, confirm=confirm)
    if confirm:
        return ui.redirect("/entities", "merged")
    return await pages.entity_page(ui, request, "", plan)


def _accept(ui: Inspector, namespace: str, item_id: str, fields: dict[str, str]) -> dict[str, Any]:
    items = {i.get("id"): i for i in sidecars.queue_items(ui.settings.data_dir, namespace)}
    if item_id not in items:
        raise NotFound(f"no queued item {item_id} in {namespace}")
    type_ = fields.get("type", "")
    if type_ not in MEMORY_TYPES:
        raise UsageError(f"type must be one of: {', '.join(MEMORY_TYPES)}")
    content = fields.get("content", "").strip() or str(items[item_id].get("message", ""))
    # The spec's path for a reviewed correction: an add with signal user, through the policy.
    result = ui.store.add(content, namespace=namespace, type=type_, signal="user")
    sidecars.clear(ui.settings.data_dir, namespace, ids=(item_id,))
    return result.to_dict()


async def queue_fix(ui: Inspector, request: Request) -> Response:
    fields = await ui.form(request)
    if isinstance(fields, Response):
        return fields
    action = request.path_params["action"]
    namespace = _required(fields, "namespace")
    item_id = _required(fields, "id", "the queued item's id")
    if action == "accept":
        await ui.call(_accept, ui, namespace, item_id, fields)
        return ui.redirect("/queue", "accepted")
    if action == "drop":
        removed = await ui.call(sidecars.clear, ui.settings.data_dir, namespace, ids=(item_id,))
        if not removed:
            raise NotFound(f"no queued item {item_id} in {namespace}")
        return ui.redirect("/queue", "dropped")
    raise NotFound(f"no such action: {action}")


async def review_fix(ui: Inspector, request: Request) -> Response:
    """Answer one of the write-time judge's questions (`zmem resolve`)."""
    fields = await ui.form(request)
    if isinstance(fields, Response):
        return fields
    new_id = _required(fields, "new", "the new memory's id")
    old_id = _required(fields, "old", "the old memory's id")
    answer = _required(fields, "as", "the answer")
    await ui.call(ui.store.resolve, new_id, old_id, answer, "inspector")
    return ui.redirect("/reviews", "resolved")
