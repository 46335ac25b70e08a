"""The team hub converges (issue 32), against a real PostgreSQL server: three data dirs standing
for three machines make random adds, updates, invalidations, supersedes, links and episodes and
sync in random orders (hypothesis); after a last round every machine holds the same rows,
lineage, links and episodes, and the hub holds each object once. And a sync killed with SIGKILL
at many points (mid-push, mid-pull, between batches, and at random instants) ends, once run
again, exactly as an uninterrupted one: the hub's objects and the puller's rows are the same."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hub_fixtures import NS, Machine
from zmem import MemoryStore, config
from zmem.cli import cli  # noqa: F401  (the CLI the machines drive)

WORDS = ["pytest", "ruff", "docker", "alembic", "kubectl", "terraform", "make", "uv", "npm",
         "cargo", "redis", "postgres", "nginx", "celery", "sentry"]  # fmt: skip


def _text(rnd: random.Random) -> str:
    a, b = rnd.sample(WORDS, 2)
    return f"Run {a} before {b} in the widget service ({rnd.randint(1, 40)})."


def open_store(m: Machine) -> MemoryStore:
    env = {**os.environ, "ZMEM_DATA": str(m.data), "ZMEM_STORE": str(m.store)}
    return MemoryStore.open(settings=config.load_settings(env=env))


def machine_state(m: Machine) -> dict:
    with open_store(m) as s:
        rows = s.list(namespace=NS, include_superseded=True, limit=1000)
        ids = [r.id for r in rows]
        links = set()
        for i in ids:
            links |= {(k.src, k.dst, k.relation) for k in s.links(i)}
        episodes = {(e["id"], e["ended_at"] is not None, e["members"])
                        for e in s.episode_list(namespace=NS)}  # fmt: skip
    return {
        "rows": {r.id: (r.content, r.live, r.update_of, r.type) for r in rows},
        "links": links,
        "episodes": episodes,
    }


class Fleet:
    """Three machines on one hub, driven through the library (the CLI's own calls)."""

    def __init__(self, base: Path, server) -> None:
        self.machines = [Machine(base, server, role) for role in ("alice", "bob", "alice")]
        for m in self.machines:
            m.ok("hub", "join", "--url", m.url, "--namespace", NS)

    def live_ids(self, m: Machine) -> list[str]:
        return sorted(i for i, r in m.rows().items() if r[1])

    def act(self, op: tuple, rnd: random.Random) -> None:
        kind, who = op[0], self.machines[op[1]]
        if kind == "sync":
            who.sync()
            return
        if kind == "forget":  # a data dir restored without its hub bookkeeping: a full re-push
            (who.data / "hub" / "state.sqlite").unlink(missing_ok=True)
            return
        with open_store(who) as s:
            live = [m.id for m in s.list(namespace=NS, limit=1000)]
            if kind == "add" or not live:
                s.add(_text(rnd), namespace=NS, type="lesson", signal="user")
            elif kind == "update":
                s.update(rnd.choice(live), content=_text(rnd))
            elif kind == "invalidate":
                s.invalidate(rnd.choice(live), "no longer true")
            elif kind == "supersede":
                s.supersede(rnd.choice(live), "retired")
            elif kind == "link" and len(live) >= 2:
                x, y = rnd.sample(live, 2)
                s.add_link(x, y, "supports" if rnd.random() < 0.5 else "related",
                           reason="they go together")  # fmt: skip
            elif kind == "episode":
                episode = s.episode_open(NS)
                s.episode_add(episode.id, rnd.choice(live))
                if rnd.random() < 0.5:
                    s.episode_close(episode.id)


OPS = st.lists(
    st.tuples(
        st.sampled_from(["add", "add", "update", "invalidate", "supersede", "link", "episode",
                         "sync", "sync", "forget"]),
        st.integers(0, 2),
    ),
    min_size=4,
    max_size=24,
)  # fmt: skip


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(ops=OPS, seed=st.integers(0, 2**16), order=st.permutations([0, 1, 2]))
def test_three_machines_converge_whatever_the_order(
    hub_factory, tmp_path_factory, ops, seed, order
):
    server = hub_factory()
    fleet = Fleet(tmp_path_factory.mktemp("fleet"), server)
    rnd = random.Random(seed)
    for op in ops:
        fleet.act(op, rnd)
    for _ in range(2):  # a last round in a random order: everyone has everything
        for i in order:
            fleet.machines[i].sync()
    states = [machine_state(m) for m in fleet.machines]
    assert states[0] == states[1] == states[2]
    with psycopg.connect(server.url()) as conn:
        hub_rows = conn.execute("SELECT kind, key FROM zmem_hub.record").fetchall()
        hub_live = dict(conn.execute(
            "SELECT key, body->>'superseded_at' IS NULL FROM zmem_hub.record WHERE kind = 'memory'"
        ).fetchall())  # fmt: skip
    assert len(hub_rows) == len(set(hub_rows))
    # The hub says what every machine says: the same rows, live or retired alike.
    assert hub_live == {i: r[1] for i, r in states[0]["rows"].items()}
    kinds = {}
    for kind, key in hub_rows:
        kinds.setdefault(kind, set()).add(key)
    assert kinds.get("memory", set()) == set(states[0]["rows"])
    assert {tuple(k.split(">")) for k in kinds.get("link", set())} == states[0]["links"]


# ---- kill -9 ------------------------------------------------------------------------------------


def _sync_process(m: Machine, *, kill_at: str | None = None, batch: int = 3):
    env = {k: v for k, v in os.environ.items() if not k.startswith("ZMEM_")}
    env.update(ZMEM_DATA=str(m.data), ZMEM_STORE=str(m.store), ZMEM_EMBED_PROFILE="fake",
               ZMEM_HOOK_DAEMON="0", ZMEM_SESSION_UPKEEP="0")  # fmt: skip
    if kill_at:
        env["ZMEM_TEST_SYNC_KILL"] = kill_at
    return subprocess.Popen(
        [sys.executable, "-m", "zmem", "sync", "--batch", str(batch), "--json"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip


def _hub_objects(server) -> dict:
    with psycopg.connect(server.url()) as conn:
        rows = conn.execute("SELECT kind, key, body FROM zmem_hub.record").fetchall()
    return {(kind, key): json.dumps(body, sort_keys=True) for kind, key, body in rows}


def _seed(m: Machine) -> None:
    ids = [m.add(f"Lesson {i}: run step {i} of the widget release with care.") for i in range(14)]
    for x, y in zip(ids, ids[1:7], strict=False):
        m.ok("links", "--add", "--id", x, "--id", y, "--relation", "related")
    for i in ids[8:11]:
        m.ok("invalidate", "--id", i, "--reason", "replaced by the new release process")
    episode = json.loads(m.ok("episode-open", "--namespace", NS, "--json").stdout)["id"]
    for i in ids[:3]:
        m.ok("episode-add", "--episode", episode, "--memory", i)
    m.ok("episode-close", "--episode", episode)


def _run(server, base: Path, source: Path, kill_push: str | None, kill_pull: str | None):
    """A pushes a copy of the seeded store, B pulls; each sync killed once where asked, then run
    again to the end. Returns (hub objects, B's state)."""
    base.mkdir()
    a, b = Machine(base, server, "alice"), Machine(base, server, "bob")
    a.data.mkdir(parents=True)
    shutil.copy2(source, a.store)
    for m in (a, b):
        m.ok("hub", "join", "--url", m.url, "--namespace", NS)
    for m, kill in ((a, kill_push), (b, kill_pull)):
        if kill:
            proc = _sync_process(m, kill_at=kill)
            proc.wait(timeout=120)
            assert proc.returncode == -signal.SIGKILL, proc.stderr.read().decode()[-2000:]
        done = _sync_process(m)
        out, err = done.communicate(timeout=120)
        assert done.returncode == 0, err.decode()[-2000:]
    return _hub_objects(server), machine_state(b)


@pytest.fixture
def seeded(hub, tmp_path) -> Path:
    m = Machine(tmp_path, hub, "alice")
    _seed(m)
    return m.store


KILLS = [
    ("push-mid:1", None), ("push-mid:4", None), ("push:1", None), ("push:3", None),
    ("push:6", None), (None, "pull-mid:2"), (None, "pull:1"), (None, "pull:4"),
    ("push:2", "pull:3"),
]  # fmt: skip


def test_a_sync_killed_anywhere_ends_as_an_uninterrupted_one(hub_factory, seeded, tmp_path):
    server = hub_factory()
    reference = _run(server, tmp_path / "reference", seeded, None, None)
    assert reference[0] and reference[1]["rows"]
    for n, (push, pull) in enumerate(KILLS):
        server = hub_factory()
        got = _run(server, tmp_path / f"killed-{n}", seeded, push, pull)
        assert got == reference, (push, pull)


def test_a_sync_killed_at_random_instants_ends_as_an_uninterrupted_one(
    hub_factory, seeded, tmp_path
):
    rnd = random.Random(20261206)
    bigger = Machine(tmp_path, hub_factory(), "alice")
    bigger.data.mkdir(parents=True)
    shutil.copy2(seeded, bigger.store)
    for i in range(40):  # enough that a sync of one object a batch takes a while
        bigger.add(f"Release note {i}: the widget API keeps version {i} compatible.")
    server = hub_factory()
    reference = _run(server, tmp_path / "reference", bigger.store, None, None)
    killed = 0
    for n in range(4):
        server = hub_factory()
        base = tmp_path / f"random-{n}"
        base.mkdir()
        a, b = Machine(base, server, "alice"), Machine(base, server, "bob")
        a.data.mkdir(parents=True)
        shutil.copy2(bigger.store, a.store)
        for m in (a, b):
            m.ok("hub", "join", "--url", m.url, "--namespace", NS)
        for m in (a, b):
            for _ in range(6):  # killed at a random instant until a run gets to the end
                proc = _sync_process(m, batch=1)
                time.sleep(rnd.uniform(0.3, 1.2))
                if proc.poll() is None:
                    proc.send_signal(signal.SIGKILL)
                code = proc.wait(timeout=60)
                if code != -signal.SIGKILL:
                    assert code == 0, proc.stderr.read().decode()[-2000:]
                    break
                killed += 1
            done = _sync_process(m)
            assert done.wait(timeout=120) == 0, done.stderr.read().decode()[-2000:]
        assert (_hub_objects(server), machine_state(b)) == reference
    assert killed >= 8  # most of the eight machine syncs were cut short, some several times
