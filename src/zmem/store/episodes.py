"""Episodes as MemoryStore methods: a container for the memories of one working session
(open, add a live memory, close once with its token count and an optional extractive summary
row written through the standard add path, list newest first). Memberships are append-only."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import apsw

from zmem import config
from zmem.capture.namespaces import validate_namespace
from zmem.db import graph, memories
from zmem.db.connect import read_snapshot, transaction
from zmem.errors import Refusal
from zmem.models import MAX_CONTENT_CHARS, Episode, Hit, WriteResult
from zmem.retrieval.render import estimate_tokens, row_line
from zmem.tokens import first_sentence

SUMMARY_SENTENCES = 12  # first sentences an episode summary quotes


def row_token_cost(m: Any) -> int:
    """What a row costs the injection budget: its rendered line, estimated (render.py)."""
    hit = Hit(m, 0.0, 0.0, 0.0, {}, m.confidence, False, False, "namespace")
    return estimate_tokens(row_line(hit, True))


class Episodes:
    """Mixed into MemoryStore, which provides the connection, id lookup and `add`."""

    _conn: apsw.Connection
    _lookup_id: Callable[[str], str | None]
    add: Callable[..., WriteResult]

    def episode_open(self, namespace: str) -> Episode:
        validate_namespace(namespace)
        with transaction(self._conn):
            episode_id = graph.open_episode(self._conn, namespace, config.now_iso())
            episode = graph.get_episode(self._conn, episode_id)
        assert episode is not None
        return episode

    def _episode(self, episode_id: str) -> Episode:
        episode = graph.get_episode(self._conn, episode_id)
        if episode is None:
            raise Refusal(f"no episode {episode_id}")
        return episode

    def episode_add(self, episode_id: str, memory_id: str) -> dict[str, Any]:
        """Attach a LIVE memory to an OPEN episode; re-adding a pair changes nothing."""
        full = self._lookup_id(memory_id)
        with transaction(self._conn):
            episode = self._episode(episode_id)
            if episode.ended_at is not None:
                raise Refusal(f"episode {episode_id} was closed at {episode.ended_at}")
            m = memories.get(self._conn, full) if full else None
            if m is None:
                raise Refusal(f"cannot add {memory_id} to an episode: no such memory")
            if not m.live:
                raise Refusal(f"cannot add {memory_id} to an episode: it is tombstoned")
            added = graph.add_episode_member(self._conn, episode.id, m.id, config.now_iso())
        return {"episode": episode.id, "memory": m.id, "added": added}

    def episode_close(self, episode_id: str, *, summary: bool = False) -> dict[str, Any]:
        """Close once: token_count over the live members; with `summary`, one row quoting their
        first sentences, written through the add path in auto capture mode (redaction runs)."""
        with read_snapshot(self._conn):
            episode = self._episode(episode_id)
            live = [
                m
                for m in memories.get_many(
                    self._conn, graph.episode_member_ids(self._conn, episode.id)
                )
                if m.live
            ]
        if episode.ended_at is not None:
            raise Refusal(f"episode {episode_id} was already closed at {episode.ended_at}")
        summary_id = None
        if summary and live:
            lines = [f"Episode {episode.started_at[:10]} in {episode.namespace}:"]
            lines += [f"- {first_sentence(m.content)}" for m in live[:SUMMARY_SENTENCES]]
            text = "\n".join(lines)[:MAX_CONTENT_CHARS]
            summary_id = self.add(
                text, namespace=episode.namespace, type="fact", signal="none",
                source_ref=f"session:episode-{episode.id}", capture_mode="auto",
            ).id  # fmt: skip
        tokens = sum(row_token_cost(m) for m in live)
        with transaction(self._conn):
            if not graph.close_episode(
                self._conn, episode.id, config.now_iso(), tokens, summary_id
            ):
                raise Refusal(f"episode {episode_id} was closed meanwhile")
            closed = graph.get_episode(self._conn, episode.id)
        assert closed is not None
        return {**closed.to_dict(), "members": len(live)}

    def episode_list(self, namespace: str | None = None) -> list[dict[str, Any]]:
        with read_snapshot(self._conn):
            found = graph.list_episodes(self._conn, namespace)
        return [{**e.to_dict(), "members": n} for e, n in found]
