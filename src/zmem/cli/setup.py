"""`zmem setup HOST`: wire this install into Claude Code, Codex, ZCode, Hermes or an MCP client
in one idempotent step (hosts.setup plans and writes the files), then run the doctor's checks
and show the ones that need attention."""

from __future__ import annotations

import os

import click

from zmem.cli import cli, output


@cli.command()
@click.argument("host", type=click.Choice(["claude", "codex", "zcode", "hermes", "mcp"]))
@click.option("--dry-run", is_flag=True, help="Show what would change; write nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print the plan and the checks as JSON.")
@click.pass_obj
def setup(obj, host, dry_run, as_json):
    """Connect an agent host to ZMem: its hooks (or MCP server) point at this install.

    \b
    claude  hooks in ~/.claude/settings.json
    codex   hooks in $CODEX_HOME/hooks.json (default ~/.codex); trust them in /hooks
    zcode   hooks in ~/.zcode/settings.json (or $ZMEM_ZCODE_SETTINGS)
    hermes  the Hermes memory provider and hooks plugins, activated (zmem hermes-install)
    mcp     the MCP server in ~/.claude.json and $CODEX_HOME/config.toml

    Running it again changes nothing; entries ZMem wrote before are replaced, everything else
    in the file is kept, and a file it changes is first copied to <file>.zmem-backup. The
    store the hooks use is this command's ($ZMEM_DATA / $ZMEM_STORE are carried into them).
    """
    from zmem import doctor
    from zmem.hosts import setup as wiring

    settings = obj.settings()
    env = dict(os.environ)
    if obj.store_path:  # --store: the hooks must use the same file
        env["ZMEM_STORE"] = str(settings.store_path)
    if host == "hermes":
        changes, written = _hermes(dry_run)
    else:
        changes = wiring.plan(host, env)
        written = [] if dry_run else wiring.apply(changes)
    report = doctor.run(project=os.getcwd(), store_path=obj.store_path)
    attention = [c for c in report["checks"] if c["status"] in ("warn", "fail")]
    if as_json:
        output.emit_json({
            "host": host, "dry_run": dry_run,
            "files": [{"path": str(c.path), "changed": c.changed, "entries": c.summary}
                      for c in changes],
            "written": [str(p) for p in written],
            "checks": attention,
        })  # fmt: skip
        return
    for c in changes:
        state = "unchanged" if not c.changed else ("would change" if dry_run else "updated")
        output.emit(f"{c.path}: {state} ({', '.join(c.summary)})")
    if host == "codex" and written:
        output.emit("Codex runs a changed hook only after you trust it: open /hooks in codex.")
    if not dry_run:
        output.emit(f"done: {host} uses the store {settings.store_path}")
    for c in attention:
        output.emit(f"  {c['status']}: {c['check']}: {c['detail']}")


def _hermes(dry_run: bool):
    from zmem.hermes_provider import install
    from zmem.hosts.setup import Change

    plan = install.plan(None, activate=True, hermes_bin=None)
    step = Change(plan.plugins_dir, None, "installed", ["zmem", "zmem_hooks", "activated"])
    return [step], ([] if dry_run else install.install(plan))
