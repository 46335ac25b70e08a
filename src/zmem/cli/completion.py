"""`zmem completion SHELL`: the script that makes bash, zsh or fish complete zmem's commands,
options and choices on Tab. The script calls zmem back (click's protocol, through the
_ZMEM_COMPLETE variable), so completion always matches the install that answers."""

from __future__ import annotations

import click

from zmem.cli import output
from zmem.cli.app import cli

SHELLS = ("bash", "zsh", "fish")


@cli.command()
@click.argument("shell", type=click.Choice(SHELLS), metavar="SHELL")
def completion(shell: str) -> None:
    """Print the Tab-completion script for SHELL (bash, zsh or fish).

    \b
    bash: add  eval "$(zmem completion bash)"  to ~/.bashrc
    zsh:  add  eval "$(zmem completion zsh)"   to ~/.zshrc
    fish: zmem completion fish > ~/.config/fish/completions/zmem.fish

    The script asks zmem itself what completes (commands, options, hosts, choices), so it
    follows upgrades; bash needs version 4.4 or later.
    """
    from click.shell_completion import get_completion_class

    maker = get_completion_class(shell)
    assert maker is not None  # the choice above names only shells click knows
    # The variable click's entry point reads: _<PROG>_COMPLETE for the `zmem` script.
    output.emit(maker(cli, {}, "zmem", "_ZMEM_COMPLETE").source().rstrip("\n"))
