"""CLI commands for episodes: episode-open, episode-add, episode-close and episode-list."""

from __future__ import annotations

import click

from zmem.cli import output, scope
from zmem.cli.app import cli


@cli.command("episode-open")
@click.option("--namespace", default=None, help=scope.ONE_HELP)
@click.option("--json", "as_json", is_flag=True, help="Print the result as one JSON document.")
@click.pass_obj
def episode_open(obj, namespace, as_json):
    """Open an episode, the container of one working session's memories; prints its id."""
    episode = obj.store(create=True).episode_open(scope.for_one(namespace))
    if as_json:
        output.emit_json(episode.to_dict())
    else:
        output.emit(episode.id)


@cli.command("episode-add")
@click.option("--episode", "episode_id", required=True, help="The open episode's id.")
@click.option("--memory", "memory_id", required=True, help="A live memory's id (or prefix).")
@click.option("--json", "as_json", is_flag=True, help="Print the result as one JSON document.")
@click.pass_obj
def episode_add(obj, episode_id, memory_id, as_json):
    """Attach a live memory to an open episode (idempotent; memberships are never removed)."""
    done = obj.store().episode_add(episode_id, memory_id)
    if as_json:
        output.emit_json(done)
    else:
        verb = "added" if done["added"] else "already in"
        output.emit(f"{verb}: {done['memory']} -> episode {done['episode']}")


@cli.command("episode-close")
@click.option("--episode", "episode_id", required=True, help="The open episode's id.")
@click.option("--summary", is_flag=True, help="Also write one extractive summary memory.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as one JSON document.")
@click.pass_obj
def episode_close(obj, episode_id, summary, as_json):
    """Close an episode (once): records its token count over the live members and, with
    --summary, writes a memory quoting their first sentences (auto capture mode, redacted)."""
    done = obj.store().episode_close(episode_id, summary=summary)
    if as_json:
        output.emit_json(done)
    else:
        extra = f", summary {done['summary_memory_id']}" if done["summary_memory_id"] else ""
        output.emit(
            f"closed episode {done['id']}: {done['members']} live member(s), "
            f"{done['token_count']} tokens{extra}"
        )


@cli.command("episode-list")
@click.option("--namespace", default=None, help=scope.READ_HELP)
@click.option("--all-namespaces", is_flag=True, help=scope.ALL_HELP)
@click.option("--json", "as_json", is_flag=True, help="Print the result as one JSON document.")
@click.pass_obj
def episode_list(obj, namespace, all_namespaces, as_json):
    """List episodes, newest first, with their member counts."""
    namespace, _ = scope.for_read(namespace, all_namespaces)
    rows = obj.store().episode_list(namespace)
    if as_json:
        output.emit_json(rows)
        return
    for e in rows:
        state = f"closed {e['ended_at']}" if e["ended_at"] else "open"
        output.emit(f"{e['id']}  {e['namespace']}  {e['started_at']}  {state}  {e['members']}")
