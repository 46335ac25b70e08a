"""The `zmem` command line as click builds it: the root group (its commands imported when asked
for), the store opened on first use, and every failure as one stable stderr line with the exit
code its class carries (1 missing, 2 refusal/usage, 3 busy, 4 a bug). zmem.cli.main reaches it
after the answers that need none of it."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import apsw
import click

from zmem import __version__, config
from zmem.cli import output, terminal
from zmem.embedding import announce
from zmem.errors import ZMemError
from zmem.outputs import MACHINE_ERRNOS

if TYPE_CHECKING:
    from zmem.store import MemoryStore

# Exit codes (docs/cli.md): 0 ok, 1 target missing, 2 usage, refusal or unusable store, 3 store
# busy; ZMemError subclasses carry 1-3. 4 is what no error class carries: a bug.
INTERNAL_ERROR = 4


class StoreContext:
    """Opens the store on first use, so `--help` and usage errors never touch the file."""

    def __init__(self, store_path: str | None, store: MemoryStore | None = None):
        self.store_path = store_path
        # A store opened by someone else (the resident process serving a CLI read): used,
        # never closed here.
        self._store: MemoryStore | None = store
        self._owned = store is None
        self._settings: config.Settings | None = None

    def settings(self) -> config.Settings:
        """The settings for this invocation (the global --store applied), their warnings
        printed once: for commands that work on the store's files rather than open it."""
        if self._settings is None:
            self._settings = config.load_settings(store_path=self.store_path)
            for line in self._settings.warnings:
                output.warn(line)
        return self._settings

    def store(self, *, create: bool = False) -> MemoryStore:
        """The store; only a command that stores something (add) may create it: a read of a
        store that does not exist says so instead of leaving an empty one behind."""
        if self._store is None:
            from zmem.store import MemoryStore

            self._store = MemoryStore.open(settings=self.settings(), create=create)
            for line in self._store.warnings:
                output.notice(line)
        return self._store

    def store_hint(self) -> str | None:
        """The store a failure message names: the open one, else the one that was asked for."""
        return str(self._store.path) if self._store is not None else self.store_path

    def close(self) -> None:
        if self._store is not None and self._owned:
            self._store.close()


class ZMemCommand(click.Command):
    def invoke(self, ctx: click.Context):  # type: ignore[override]
        # What the parsed options say wins over the early reading of the words.
        fmt = ctx.params.get("fmt")
        output.json_errors(bool(ctx.params.get("as_json")) or fmt in ("json", "both"))
        return super().invoke(ctx)


