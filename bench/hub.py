"""The team hub (issue 32) on this machine, against a real PostgreSQL 15 on loopback that the
bench starts itself (tests/pg_server.py):

- the initial sync of N rows: one machine pushes them (rows/s), another pulls them (rows/s,
  the pulling store embedding them: the fake profile, and MiniLM at --minilm-rows);
- a sync with nothing new: the library call and the whole `zmem sync` process (target: 100 ms);
- 20 machines syncing at once against one hub, each with rows of its own (rows/s, p50/p95);
- the warm prompt hook while the hub is down, 1,000 prompts a side, alternated with a data dir
  that shares nothing (a SessionStart every 50 prompts launches the upkeep's sync attempt);
- what the hub costs: rows and bytes per object.

    .venv/bin/python bench/hub.py [--rows 100000] [--minilm-rows 10000] [--machines 20]
        [--machine-rows 500] [--hooks 1000] [--src DIR] [--skip initial,minilm,fleet,hooks]

--src runs every zmem process on another tree's src/ (a worktree of the previous main), so the
two can be measured side by side on one machine.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))

import pg_server  # noqa: E402  (the test suite's own server, started the same way)

NS = "project:github.com/acme/widget"
ZMEM = str(Path(sys.executable).with_name("zmem"))
WORDS = ("deploy build cache lint test migrate schema index query token queue worker retry "
         "timeout backoff release branch merge rebase review config secret vault docker helm "
         "chart probe metric alert trace span log rotate").split()  # fmt: skip


def corpus(path: Path, rows: int, seed: int, namespace: str = NS) -> None:
    """A sync file of `rows` distinct lessons (numbers make each one its own fact)."""
    rnd = random.Random(seed)
    with path.open("w", encoding="utf-8") as out:
        for i in range(rows):
            words = " ".join(rnd.choice(WORDS) for _ in range(9))
            out.write(json.dumps({
                "kind": "memory", "id": f"hb{seed:04d}-{i:07d}", "namespace": namespace,
                "type": "lesson", "signal": "test", "confidence": 0.9,
                "content": f"Lesson {i}: {words} (build {rnd.randint(1, 10**9)}).",
                "ingestion_ts": "2026-11-01T00:00:00Z", "valid_from": "2026-11-01T00:00:00Z",
            }) + "\n")  # fmt: skip


SRC: list[str] = []  # --src: the tree whose zmem the processes run


def env_for(data: Path, profile: str, pgpass: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ZMEM_", "PG"))}
    if SRC:
        env["PYTHONPATH"] = SRC[0]
    env.update(ZMEM_DATA=str(data), ZMEM_STORE=str(data / "store.sqlite"),
               ZMEM_EMBED_PROFILE=profile, ZMEM_HOOK_DAEMON="0", ZMEM_SESSION_UPKEEP="0",
               PGPASSFILE=str(pgpass))  # fmt: skip
    env.update(extra)
    return env


def zmem(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    done = subprocess.run([ZMEM, *args], env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"zmem {' '.join(args)} failed: {done.stderr[-2000:]}")
    return done


def store_with(work: Path, name: str, rows: int, seed: int, profile: str, pgpass: Path) -> Path:
    """A data dir whose store holds `rows` lessons in NS, built through bulk ingest (cached)."""
    # Built by whichever tree runs first: a store's format is the same (schema v13) in both.
    cache = Path.home() / ".cache" / "zmem-bench" / f"hub-{profile}-{rows}-{seed}.sqlite"
    data = work / name
    data.mkdir(parents=True)
    if not cache.exists():
        cache.parent.mkdir(parents=True, exist_ok=True)
        build = work / f"build-{name}"
        build.mkdir()
        source = work / f"{name}.jsonl"
        corpus(source, rows, seed)
        t0 = time.perf_counter()
        zmem(env_for(build, profile, pgpass), "ingest-jsonl", "--in", str(source))
        print(f"built {rows} rows ({profile}) in {time.perf_counter() - t0:.0f} s", flush=True)
        shutil.copy2(build / "store.sqlite", cache)
    shutil.copy2(cache, data / "store.sqlite")
    return data


def timed(env: dict[str, str], *args: str) -> tuple[float, dict]:
    t0 = time.perf_counter()
    done = zmem(env, *args)
    return time.perf_counter() - t0, json.loads(done.stdout)


def library_noop(env: dict[str, str], runs: int = 15) -> float:
    """A sync with nothing new, timed inside a running process (the store already open)."""
    code = (
        "import time, statistics, json\n"
        "from zmem import MemoryStore\n"
        "s = MemoryStore.open()\n"
        "s.hub_sync()\n"
        "xs = []\n"
        f"for _ in range({runs}):\n"
        "    t0 = time.perf_counter(); r = s.hub_sync(); xs.append(time.perf_counter() - t0)\n"
        "    assert r.hub_changed == 0 and not any(r.pulled.values()), r\n"
        "print(statistics.median(xs) * 1000)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"no-op sync failed: {done.stderr[-2000:]}")
    return float(done.stdout.strip())


def initial(pg, work: Path, rows: int, profile: str, pgpass: Path, seed: int) -> dict:
    url = {r: pg.url(user=r, password=None) for r in ("alice", "bob")}
    a = store_with(work, f"a-{profile}-{rows}", rows, seed, "fake", pgpass)
    b = work / f"b-{profile}-{rows}"
    b.mkdir()
    env_a, env_b = env_for(a, "fake", pgpass), env_for(b, profile, pgpass)
    zmem(env_a, "hub", "join", "--url", url["alice"], "--namespace", NS)
    zmem(env_b, "hub", "join", "--url", url["bob"], "--namespace", NS)
    push_s, push = timed(env_a, "sync", "--json")
    pull_s, pull = timed(env_b, "sync", "--json")
    assert push["pushed"]["memory"] == rows and pull["pulled"]["memory"] == rows, (push, pull)
    noop = [timed(env_b, "sync", "--json")[0] for _ in range(11)]
    return {
        "rows": rows, "profile": profile, "push_s": push_s, "pull_s": pull_s,
        "push_rate": rows / push_s, "pull_rate": rows / pull_s,
        "noop_process_ms": statistics.median(noop) * 1000,
        "noop_library_ms": library_noop(env_b),
    }  # fmt: skip


def fleet(pg, work: Path, machines: int, rows: int, pgpass: Path) -> dict:
    envs = []
    for i in range(machines):
        data = store_with(work, f"m{i:02d}", rows, 1000 + i, "fake", pgpass)
        role = "alice" if i % 2 else "bob"
        env = env_for(data, "fake", pgpass)
        zmem(env, "hub", "join", "--url", pg.url(user=role, password=None), "--namespace", NS)
        envs.append(env)
    t0 = time.perf_counter()
    procs = [(time.perf_counter(), subprocess.Popen([ZMEM, "sync", "--json"], env=e,
                                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE))
             for e in envs]  # fmt: skip
    took, moved = [], 0
    for started, proc in procs:
        out, err = proc.communicate()
        if proc.returncode != 0:
            raise SystemExit(f"a fleet sync failed: {err.decode()[-2000:]}")
        took.append(time.perf_counter() - started)
        r = json.loads(out)
        moved += r["pushed"]["memory"] + r["pulled"]["memory"]
    wall = time.perf_counter() - t0
    moved_first = moved
    # A second round: every machine pulls what the others pushed after it had pulled.
    second = []
    for e in envs:
        s, r = timed(e, "sync", "--json")
        second.append(s)
        moved += r["pulled"]["memory"]
    return {
        "machines": machines, "rows_each": rows, "wall_s": wall, "moved": moved,
        "moved_first": moved_first,
        "rate": (machines * rows) / wall, "p50_s": statistics.median(took),
        "p95_s": sorted(took)[int(0.95 * (len(took) - 1))],
        "second_round_p50_s": statistics.median(second),
    }  # fmt: skip


def hooks_with_hub_down(pg, work: Path, n: int, pgpass: Path) -> dict:
    import hooks as hook_bench

    base = hook_bench_store(work, pgpass)
    down, alone = work / "hooks-down", work / "hooks-alone"
    shutil.copytree(base, down)
    shutil.copytree(base, alone)
    project = work / "hooks-project"
    project.mkdir()
    common = {"ZMEM_HOOK_DAEMON": "1", "ZMEM_HOOKD_IDLE_S": "600", "ZMEM_SESSION_UPKEEP": "1",
              "ZMEM_HUB_SYNC_MINUTES": "0.001"}  # fmt: skip
    env_down = env_for(down, "fake", pgpass, **common)
    env_alone = env_for(alone, "fake", pgpass, **common)
    zmem(env_down, "hub", "join", "--url", pg.url(user="alice", password=None), "--namespace", NS)
    config = down / "hub" / "hub.json"
    doc = json.loads(config.read_text())
    doc["url"] = doc["url"].replace(str(pg.port), "9")  # the hub is down: nobody answers there
    config.write_text(json.dumps(doc))
    path = SRC[0] if SRC else str(ROOT / "src")
    daemons = [hook_bench.start_resident(sys.executable, d, dict(e, PYTHONPATH=path))
               for d, e in ((down, env_down), (alone, env_alone))]  # fmt: skip
    times: dict[str, list[float]] = {"down": [], "alone": []}
    try:
        for i in range(n):
            prompt = hook_bench.PROMPTS[i % len(hook_bench.PROMPTS)]
            turns = [("down", env_down), ("alone", env_alone)]
            if i % 2:
                turns.reverse()
            for name, env in turns:
                if i % 50 == 0:  # a session start: the upkeep's sync attempt, in its child
                    session_start(env, project)
                times[name].append(hook_bench.run_hook(env, project, prompt))
    finally:
        for d in daemons:
            d.kill()
    log = (down / "zmem-bg.log").read_text()
    attempts = log.count("error=sync:")
    return {
        "hooks": n, "p50_down": statistics.median(times["down"]),
        "p50_alone": statistics.median(times["alone"]),
        "p95_down": sorted(times["down"])[int(0.95 * (n - 1))],
        "p95_alone": sorted(times["alone"])[int(0.95 * (n - 1))],
        "paired": statistics.median(
            d / a for d, a in zip(times["down"], times["alone"], strict=True)
        ),
        "failed_sync_attempts": attempts,
    }  # fmt: skip


def hook_bench_store(work: Path, pgpass: Path) -> Path:
    data = work / "hooks-base"
    data.mkdir()
    source = work / "hooks.jsonl"
    corpus(source, 5000, 77)
    zmem(env_for(data, "fake", pgpass), "ingest-jsonl", "--in", str(source))
    return data


def session_start(env: dict[str, str], project: Path) -> None:
    payload = json.dumps({"session_id": "bench", "cwd": str(project), "source": "startup",
                          "hook_event_name": "SessionStart"})  # fmt: skip
    subprocess.run([sys.executable, "-m", "zmem", "hook", "SessionStart", "--host", "claude"],
                   input=payload.encode(), env=env, capture_output=True)  # fmt: skip


def hub_size(pg) -> dict:
    import psycopg

    with psycopg.connect(pg.url()) as conn:
        rows = conn.execute("SELECT kind, count(*) FROM zmem_hub.record GROUP BY kind").fetchall()
        total = conn.execute("SELECT pg_total_relation_size('zmem_hub.record')").fetchone()[0]
        body = conn.execute(
            "SELECT avg(pg_column_size(body)) FROM zmem_hub.record WHERE kind = 'memory'"
        ).fetchone()[0]
    count = sum(n for _, n in rows)
    return {"objects": dict(rows), "bytes": total, "bytes_per_object": total / max(1, count),
            "memory_body_bytes": float(body or 0)}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--rows",
        default="10000,100000",
        help="initial sync sizes with the fake profile, comma-separated",
    )
    ap.add_argument("--minilm-rows", default="10000,100000",
                    help="initial sync sizes with MiniLM on the puller (0: none)")  # fmt: skip
    ap.add_argument("--machines", type=int, default=20)
    ap.add_argument("--machine-rows", type=int, default=500)
    ap.add_argument("--hooks", type=int, default=1000)
    ap.add_argument("--skip", default="", help="comma-separated: initial,minilm,fleet,hooks")
    ap.add_argument("--src", default=None, help="run zmem from this tree's src/ (default: ours)")
    args = ap.parse_args()
    if args.src:
        SRC.append(str(Path(args.src).resolve()))
    skip = set(filter(None, args.skip.split(",")))
    work = Path(tempfile.mkdtemp(prefix="zmem-bench-hub-"))
    with pg_server.postgres() as pg:
        pgpass = work / "pgpass"
        pgpass.write_text("".join(
            f"127.0.0.1:{pg.port}:*:{r}:{p}\n" for r, p in
            ((pg_server.ADMIN, pg_server.ADMIN_PASSWORD), ("alice", "a-pw"), ("bob", "b-pw"))
        ))  # fmt: skip
        pgpass.chmod(0o600)
        pg.create_role("alice", "a-pw")
        pg.create_role("bob", "b-pw")
        admin_env = env_for(work / "admin", "fake", pgpass)
        admin = pg.url(password=None)
        zmem(admin_env, "hub", "init", "--url", admin)
        for role in ("alice", "bob"):
            zmem(admin_env, "hub", "grant", "--url", admin, "--role", role, "--namespace", NS)

        def fresh() -> None:
            pg.sql("TRUNCATE zmem_hub.record")

        print(f"\nteam hub on loopback, PostgreSQL 15, {os.cpu_count()} cores; zmem from "
              f"{SRC[0] if SRC else ROOT / 'src'}")  # fmt: skip
        runs = [("fake", int(n)) for n in args.rows.split(",") if int(n) and "initial" not in skip]
        runs += [("minilm", int(n)) for n in args.minilm_rows.split(",")
                 if int(n) and "minilm" not in skip]  # fmt: skip
        if runs:
            print(
                "\n| initial sync | rows | push s | push rows/s | pull s | pull rows/s "
                "| no-op sync, process ms | no-op sync, library ms |"
            )
            print("| --- | --- | --- | --- | --- | --- | --- | --- |")
        sizes = []
        for profile, rows in runs:
            r = initial(pg, work, rows, profile, pgpass, 1 if profile == "fake" else 2)
            if profile == "fake":
                sizes.append((rows, hub_size(pg)))
            label = "fake profile" if profile == "fake" else "MiniLM (the puller embeds)"
            print(f"| {label} | {r['rows']} | {r['push_s']:.1f} | {r['push_rate']:.0f} | "
                  f"{r['pull_s']:.1f} | {r['pull_rate']:.0f} | {r['noop_process_ms']:.0f} | "
                  f"{r['noop_library_ms']:.1f} |", flush=True)  # fmt: skip
            fresh()
        for rows, size in sizes:
            per, body = size["bytes_per_object"], size["memory_body_bytes"]
            print(f"\nhub after {rows} rows: {size['objects']} objects, "
                  f"{size['bytes'] / 1e6:.1f} MB ({per:.0f} bytes an object with its indexes; "
                  f"a memory's body {body:.0f} bytes)")  # fmt: skip
        if "fleet" not in skip:
            f = fleet(pg, work, args.machines, args.machine_rows, pgpass)
            print(f"\n{f['machines']} machines syncing at once, {f['rows_each']} new rows each "
                  f"(each pushes its own and pulls every other's): {f['wall_s']:.1f} s wall, "
                  f"{f['rate']:.0f} rows pushed/s and {f['moved_first'] / f['wall_s']:.0f} rows "
                  f"moved/s (pushed + applied by the pullers) overall; sync p50 "
                  f"{f['p50_s']:.1f} s, p95 {f['p95_s']:.1f} s; a second round (each pulls what "
                  f"came after it): p50 {f['second_round_p50_s']:.2f} s")  # fmt: skip
            fresh()
        if "hooks" not in skip:
            h = hooks_with_hub_down(pg, work, args.hooks, pgpass)
            print(f"\nwarm prompt hook, {h['hooks']} a side, alternated: hub down p50 "
                  f"{h['p50_down']:.1f} ms (p95 {h['p95_down']:.1f}), sharing nothing p50 "
                  f"{h['p50_alone']:.1f} ms (p95 {h['p95_alone']:.1f}); median paired ratio "
                  f"{h['paired']:.3f}; failed background sync attempts logged: "
                  f"{h['failed_sync_attempts']}")  # fmt: skip
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
