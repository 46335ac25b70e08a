"""The host-independent hook verbs that need the store: what SessionStart, UserPromptSubmit,
PreToolUse and SubagentStart do, given a normalized HookEvent that zmem.resident.dispatch has
already found to have work (every skip check lives there). Each returns an Outcome (the context
text, if any, and the bg-log decision: reason=, omitted=, ops=, tokens=). Recall here is always
the passive surface (RecallRequest.prefetch: global tier included, the surface event written
only for the rows the gate lets through)."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from zmem import untrusted
from zmem.capture import corrections
from zmem.capture import project_namespace as namespace
from zmem.config import Settings
from zmem.hosts import opsring, sidecars, transcript
from zmem.hosts.events import HookEvent, Outcome
from zmem.retrieval.render import render_block, row_line, selective_gate
from zmem.retrieval.render import review_block as render_review_block
from zmem.retrieval.request import RecallRequest
from zmem.store import MemoryStore

CORE_MAX_BYTES = 2048
AGENTS_MAX_CHARS = 4000
RECENT_LIMIT = 5
REVIEWS_AT_START = 2  # pending questions a session start offers (each once)
PROMPT_LIMIT = 5
PRETOOL_LIMIT = 3
SILENT_PROMPT = "no durable memories retrieved for this prompt."
SILENT_SESSION = "no durable memories retrieved for this session."
BELOW_BAR = "no durable memories met the inject bar."
BUDGET_PROMPT = (
    "memories withheld: the injection token budget (ZMEM_INJECT_TOKEN_BUDGET) dropped every "
    "candidate row."
)
BUDGET_SESSION = (
    "session memories withheld: the injection token budget (ZMEM_INJECT_TOKEN_BUDGET) dropped "
    "every candidate row."
)
# Pre-tool recall wants hazards, not everything that shares a word with a path.
PRETOOL_TYPES = frozenset({"lesson", "constraint", "convention", "decision"})


@dataclass
class Decision:
    block: str
    reason: str
    fields: dict[str, Any]
    ids: tuple[str, ...] = ()  # the rows the block shows (their surface event was recorded)


class Hooks:
    """Verbs over one open store; the resident process keeps one of these per data dir."""

    def __init__(
        self, settings: Settings, store: MemoryStore | None = None, *, hybrid: bool | None = None
    ):
        self.settings = settings
        self.data_dir = settings.data_dir
        self._store = store
        self._identity = _file_identity(settings.store_path) if store is not None else None
        # None: hybrid when the store can embed (the resident process, model loaded once).
        # False: the one-shot in-process fallback, which must not pay the ~0.4 s model load
        # on a prompt; it answers lexically while the resident process starts.
        self.hybrid = hybrid

    @property
    def store(self) -> MemoryStore:
        if self._store is None:
            self._store = MemoryStore.open(settings=self.settings)
            self._identity = _file_identity(self.settings.store_path)
        return self._store

    def reopen_if_replaced(self) -> bool:
        """A long-lived process (the resident one) reopens the store when its file was swapped
        (`zmem restore` renames a snapshot over it): the open connection still reads the old,
        unlinked file, and what it wrote there would be lost. One stat per request."""
        if self._store is None or _file_identity(self.settings.store_path) == self._identity:
            return False
        self.close()
        return True

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None

    def run(self, event: HookEvent) -> Outcome:
        verb = {
            "SessionStart": self.session_start,
            "UserPromptSubmit": self.prompt_submit,
            "PreToolUse": self.pre_tool,
            "SubagentStart": self.subagent_start,
            "PreCompact": self.pre_compact,
        }.get(event.name)
        if verb is None:
            return Outcome(reason="skipped")
        return verb(event)

    # ---- shared ------------------------------------------------------------------------------

    def namespace(self, event: HookEvent) -> str:
        # ZMEM_NS_MIGRATION_MAP's aliases are recorded when the store opens (MemoryStore).
        return namespace.derive(event.cwd or os.environ.get("CLAUDE_PROJECT_DIR"))

    def _prefetch(self, query: str, ns: str, limit: int, **options: Any) -> RecallRequest:
        return RecallRequest.prefetch(
            query, namespace=ns, limit=limit, hybrid=self.hybrid, **options
        )

    def _unseen(self, report: Any, event: HookEvent) -> int:
        return self.drop_seen(report, event.session_id)

    def drop_seen(self, report: Any, session_id: str | None) -> int:
        """Drop the rows this session's context already holds (sidecars.seen); how many went."""
        if not session_id:
            return 0
        held = sidecars.seen(self.data_dir, session_id)
        before = len(report.hits)
        report.hits = [h for h in report.hits if h.id not in held]
        return before - len(report.hits)

    def _remember(self, event: HookEvent, d: Decision) -> None:
        if event.session_id and d.ids:
            sidecars.mark_seen(self.data_dir, event.session_id, d.ids)

    def decide(self, report: Any, *, session: bool) -> Decision:
        """Gate, render and name the reason (the spec's closed silence set); the agent tools'
        session_start and the Hermes prefetch decide the same way."""
        budget = self.settings.inject_token_budget
        fields: dict[str, Any] = {"tokens": f"{report.tokens_used}/{budget}"}
        if report.omitted:
            fields["omitted"] = report.omitted
        if not report.hits:
            if report.budget_dropped:
                return Decision(BUDGET_SESSION if session else BUDGET_PROMPT, "budget-drop", fields)
            reason = "omitted" if report.omitted else "empty-pool"
            return Decision(SILENT_SESSION if session else SILENT_PROMPT, reason, fields)
        gated = selective_gate(report.hits, self.settings.inject_floor_gate_none)
        if not gated:
            return Decision(BELOW_BAR, "below-bar", fields)
        block = render_block(gated, passive=True, char_budget=self.settings.ctx_budget)
        if not block:
            return Decision(BUDGET_SESSION if session else BUDGET_PROMPT, "budget-drop", fields)
        # The surface event goes to the rows the model will actually read: not to rows the
        # gate or the character cap held back (reads run with telemetry off for this).
        shown = [h.id for h in gated if not h.extra and row_line(h, passive=True) in block]
        if not self.store.surface(shown):
            fields["surface"] = "busy"
        fields["hits"] = len(gated)
        return Decision(block, "injected", fields, tuple(shown))

    # ---- SessionStart ------------------------------------------------------------------------

    def session_start(self, event: HookEvent) -> Outcome:
        ns = self.namespace(event)
        # Claude Code and Codex put the project's AGENTS.md in context themselves (seen live:
        # docs/host-verification.md); the spec's project tier is ZCode's.
        agents = self._agents_md(event) if event.host == "zcode" else None
        parts = [p for p in (self._core(), agents) if p]
        parts.append(skill_line())
        parts.append(f"# Memory namespace for this project: {ns} (cross-project: user:global)")
        report = self.store.read(
            RecallRequest.prefetch(kind="recent", namespace=ns, limit=RECENT_LIMIT)
        )
        if event.session_id and event.source in ("startup", "clear"):
            sidecars.reset_seen(self.data_dir, event.session_id)  # a new, empty context
        held = self._unseen(report, event)
        d = self.decide(report, session=True)
        if held:
            d.fields["seen"] = held
        self._remember(event, d)
        parts.append(d.block)
        # A few of the write-time judge's pending questions about this checkout, once each
        # (issue 50): the agent reading them may know the answer.
        offered = self.store.offer_reviews([ns], REVIEWS_AT_START)
        if offered:
            parts.append(render_review_block(offered))
            d.fields["reviews"] = len(offered)
        # A backup when one is due, the sentinel sweep once a day: detached, after the answer
        # is built, and only when something is owed (two stat calls otherwise). Imported here:
        # the prompt hook, which shares this module, never pays for the maintenance modules.
        from zmem.hosts import upkeep

        upkeep.spawn(self.settings)
        return Outcome("\n\n".join(parts), d.reason, d.fields)

    def _core(self) -> str | None:
        path = self.data_dir / "core.md"
        try:
            raw = untrusted.read_head(path, CORE_MAX_BYTES + 1)
        except OSError:
            return None
        note = ""
        if len(raw) > CORE_MAX_BYTES:
            raw = raw[:CORE_MAX_BYTES]
            note = f"\n(core.md is over {CORE_MAX_BYTES} bytes; the rest was not injected)"
        text = raw.decode("utf-8", errors="ignore").strip()
        return f"# Core memory (core.md)\n{text}{note}" if text else None

    def _agents_md(self, event: HookEvent) -> str | None:
        if not event.cwd:
            return None
        try:
            root, _ = namespace.find_checkout(event.cwd)
            # Four bytes a character at most: enough for the cut below, never the whole file.
            text = untrusted.read_text(root / "AGENTS.md", AGENTS_MAX_CHARS * 4 + 4).strip()
        except OSError:
            return None
        if len(text) > AGENTS_MAX_CHARS:
            text = text[:AGENTS_MAX_CHARS] + "\n(AGENTS.md truncated)"
        return f"# Project memory (AGENTS.md)\n{text}" if text else None

    # ---- UserPromptSubmit --------------------------------------------------------------------

    def prompt_submit(self, event: HookEvent) -> Outcome:
        prompt = (event.prompt or "").strip()
        ns = self.namespace(event)
        self._queue_correction(ns, event, prompt)
        ops_used = 0
        tokens: list[str] = []
        if self.settings.query_context and event.session_id:
            tokens = opsring.tail_tokens(self.data_dir, event.session_id)
        query, ops_used = opsring.compose_query(prompt, tokens)
        report = self.store.read(self._prefetch(query, ns, PROMPT_LIMIT))
        parts = []
        if event.session_id and self.settings.query_context:
            pending = sidecars.take_pending(self.data_dir, event.session_id)
            # Delivered only where the host dropped it: Claude Code 2.1.9 and later take the
            # pre-tool context themselves, and their transcript says so.
            if pending and not transcript.showed_pretool(event.transcript_path, pending):
                parts.append("Surfaced before your last tool call:\n" + pending)
        held = self._unseen(report, event)
        if held and not report.hits:
            # Everything this prompt recalls is in the context already: nothing to add.
            d = Decision("", "seen", {"seen": held})
        else:
            d = self.decide(report, session=False)
            if held:
                d.fields["seen"] = held
        self._remember(event, d)
        if ops_used:
            d.fields["ops"] = ops_used
        parts.append(d.block)
        capture = self._capture_prompt(event)
        if capture:
            parts.append(capture)
        return Outcome("\n\n".join(parts), d.reason, d.fields)

    def _queue_correction(self, ns: str, event: HookEvent, prompt: str) -> None:
        queue_correction(self.settings, ns, event.session_id, prompt)

    def _capture_prompt(self, event: HookEvent) -> str | None:
        # A failed tool call last turn may hold a lesson; ask once per session (cooldown marker)
        # instead of from Stop, where returned context would keep Claude running.
        sid = event.session_id
        if not sid or not opsring.failed_since(self.data_dir, sid, time.time() - 3600):
            return None
        if not sidecars.claim_marker(self.data_dir, "capture", sid):
            return None
        return (
            "ZMem: a tool call failed earlier in this session. If the fix taught something "
            "reusable, capture it with the memory skill (add --signal test|compile|lint|user)."
        )

    # ---- PreToolUse --------------------------------------------------------------------------

    def hazards(self, query: str, ns: str, session_id: str | None) -> Decision:
        """The pre-tool surface: hazard types only, at most PRETOOL_LIMIT rows, none this
        session's context already holds, gated as a prompt is. A row shown is recorded as
        seen. Hermes's pre_llm_call delivery decides the same way."""
        # keep_vector: the next edit of the same file asks the same query (RecallRequest).
        report = self.store.read(self._prefetch(query, ns, PRETOOL_LIMIT, keep_vector=True))
        report.hits = [h for h in report.hits if h.memory.type in PRETOOL_TYPES]
        held = self.drop_seen(report, session_id)
        d = self.decide(report, session=False)
        if held:
            d.fields["seen"] = held
        if d.reason == "injected" and session_id:
            sidecars.mark_seen(self.data_dir, session_id, d.ids)
        return d

    def pre_tool(self, event: HookEvent) -> Outcome:
        query = event.query if event.query is not None else opsring.tool_query(event)
        d = self.hazards(query, self.namespace(event), event.session_id)
        if d.reason != "injected":
            return Outcome(None, d.reason, d.fields)  # silent when nothing qualifies
        text = "Before this tool call, ZMem recalled:\n" + d.block
        if event.host == "claude" and event.session_id:
            # Claude Code before 2.1.9 drops pre-tool context; the next prompt delivers it.
            sidecars.put_pending(self.data_dir, event.session_id, d.block)
        return Outcome(text, d.reason, d.fields)

    # ---- SubagentStart -----------------------------------------------------------------------

    def subagent_start(self, event: HookEvent) -> Outcome:
        ns = self.namespace(event)
        if event.task:
            req = self._prefetch(event.task[: opsring.QUERY_CAP], ns, PROMPT_LIMIT)
        else:
            req = RecallRequest.prefetch(kind="recent", namespace=ns, limit=RECENT_LIMIT)
        report = self.store.read(req)
        d = self.decide(report, session=True)
        if d.reason != "injected":
            return Outcome(None, d.reason, d.fields)
        return Outcome(d.block, d.reason, d.fields)

    # ---- PreCompact (Claude Code) ----------------------------------------------------------

    def pre_compact(self, event: HookEvent) -> Outcome:
        """What the compacted conversation should keep from long-term memory: the memories
        that bear on the work in progress (the user's recent prompts, the commands the session
        ran, a manual /compact's instructions), with the prompt surface's floor and token
        budget and no lineage unfold. A compaction starts a new context, so the record of what
        this context holds starts again with these rows."""
        ns = self.namespace(event)
        recent = transcript.recent_prompts(event.transcript_path)
        text = " ".join(x for x in (event.prompt or "", *recent) if x)
        tokens: list[str] = []
        if self.settings.query_context and event.session_id:
            tokens = opsring.tail_tokens(self.data_dir, event.session_id)
        query, ops_used = opsring.compose_query(text[-opsring.QUERY_CAP :], tokens)
        if event.session_id:
            sidecars.reset_seen(self.data_dir, event.session_id)
        if not query.strip():
            req = RecallRequest.prefetch(kind="recent", namespace=ns, limit=RECENT_LIMIT)
        else:
            req = self._prefetch(query, ns, PROMPT_LIMIT)
        d = self.decide(self.store.read(req), session=False)
        if ops_used:
            d.fields["ops"] = ops_used
        if d.reason != "injected":
            return Outcome(None, d.reason, d.fields)
        self._remember(event, d)
        return Outcome("Long-term memories for the work in progress:\n" + d.block, d.reason,
                       d.fields)  # fmt: skip


def queue_correction(settings: Settings, ns: str, session_id: str | None, prompt: str) -> bool:
    """Queue a user correction found in a prompt ("no, use X", "remember: ...") for review in
    the namespace's sidecar; the prompt hook and Hermes's sync_turn both call it. True when
    the prompt held one (the queue keeps one copy of a repeated message)."""
    found = corrections.detect(prompt)
    if found is None:
        return False
    # The queue is a capture path too: the same policy as an add (issue 15).
    found = corrections.screen(found, settings.capture_mode)
    found["session"] = session_id
    sidecars.enqueue(settings.data_dir, ns, found)
    return True


def _file_identity(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_dev, st.st_ino


def skill_line() -> str:
    return f'# Memory skill: invoke "{store_script()}" <subcommand>'


def store_script() -> Path:
    """The absolute store.py path: the plugin's copy when a host names the plugin root, else
    the one in this package's plugin tree."""
    for var in ("CLAUDE_PLUGIN_ROOT", "PLUGIN_ROOT", "ZMEM_PLUGIN_ROOT"):
        root = os.environ.get(var, "").strip()
        if root:
            return (Path(root) / "skills" / "memory" / "scripts" / "store.py").resolve()
    from zmem import installation

    return installation.STORE_SCRIPT