class ZMemGroup(click.Group):
    command_class = ZMemCommand
    # Command name -> the module of zmem.cli that defines it, imported when the command is
    # asked for: a command pays for its own imports, not every command's (`zmem --version`,
    # `zmem sync`). --help and completion import them all. tests/test_cli_language.py holds
    # this map to what the modules register.
    lazy: dict[str, str] = {}

    def list_commands(self, ctx: click.Context) -> list[str]:
        for module in sorted(set(self.lazy.values())):
            _load(module)
        return super().list_commands(ctx)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in self.lazy:
            _load(self.lazy[cmd_name])
        return super().get_command(ctx, cmd_name)

    def make_context(self, info_name, args, parent=None, **extra):  # type: ignore[override]
        if parent is None:
            output.json_errors(output.asks_json(args))
        # Errors in the group's own options, in the same one-line shape as everything else.
        try:
            return super().make_context(info_name, args, parent, **extra)
        except click.UsageError as exc:
            output.error(f"{exc.format_message()} (see 'zmem --help')", exc.exit_code)
            sys.exit(exc.exit_code)
        except BrokenPipeError:  # `zmem --help | head`
            output.reader_gone()
            sys.exit(0)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # Each command's whole first sentence, wrapped, where click would cut it at the
        # terminal's width with "...".
        rows = []
        for name in self.list_commands(ctx):
            cmd = self.get_command(ctx, name)
            if cmd is not None and not cmd.hidden:
                from zmem.tokens import first_sentence

                # The first paragraph only: click's \b markers and lists follow it.
                para = " ".join((cmd.short_help or cmd.help or "").split("\n\n")[0].split())
                rows.append((name, first_sentence(para)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)

    def format_epilog(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # The root page ends with ZMem's own words; a command's page glosses each where it
        # first uses it. Subgroups (hub) keep click's plain epilog.
        if ctx.parent is None:
            from zmem.cli.words import GLOSSARY

            with formatter.section("Words"):
                formatter.write_dl(sorted(GLOSSARY.items()))
        super().format_epilog(ctx, formatter)

    def invoke(self, ctx: click.Context):  # type: ignore[override]
        # One stable stderr line for every failure, usage errors included: hosts log stderr
        # line by line, and a multi-line usage dump reads as several errors.
        try:
            return super().invoke(ctx)
        except ZMemError as exc:
            output.error(str(exc), exc.exit_code)
            ctx.exit(exc.exit_code)
        except apsw.Error as exc:
            # A damaged file, a lock held past the busy timeout, a full disk: one line naming
            # the problem and the fix, never the driver's traceback.
            from zmem.store import failures

            failure = failures.explain(exc, ctx.obj.store_hint() if ctx.obj else None)
            output.error(str(failure), failure.exit_code)
            ctx.exit(failure.exit_code)
        except click.UsageError as exc:
            where = exc.ctx.command_path if exc.ctx is not None else ctx.command_path
            output.error(f"{exc.format_message()} (see '{where} --help')", exc.exit_code)
            ctx.exit(exc.exit_code)
        except (click.exceptions.Exit, click.exceptions.Abort, click.ClickException):
            raise
        except terminal.NeedsPerson:
            raise  # the resident process hands the command back to the person's own process
        except BrokenPipeError:
            # `zmem entity-list | head`: the reader has what it wanted. Not an error.
            output.reader_gone()
            ctx.exit(0)
        except Exception as exc:
            if config.debug_enabled():
                raise
            if isinstance(exc, OSError) and exc.errno in MACHINE_ERRNOS:
                # The machine said no (a full disk, a read-only or missing place, no
                # permission): the user's to fix, not a bug in zmem.
                where = f" ({exc.filename})" if exc.filename else ""
                output.error(f"the system refused: {exc.strerror or exc}{where}", 2)
                ctx.exit(2)
            output.error(
                f"internal error ({type(exc).__name__}: {exc}); this is a bug in zmem: "
                "ZMEM_DEBUG=1 shows the traceback",
                INTERNAL_ERROR,
            )
            ctx.exit(INTERNAL_ERROR)


@click.group(cls=ZMemGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--store",
    "store_path",
    metavar="PATH",
    default=None,
    help="Store file (default: $ZMEM_STORE, else $ZMEM_DATA/store.sqlite, "
    "else ~/.zmem/store.sqlite).",
)
@click.version_option(__version__, prog_name="zmem")
@click.pass_context
def cli(ctx: click.Context, store_path: str | None) -> None:
    """ZMem: long-term memory for coding agents, in one local SQLite file.

    Memories live in namespaces: project:<repo> for one project (inside a git checkout every
    command means the checkout's unless told otherwise), user:global for what holds in every
    project. Capture lessons, facts, conventions, preferences, decisions and constraints with `add`;
    bring back what matters with `recall` (or `search`, `recent`); revise memories append-only
    with `update`; retire them with `invalidate` (a reason is required) or `supersede`; inspect
    them with `get`, `list`, `stats`, `links` and `entity-list`.

    Exit codes: 0 success, 1 target missing, 2 usage error or refusal (nothing written), 3 store
    busy (nothing written: run it again), 4 internal error (a bug).
    """
    if not isinstance(ctx.obj, StoreContext):  # the resident process passes its own
        ctx.obj = StoreContext(store_path)
    ctx.call_on_close(ctx.obj.close)
    if _announce_build not in announce.on_build:
        announce.on_build.append(_announce_build)


def _announce_build(target: Path) -> None:
    output.notice(
        f"building the MiniLM model from its pinned weights into {target.parent} "
        "(a few seconds, once: every store shares it)"
    )


def run(args: list[str], prog: str, served_here: list[str]) -> None:
    """The whole command line, in this process. `served_here`: a warm read no resident process
    answered (zmem.cli.main tried first): one is started afterwards, warm for the next."""
    if args and args[0] not in _QUIET_COMMANDS and "--help" not in args:
        _dead_hooks_notice()
    try:
        cli.main(args=args, prog_name=prog)
    finally:
        if served_here:
            from zmem.resident import client

            client.spawn_daemon(config.default_data_dir())


# Commands a host runs (never a person at a terminal): no notice on their stderr. doctor
# reports dead hooks as one of its checks (and writes nothing); setup is the repair itself.
_QUIET_COMMANDS = ("hook", "mcp", "ui", "hermes-install", "doctor", "setup")
_CHECKED = ".hooks-checked"  # in the data dir: when the wiring was last looked at


def _dead_hooks_notice() -> None:
    """Once a day, from any install: hooks wired to an interpreter that no longer exists (ZMem
    uninstalled or moved without `setup --remove`) are said, with the repair. A host runs such
    a hook on every event and shows nothing."""
    import os
    import time

    data = config.default_data_dir()
    marker = data / _CHECKED
    try:
        if time.time() - marker.stat().st_mtime < 86_400:
            return
    except OSError:
        pass
    try:
        from zmem.installation import dangling

        found = dangling(os.environ, Path(os.environ.get("HOME") or Path.home()))
        if data.is_dir():
            marker.touch()
    except Exception:  # a notice must never fail a command
        return
    for host, path, gone in found:
        output.notice(
            f"{path}: the {host} hooks run {gone}, which no longer exists (ZMem was removed or "
            f"moved): `zmem setup {host}` wires them to this install, `zmem setup --remove "
            "--all` takes them out"
        )


def _load(module: str) -> None:
    """Import one command module of zmem.cli: its decorators register its commands on `cli`."""
    import importlib

    importlib.import_module(f"zmem.cli.{module}")


ZMemGroup.lazy.update({
    "add": "writes", "backup": "maintenance", "completion": "completion",
    "consolidate": "maintenance",
    "contradict": "reads", "corrections": "hooks", "doctor": "hooks", "entity-list": "reads",
    "entity-merge": "reads", "episode-add": "episodes", "episode-close": "episodes",
    "episode-list": "episodes", "episode-open": "episodes", "export-jsonl": "sync",
    "export-pack": "sync", "failures": "learning", "feedback": "writes", "get": "reads",
    "hermes-install": "hooks", "hook": "hooks", "hub": "hub", "ingest-jsonl": "sync",
    "invalidate": "writes", "links": "reads", "list": "reads", "mcp": "mcp", "model": "model",
    "organize": "maintenance", "promote": "learning", "queue-clear": "hooks",
    "queue-list": "hooks", "recall": "recall", "recent": "recall", "reembed": "maintenance",
    "rekey-namespace": "maintenance", "resolve": "reviews", "restore": "maintenance",
    "review": "reviews", "search": "recall",
    "setup": "setup", "stats": "reads", "supersede": "writes", "sweep": "maintenance",
    "sync": "hub", "tune-weights": "evaluate", "ui": "ui", "update": "writes", "where": "reads",
})  # fmt: skip
