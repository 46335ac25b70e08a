"""CLI commands of the learning loop besides `feedback`: promote (the ladder, the review
candidate, the install into the hosts' skill folders) and failures (a session's failed and
rejected tool calls, the input of the Stop / SubagentStop reflection)."""

from __future__ import annotations

import time
from pathlib import Path

import click

from zmem.cli import output
from zmem.cli.app import cli
from zmem.errors import UsageError


@cli.command()
@click.option("--dry-run", is_flag=True, help="List candidates (or preview --id); write nothing.")
@click.option(
    "--namespace", default=None,
    help="With --dry-run: only this namespace's candidates. Default: every namespace, even "
    "inside a checkout (a skill serves every project).",
)  # fmt: skip
@click.option(
    "--id", "memory_id", default=None,
    help="The lesson to promote: its id or an unambiguous prefix of it.",
)  # fmt: skip
@click.option("--confirm", is_flag=True, help="Write the review candidate under <data>/promote/.")
@click.option(
    "--install-approved", is_flag=True,
    help="With --confirm: install the reviewed candidate into the Claude Code, Codex and ZCode "
    "skill folders.",
)  # fmt: skip
@click.option("--description", default=None, help="The skill's description (default: derived).")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.pass_obj
def promote(obj, dry_run, namespace, memory_id, confirm, install_approved, description, as_json):
    """Turn a lesson that has proven itself into a reusable skill, in two reviewed steps.

    A lesson is a candidate when explicit feedback says it works (applied >= 3, violated 0),
    it is grounded (signal test, compile or lint), confident (>= 0.85), live, and holds no
    secret and nothing that reads as an instruction to the model. Retrievals never count.

    \b
    zmem promote --dry-run [--namespace NS]         the candidates
    zmem promote --id ID --confirm                  write <data>/promote/<name>/SKILL.md
    zmem promote --id ID --confirm --install-approved
                                                    install the reviewed file
    Skill folders: ~/.claude/skills, ~/.agents/skills (Codex), ~/.zcode/skills; override with
    ZMEM_SKILLS_CLAUDE, ZMEM_SKILLS_CODEX, ZMEM_SKILLS_ZCODE.
    """
    if install_approved and not confirm:
        raise UsageError("--install-approved needs --confirm (two explicit gates)")
    if memory_id is None:
        if not dry_run or confirm:
            raise UsageError("promote needs --dry-run (list candidates) or --id")
        found = obj.store().promote_candidates(namespace)
        if as_json:
            output.emit_json(found)
        elif not found:
            output.emit("[zmem] no promotion candidates found")
        else:
            for c in found:
                output.emit(
                    f"{c['id'][:8]}  applied {c['applied_count']}  {c['namespace']}  "
                    f"{output.preview(c['content'], 80)}"
                )
        return
    if namespace is not None:
        raise UsageError("--namespace goes with --dry-run alone (an --id names its row)")
    done = obj.store().promote(
        memory_id, confirm=confirm and not dry_run, install=install_approved and not dry_run,
        description=description,
    )  # fmt: skip
    if as_json:
        output.emit_json(done)
    elif "installed" in done:
        edited = " (edited in review)" if done["edited"] else ""
        output.emit(f"installed {done['name']}{edited}:")
        for host, path in done["installed"].items():
            output.emit(f"  {host}: {path}")
    elif "candidate" in done:
        output.emit(f"wrote the review candidate {done['candidate']}")
        output.notice(
            f"review or edit it, then: zmem promote --id {done['id']} --confirm --install-approved"
        )
    else:
        output.emit_document(done["preview"])
        output.notice("a preview; --confirm writes it as a review candidate")


@cli.command()
@click.option("--session", "session_id", required=True, help="The host's session id.")
@click.option("--transcript", default=None, metavar="PATH",
              help="A Claude Code transcript, for tool calls the user rejected.")  # fmt: skip
@click.option("--since-minutes", type=click.IntRange(1, 7 * 24 * 60), default=60,
              show_default=True, help="How far back to look.")  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="Print {count, items} as JSON.")
@click.pass_obj
def failures(obj, session_id, transcript, since_minutes, as_json):
    """A session's failed tool calls (from the ops ring: its recent tool calls, which the
    PostToolUse hook keeps) and the tool
    calls the user rejected (from a Claude Code transcript): what the Stop / SubagentStop
    reflection asks about. Read-only; never opens the store.
    """
    from zmem.hosts import reflect

    if transcript is not None and not Path(transcript).expanduser().is_file():
        raise UsageError(f"--transcript {transcript}: no such file")
    data_dir = obj.settings().data_dir
    path = str(Path(transcript).expanduser()) if transcript else None
    items = reflect.session_failures(data_dir, session_id, path, time.time() - since_minutes * 60)
    if as_json:
        output.emit_json({"session": session_id, "count": len(items), "items": items})
        return
    if not items:
        output.emit(f"[zmem] no failures in session {session_id} in the last {since_minutes} min")
        return
    for f in items:
        stamp = time.strftime("%H:%M:%S", time.localtime(f["at"]))
        what = "rejected by the user" if f["kind"] == "user_rejection" else f"{f['tool']} failed"
        output.emit(f"{stamp}  {what}: {f['detail']}")
