"""One call of an agent tool, front-end neutral: arguments checked against the catalog, the
caller's Scope enforced, the library called, and the result returned as the CLI's --json
document (or a ToolError with a stable code). The MCP server and the Hermes provider are thin
shells around `ToolSurface.call`; neither re-implements a rule here.

Scoped callers (a token file with a namespace allow-list) are held to the spec: every
namespace-bearing call names an allowed namespace, a namespace-less read is denied, the
user:global tier is added only when it is itself allowed, and rows are filtered to the allowed
namespaces (with their migration aliases) once more after the read. Id-addressed calls take a
full id from a scoped caller, so a short prefix cannot probe other namespaces; a foreign id
reads as not found. supersede and invalidate stay id-addressed, as the spec makes them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import apsw

from zmem.access import UNSCOPED, Scope
from zmem.agent_tools.catalog import BY_NAME, ToolError, check_arguments
from zmem.errors import (
    NotFound,
    Refusal,
    SchemaError,
    StoreBusy,
    StoreUnavailable,
    ZMemError,
)
from zmem.hosts.verbs import Hooks
from zmem.models import GLOBAL_NAMESPACE, Memory
from zmem.retrieval import render
from zmem.retrieval.request import RecallReport, RecallRequest
from zmem.store import MemoryStore, failures

# MCP and Hermes writes are agent-authored unless the caller says otherwise (spec: taint).
DEFAULT_TAINT = "untrusted_tool"


class ToolSurface:
    """The tools over one open store. `workspace` is the namespace a namespace-less add,
    session_start or session_end means (the checkout an MCP server serves, a Hermes session's
    namespace; a call may name it per request); without one, add needs a namespace and the
    session tools fall back to `default_namespace` (user:global)."""

    def __init__(
        self,
        store: MemoryStore,
        *,
        default_namespace: str = GLOBAL_NAMESPACE,
        workspace: str | None = None,
    ):
        self.store = store
        self.default_namespace = default_namespace
        self.workspace = workspace
        self._call_workspace: str | None = None
        self._hooks = Hooks(store.settings, store)

    def reopen_if_replaced(self) -> bool:
        """For a long-lived server: reopen the store when its file was swapped (`zmem restore`
        renames a snapshot over it), instead of serving the old, unlinked file."""
        if not self._hooks.reopen_if_replaced():  # it closed the old store if the file moved
            return False
        self.store = MemoryStore.open(settings=self.store.settings)
        self._hooks = Hooks(self.store.settings, self.store)
        return True

    def call(
        self, name: str, args: Any, scope: Scope = UNSCOPED, workspace: str | None = None
    ) -> dict[str, Any]:
        """One tool call; `workspace` is this request's own (an MCP client's workspace root)."""
        spec = BY_NAME.get(name)
        if spec is None:
            raise ToolError("unknown_tool", f"no tool named {name!r}")
        checked = check_arguments(spec, args)
        self._call_workspace = workspace or self.workspace
        handler: Callable[[dict[str, Any], Scope], dict[str, Any]] = getattr(self, "_" + name)
        try:
            return handler(checked, scope)
        except ToolError:
            raise
        except NotFound as exc:
            raise ToolError("not_found", str(exc)) from exc
        except Refusal as exc:
            raise ToolError("refused", str(exc)) from exc
        except StoreBusy as exc:
            raise ToolError("store_busy", str(exc)) from exc
        except (StoreUnavailable, SchemaError) as exc:
            raise ToolError("store_unavailable", str(exc)) from exc
        except ZMemError as exc:  # UsageError, ConfigError: the caller's input
            raise ToolError("invalid_arguments", str(exc)) from exc
        except apsw.Error as exc:
            failure = failures.explain(exc, self.store.path)
            code = "store_busy" if isinstance(failure, StoreBusy) else "store_unavailable"
            raise ToolError(code, str(failure)) from exc
        except Exception as exc:
            raise ToolError(
                "internal_error", f"internal error ({type(exc).__name__}); this is a bug in zmem"
            ) from exc

    # ---- scope -------------------------------------------------------------------------------

    def _allowed(self, namespace: str | None, scope: Scope) -> str | None:
        if namespace is not None and not scope.allows(namespace):
            raise ToolError(
                "namespace_not_allowed", f"namespace {namespace!r} is not allowed for this token"
            )
        return namespace

    def _visible_spaces(self, scope: Scope) -> set[str] | None:
        """The namespaces a scoped caller's rows may come from: each allowed one and the
        legacy keys aliased to it (its reads include those rows)."""
        if scope.namespaces is None:
            return None
        spaces: set[str] = set()
        for ns in scope.namespaces:
            spaces.update(self.store.namespace_set(ns))
        return spaces

    def _exact(self, memory_id: str) -> Memory:
        """The row with exactly this id. A scoped caller gives the full id: a prefix (or an
        ambiguous one, whose error lists candidates) would let it probe other namespaces."""
        key = memory_id.strip().lower()
        try:
            found = self.store.get(key)
        except ZMemError:
            found = None
        if found is None or found.id != key:
            raise ToolError("not_found", f"no memory with id {memory_id}")
        return found

    def _memory(self, memory_id: str, scope: Scope) -> Memory:
        """The row an id names, if the caller may see it; a foreign row reads as missing."""
        if not scope.scoped:
            return self.store.get(memory_id)
        found = self._exact(memory_id)
        if found.namespace not in (self._visible_spaces(scope) or set()):
            raise ToolError("not_found", f"no memory with id {memory_id}")
        return found

    # ---- reads -------------------------------------------------------------------------------

    def _read(self, kind: str, query: str, a: dict[str, Any], scope: Scope) -> dict[str, Any]:
        namespace = a.get("namespace")
        if scope.scoped and namespace is None:
            raise ToolError(
                "namespace_not_allowed",
                "a scoped token must name one of its namespaces on every read",
            )
        self._allowed(namespace, scope)
        include_global = bool(a.get("include_global")) and scope.global_allowed
        options = {
            k: a[k]
            for k in (
                "limit",
                "global_limit",
                "as_of",
                "link_hops",
                "link_budget",
                "no_mmr",
                "no_unfold",
                "min_confidence",
            )
            if k in a and a[k] is not None
        }
        req = RecallRequest.explicit(
            query, kind=kind, namespace=namespace, include_global=include_global, **options
        )
        report = self.store.read(req)
        return self._envelope(report, scope)

    def _envelope(self, report: RecallReport, scope: Scope) -> dict[str, Any]:
        hits = report.hits
        visible = self._visible_spaces(scope)
        if visible is not None:
            # The pipeline keeps every lane, link and lineage row inside the tier; checked here
            # again because a foreign row reaching a scoped caller is the one unforgivable bug.
            hits = [h for h in hits if h.memory.namespace in visible]
        out = render.envelope(
            hits, omitted=report.omitted, tokens=report.tokens_used, budget=report.tokens_budget
        )
        if report.warnings:
            out["warnings"] = list(report.warnings)
        return out

    def _recall(self, a: dict[str, Any], scope: Scope) -> dict[str, Any]:
        return self._read("recall", a["query"], a, scope)

    def _search(self, a: dict[str, Any], scope: Scope) -> dict[str, Any]:
        return self._read("search", a["text"], a, scope)

    def _recent(self, a: dict[str, Any], scope: Scope) -> dict[str, Any]:
        return self._read("recent", "", a, scope)

    def _get(self, a: dict[str, Any], scope: Scope) -> dict[str, Any]:
        m = self._memory(a["id"], scope)
        described = self.store.describe(m.id)
        described.pop("warnings", None)
        visible = self._visible_spaces(scope)
        if visible is not None:
            described["links"] = [
                link for link in described["links"] if self._id_visible(link["other"], visible)
            ]
            if described.get("successor_id") and not self._id_visible(
                described["successor_id"], visible
            ):
                described["successor_id"] = None
        return described

    def _id_visible(self, memory_id: str, visible: set[str]) -> bool:
        try:
            return self.store.get(memory_id).namespace in visible
        except NotFound:
            return False

    def _stats(self, a: dict[str, Any], scope: Scope) -> dict[str, Any]:
        if scope.scoped:
            # Store-wide counts name every namespace: a namespace-less read.
            raise ToolError(
                "namespace_not_allowed", "stats spans every namespace; a scoped token may not"
            )
        return self.store.stats()

    def _links(self, a: dict[str, Any], scope: Scope) -> dict[str, Any]:
        source = self._memory(a["id"], scope)
        if a.get("target") is not None:
            if a.get("relation") is None:
                raise ToolError("invalid_arguments", "links: add mode needs 'relation'")
            target = self._memory(a["target"], scope)
            return self.store.add_link(
                source.id, target.id, a["relation"], score=a.get("score"), reason=a.get("reason")
            )
        if a.get("relation") is not None or a.get("score") is not None:
            raise ToolError("invalid_arguments", "links: 'relation' and 'score' need 'target'")
        visible = self._visible_spaces(scope)
        edges = [e.to_dict(viewpoint=source.id) for e in self.store.links(source.id)]
        if visible is not None:
            edges = [e for e in edges if self._id_visible(e["other"], visible)]
        return {"id": source.id, "links": edges}

    # ---- writes ------------------------------------------------------------------------------

    def _add(self, a: dict[str, Any], scope: Scope) -> dict[str, Any]:
        namespace = a.get("namespace") or self._call_workspace
        if namespace is None:
            raise ToolError(
                "invalid_arguments",
                "name a namespace (project:<repo> or user:global): this server serves no checkout",
            )
        self._allowed(namespace, scope)
        result = self.store.add(
            a["content"],
            namespace=namespace,
            type=a["type"],
            tags=a.get("tags"),
            signal=a.get("signal") or "none",
            taint=a.get("taint") or DEFAULT_TAINT,
            source_ref=a.get("source_ref"),
            capture_mode=a.get("capture_mode"),
        )
        return result.to_dict(include_created_new=False)

    def _update(self, a: dict[str, Any], scope: Scope) -> dict[str, Any]:
        target = self._memory(a["id"], scope)
        self._allowed(a.get("namespace"), scope)
        result = self.store.update(
            target.id,
            a["content"],
            namespace=a.get("namespace"),
            type=a.get("type"),
            tags=a.get("tags"),
            source_ref=a.get("source_ref"),
            confidence=a.get("confidence"),
            signal=a.get("signal"),
            taint=a.get("taint"),
            capture_mode=a.get("capture_mode"),
        )
        return result.to_dict(include_created_new=True)

    def _tombstone_id(self, memory_id: str, scope: Scope) -> str:
        # Spec: "supersede/invalidate are id-addressed and deliberately NOT namespace-confined
        # (a scoped token holding an id may tombstone it)". Holding it means the full id.
        return self._exact(memory_id).id if scope.scoped else memory_id

    def _invalidate(self, a: dict[str, Any], scope: Scope) -> dict[str, Any]:
        return self.store.invalidate(self._tombstone_id(a["id"], scope), a["reason"]).to_dict()

    def _supersede(self, a: dict[str, Any], scope: Scope) -> dict[str, Any]:
        return self.store.supersede(self._tombstone_id(a["id"], scope), a.get("reason")).to_dict()

    def _contradict(self, a: dict[str, Any], scope: Scope) -> dict[str, Any]:
        first, second = (self._memory(i, scope) for i in a["ids"])
        return self.store.contradict(first.id, second.id, a["reason"])

    def _resolve(self, a: dict[str, Any], scope: Scope) -> dict[str, Any]:
        new, old = self._memory(a["new"], scope), self._memory(a["old"], scope)
        return self.store.resolve(new.id, old.id, a["as"], by="agent")

    # ---- session pairing ---------------------------------------------------------------------

    def _session_start(self, a: dict[str, Any], scope: Scope) -> dict[str, Any]:
        ns = self._allowed(
            a.get("namespace") or self._call_workspace or self.default_namespace, scope
        )
        assert ns is not None
        req = RecallRequest.prefetch(
            kind="recent",
            namespace=ns,
            limit=a["limit"],
            include_global=ns != GLOBAL_NAMESPACE and scope.global_allowed,
        )
        report = self.store.read(req)
        decision = self._hooks.decide(report, session=True)
        return {
            "namespace": ns,
            "context": decision.block,
            "reason": decision.reason,
            "ids": list(decision.ids),
            "omitted": report.omitted,
            "tokens_used": report.tokens_used,
            "tokens_budget": report.tokens_budget,
        }

    def _session_end(self, a: dict[str, Any], scope: Scope) -> dict[str, Any]:
        ns = self._allowed(
            a.get("namespace") or self._call_workspace or self.default_namespace, scope
        )
        note = a.get("note")
        if note is None or not note.strip():
            # Spec: a no-write acknowledgement, so clients pair start and end freely; it never
            # organizes or consolidates.
            return {"result": "acknowledged", "written": False, "namespace": ns}
        result = self.store.add(
            note,
            namespace=ns or self.default_namespace,
            type="fact",
            signal="none",
            taint=DEFAULT_TAINT,
            capture_mode="auto",
        )
        return {**result.to_dict(include_created_new=False), "written": True, "namespace": ns}
