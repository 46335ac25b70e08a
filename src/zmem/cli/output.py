"""The only place the CLI prints results: JSON documents for scripts, short aligned text for
people, and warnings on stderr."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence, Sized
from typing import TYPE_CHECKING, Any, TypeVar

import click

if TYPE_CHECKING:  # the reads' types; a command that prints none of them never imports them
    from zmem.config import Settings
    from zmem.models import Memory
    from zmem.retrieval.explain import Verdict
    from zmem.retrieval.request import RecallReport

T = TypeVar("T")

PREVIEW_CHARS = 100


def emit_json(document: Any, *, indent: int | None = 2, ensure_ascii: bool = False) -> None:
    click.echo(json.dumps(document, ensure_ascii=ensure_ascii, indent=indent))


def emit(text: str) -> None:
    click.echo(text)


def emit_document(text: str) -> None:
    """A document printed as it is (its own final newline, none added): export-pack."""
    click.echo(text, nl=False)


def passthrough(out: str, err: str) -> None:
    """What a command printed elsewhere (the resident process answering a read), as is."""
    click.echo(out, nl=False)
    click.echo(err, nl=False, err=True)


def reader_gone() -> None:
    """The reader of stdout went away (`zmem list | head`): what is left to print goes
    nowhere, quietly, including what the interpreter flushes on its way out."""
    import os
    import sys

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass


# Whether the command running asked for JSON (--json, --format json|both): a failure then also
# prints one JSON object on stdout, {"error": <the stderr line's text>, "exit": <code>}, so a
# script reading stdout always gets a document (docs/cli.md). Set at every invocation's start
# (the resident process runs many in one interpreter).
_json_errors = [False]


def json_errors(on: bool) -> None:
    _json_errors[0] = on


def asks_json(args: Iterable[str]) -> bool:
    """Whether a command line asks for JSON output, read before click parses it (a usage error
    comes before any parameter has a value)."""
    words = list(args)
    for i, word in enumerate(words):
        if word == "--":
            break
        if word == "--json" or word in ("--format=json", "--format=both"):
            return True
        if word == "--format" and i + 1 < len(words) and words[i + 1] in ("json", "both"):
            return True
    return False


def error(text: str, exit_code: int | None = None) -> None:
    """The one stderr line of a failed command (click's messages can span lines: a missing
    choice option lists its choices one per line); with JSON asked for, the same as one JSON
    object on stdout."""
    line = " ".join(text.split())
    click.echo(f"zmem: error: {line}", err=True)
    if _json_errors[0] and exit_code is not None:
        try:
            click.echo(json.dumps({"error": line, "exit": exit_code}, ensure_ascii=False))
        except (BrokenPipeError, OSError):
            pass  # the reader left; the exit code still says it


def warn(text: str) -> None:
    click.echo(f"[zmem] warning: {text}", err=True)


def notice(text: str) -> None:
    click.echo(f"[zmem] {text}", err=True)


def ask(question: str, default: bool = True) -> bool | None:
    """A yes/no question for the person at a terminal (on stderr, so stdout stays the
    command's); None when nobody is there to answer (a pipe, a script, CI)."""
    import sys

    if not (sys.stdin.isatty() and sys.stderr.isatty()):
        return None
    return click.confirm(question, default=default, err=True)


def choose(question: str, choices: Sequence[str], default: str) -> str:
    """One of `choices`, asked of the person at the terminal (on stderr)."""
    return click.prompt(
        question, type=click.Choice(list(choices)), default=default, err=True, show_choices=True
    )


def describe_warning(w: Mapping[str, Any]) -> str:
    kind = w.get("type")
    if kind == "redacted":
        return f"redacted {w['count']} secret-like span(s) before storing"
    if kind == "secret_warning":
        return (
            f"{w['count']} secret-like span(s) stored verbatim (capture mode is not auto); "
            "never keep credentials in the store"
        )
    if kind == "injection_risk":
        return (
            "content is shaped like an instruction to the model "
            f"({', '.join(w['shapes'])}); tagged prompt-injection-risk"
        )
    if kind == "controls_stripped":
        return f"removed {w['count']} control character(s) or escape sequence(s) from the content"
    if kind == "below_recall_floor":
        return (
            f"confidence {w['confidence']:.2f} (signal {w['signal']}) is under the recall floor "
            f"{w['floor']:.2f}: recall and the hooks will not show this memory; ground it with "
            "--signal test|compile|lint|reviewer|user (search --query still finds it)"
        )
    if kind == "source_unreadable":
        return f"source file {w['path']} cannot be opened; no content hash recorded"
    return json.dumps(dict(w))


def emit_warnings(warnings: Iterable[Mapping[str, Any]]) -> None:
    for w in warnings:
        warn(describe_warning(w))


def flags(m: Memory, injection: bool, stale: bool) -> list[str]:
    out = []
    if not m.live:
        out.append("SUPERSEDED")
    if injection:
        out.append("INJECTION RISK")
    if m.taint == "untrusted_tool":
        out.append("UNTRUSTED TOOL")
    elif m.taint == "untrusted_web":
        out.append("UNTRUSTED WEB")
    if stale:
        out.append("STALE SOURCE")
    return out


def preview(content: str, width: int = PREVIEW_CHARS) -> str:
    line = " ".join(content.split())
    return line if len(line) <= width else line[: width - 1] + "…"


def memory_line(m: Memory, injection: bool, stale: bool) -> str:
    marks = "".join(f"[{f}] " for f in flags(m, injection, stale))
    return (
        f"{m.id}  {m.type:<10}  {m.namespace}  conf={m.confidence:.2f} "
        f"trust={m.trust_score:.2f}  {marks}{preview(m.content)}"
    )


def stats_text(s: Mapping[str, Any]) -> str:
    lines = [
        f"store        {s['store_path']} (schema v{s['schema_version']}, {_size(s['size_bytes'])})",
        f"memories     {s['live']} live, {s['superseded']} superseded, {s['total']} total",
        f"             {s['below_recall_floor']} live below the recall floor, "
        f"{s['injection_risk']} tagged injection risk",
        f"graph        {s['entities']} entities, {s['links']} links, {s['episodes']} episodes",
        f"embeddings   {s['embedded']} rows embedded; profile {s['embed_profile']}"
        f"{'' if s['embedder_available'] else ' (model absent: keyword + entity lanes)'}",
        f"capture mode {s['capture_mode']}",
    ]
    if s["by_namespace"]:
        lines.append("namespaces   " + ", ".join(f"{k} {v}" for k, v in s["by_namespace"].items()))
    if s["by_type"]:
        lines.append("types        " + ", ".join(f"{k} {v}" for k, v in s["by_type"].items()))
    return "\n".join(lines)


def _size(n: int | None) -> str:
    if n is None:
        return "size unknown"
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"


def emit_report(
    report: RecallReport,
    *,
    passive: bool,
    as_json: bool,
    settings: Settings,
    as_of: str | None,
    extra: dict[str, Any] | None = None,
) -> None:
    """A recall/search/recent result: the read envelope, or the fenced block for people."""
    if as_json:
        emit_json(
            _render().envelope(
                report.hits,
                omitted=report.omitted,
                tokens=report.tokens_used,
                budget=report.tokens_budget,
                extra=extra,
            )
        )
    elif report.hits:
        block = _render().render_block(
            report.hits, passive=passive, char_budget=settings.ctx_budget, as_of=as_of
        )
        emit(block or "memories withheld: ZMEM_CTX_BUDGET is too small to show one row.")
    else:
        emit("no memories matched.")
    if not passive:
        for w in report.warnings:
            warn(w)


def _render():
    from zmem.retrieval import render

    return render


def explain_text(query: str, effective: Mapping[str, Any], verdicts: Iterable[Verdict]) -> str:
    """One blameline per verdict: reason, rank, score, id, and the detail that decided it."""
    shown = " ".join(f"{k}={v}" for k, v in effective.items() if v not in (None, False))
    lines = [f"explain: {query!r} {shown}"]
    for v in verdicts:
        rank = "-" if v.rank is None else str(v.rank)
        score = "-" if v.score is None else f"{v.score:.4f}"
        detail = ", ".join(f"{k}={val}" for k, val in v.detail.items() if val not in (None, {}, []))
        lines.append(f"{v.reason:<22} {rank:>3} {score:>7}  {v.id or '-'}  {detail}")
    return "\n".join(lines)


class _Bar:
    """A rich progress bar on a terminal's stderr; silent elsewhere (pipes, CI logs)."""

    def __init__(self, label: str):
        import sys

        self._progress = None
        if sys.stderr.isatty():
            from rich.console import Console
            from rich.progress import Progress

            self._progress = Progress(console=Console(stderr=True), transient=True)
            self._task = self._progress.add_task(label, total=None)
            self._progress.start()

    def update(self, done: int, total: int | None) -> None:
        if self._progress is not None:
            self._progress.update(self._task, completed=done, total=total)

    def close(self) -> None:
        if self._progress is not None:
            self._progress.stop()


def progress_bar(label: str) -> _Bar:
    return _Bar(label)


def track(items: Iterable[T], description: str, total: int | None = None) -> Iterator[T]:
    """evaluation's Tracker, on the same bar as the CLI's long jobs."""
    if total is None and isinstance(items, Sized):
        total = len(items)
    bar = _Bar(description)
    try:
        for done, item in enumerate(items, start=1):
            yield item
            bar.update(done, total)
    finally:
        bar.close()


def where_text(d: Mapping[str, Any]) -> str:
    if d["namespace"]:
        ns = f"namespace   {d['namespace']}  (checkout {d['checkout']})"
    else:
        ns = "namespace   none: not in a git checkout (pass --namespace, or run this in a repo)"
    lines = [ns, f"store       {d['store']}" + ("" if d["store_exists"] else "  (not created yet)")]
    if d["store_problem"]:
        lines.append(f"problem     {d['store_problem']}")
    elif d["store_exists"]:
        held = f"{d['live_in_global']} in user:global"
        if d["namespace"]:
            held = f"{d['live_in_namespace']} in this namespace, " + held
        lines.append(f"memories    {held}")
    lines.append(f"data dir    {d['data_dir']}")
    lines.append(f"embeddings  {d['embed_profile']}; capture mode {d['capture_mode']}")
    recall = d["recall"] + (f": {d['recall_fix']}" if d.get("recall_fix") else "")
    lines.append(f"recall      {recall}")
    return "\n".join(lines)


def ingest_text(r: Mapping[str, Any]) -> str:
    parts = [f"{r['inserted']} inserted"]
    for key, label in (
        ("deduped", "folded into local duplicates"), ("unchanged", "already here"),
        ("conflicts", "kept as they are here (the file differs)"), ("tombstoned", "tombstoned"),
        ("tombstones_refused", "tombstones not applied (--allow-tombstones)"),
        ("capture_refused", "refused by the capture policy"), ("malformed", "malformed"),
    ):  # fmt: skip
        if r[key]:
            parts.append(f"{r[key]} {label}")
    lines = [f"ingested {r['lines']} lines: {', '.join(parts)}"]
    lines.append(
        f"links: {r['links_added']} added, {r['links_present']} already here, "
        f"{r['links_skipped']} skipped"
    )
    if r["episodes_added"] or r["episodes_present"] or r["memberships_added"]:
        lines.append(
            f"episodes: {r['episodes_added']} added, {r['episodes_present']} already here; "
            f"memberships: {r['memberships_added']} added, {r['memberships_skipped']} skipped"
        )
    if r["redacted"]:
        lines.append(f"{r['redacted']} rows had secrets redacted")
    if r.get("secret_warnings"):
        lines.append(
            f"{r['secret_warnings']} rows stored verbatim though they look like they hold a "
            "secret (capture mode is not auto); never keep credentials in the store"
        )
    if r["injection_risk"]:
        lines.append(f"{r['injection_risk']} rows tagged prompt-injection-risk")
    return "\n".join(lines)


def reembed_text(r: Mapping[str, Any]) -> str:
    if r["skipped"]:
        return f"reembed skipped: {r['skipped']}"
    verb = "would re-embed" if r["dry_run"] else "re-embedded"
    count = r["rows_to_change"] if r["dry_run"] else r["rows_changed"]
    extra = "; vector index recreated" if r["index_recreated"] else ""
    if r.get("resumed"):
        extra += " (resumed an interrupted run)"
    lines = [
        f"{verb} {count} of {r['live_rows']} live memories with {r['profile']} "
        f"({r['model']}, {r['dim']}-d){extra}"
    ]
    if r.get("abandoned"):
        lines.append(f"dropped the interrupted conversion to {r['abandoned']}")
    if r.get("pending"):
        lines.append(f"note: {r['pending']}")
    return "\n".join(lines)


def _kinds(counts: Mapping[str, int]) -> str:
    names = {"memory": "memories", "link": "links", "episode": "episodes",
             "episode_memory": "memberships"}  # fmt: skip
    parts = [f"{n} {names.get(k, k)}" for k, n in counts.items() if n]
    return ", ".join(parts) or "nothing"


def hub_sync_text(r: Mapping[str, Any]) -> str:
    lines = [
        f"pushed {_kinds(r['pushed'])} ({r['hub_changed']} new or changed on the hub); "
        f"pulled {_kinds(r['pulled'])}; {r['seconds']:.2f} s"
    ]
    if r["redacted"]:
        lines.append(f"redacted secrets in {r['redacted']} row(s) before they left")
    if r["secret_warnings"]:
        lines.append(
            f"{r['secret_warnings']} row(s) pushed verbatim though they look like they hold "
            "secrets (capture mode is not auto)"
        )
    if r.get("quarantined"):
        lines.append(
            f"{r['quarantined']} object(s) from the hub quarantined, not applied "
            "(`zmem sync --status` lists them)"
        )
    if r.get("refused"):
        lines.append(f"{r['refused']} object(s) of this store refused by the hub")
    if r.get("deferred"):
        lines.append(f"{r['deferred']} object(s) held by another session on the hub: next sync")
    if r.get("read_only"):
        lines.append(f"read-only, pulled only: {', '.join(r['read_only'])}")
    ingest = r.get("ingest") or {}
    for key, label in (("deduped", "retired as duplicates"), ("redacted", "redacted on arrival"),
                       ("injection_risk", "tagged prompt-injection-risk"),
                       ("capture_refused", "refused by the capture policy"),
                       ("malformed", "malformed")):  # fmt: skip
        if ingest.get(key):
            lines.append(f"pulled rows {label}: {ingest[key]}")
    return "\n".join(lines)


def hub_status_text(s: Mapping[str, Any]) -> str:
    lines = [
        f"hub         {s['hub']} as {s['role']} from {s['machine']}",
        f"sharing     {', '.join(s['namespaces'])}",
        f"last push   {s['last_push'] or 'never'}",
        f"last pull   {s['last_pull'] or 'never'}",
    ]
    if s.get("reachable") is False:
        lines.append(f"behind      unknown: {s.get('hub_error')}")
    elif s.get("behind") is not None:
        lines.append(f"behind      {s['behind']} object(s) to pull")
    if s.get("last_error"):
        lines.append(f"last error  {s['last_error']}")
    if s.get("distrusted"):
        lines.append(f"distrusted  {', '.join(s['distrusted'])} (kept out of passive injection)")
    if s.get("quarantined") or s.get("refused"):
        lines.append(
            f"quarantine  {s.get('quarantined', 0)} pulled object(s) set aside, "
            f"{s.get('refused', 0)} of this store's refused by the hub"
        )
        for q in s.get("quarantine", [])[:10]:
            who = f"{q['writer']}@{q['machine']}" if q.get("writer") else "?"
            lines.append(
                f"  {q['direction']} {q['kind']} {str(q['key'])[:40]} (seq {q['seq']}, by {who}): "
                f"{q['reason']}"
            )
    return "\n".join(lines)


def hub_members_text(rows: Sequence[Mapping[str, Any]]) -> str:
    if not rows:
        return "no members yet: zmem hub grant --url URL --role ROLE --namespace NS"
    lines = []
    for m in rows:
        grants = (
            ", ".join(g["namespace"] + ("" if g["write"] else " (read-only)") for g in m["grants"])
            or "no grants"
        )
        flag = "" if m["member"] else " [removed]"
        lines.append(
            f"{m['role']}{flag}: {grants}; {m['memories_written']} memory(ies) written, "
            f"{m['retired']} retired; last change {m['last_change'] or 'never'}"
        )
    return "\n".join(lines)
