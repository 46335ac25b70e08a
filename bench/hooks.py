"""End-to-end UserPromptSubmit hook latency: the launcher process start included, at N memories
(default 10k, the minilm profile), cold (no resident process: interpreter + imports + store open
+ model load per prompt) and warm (the resident process answers over its socket). Targets:
warm p50 <= 25 ms at 10k and <= 35 ms at 100k, cold <= 150 ms (issue 22).

The "interpreter" row starts the same venv interpreter with `-S -c pass`, alternated with the
warm runs: no hook can cost less, and this class of machine runs it anywhere from 7 to 21 ms
(docs/benchmarks.md), so "warm - interpreter" is the part ZMem owns. Two more floors are
measured in the same run: one query embedding by the model, and one matrix product over as
many 384-d rows as the store holds (the vector lane's KNN, done once).

--scale-store runs the hooks on one of bench/recall_scale.py's stores instead (synthetic rows
with random vectors, e.g. 100k), from a project directory whose namespace is its main
namespace, with prompts built from its rows as recall_scale builds its queries.

    .venv/bin/python bench/hooks.py [--memories 10000] [--profile minilm] [--runs 40]
    .venv/bin/python bench/hooks.py --scale-store \
        ~/.cache/zmem-bench/recall-hybrid-v3-100000-20241202.sqlite
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
LAUNCHER = ROOT / "src" / "zmem" / "plugin" / "hooks" / "zmem_hook.py"
NS = "project:bench"
TOPICS = [
    "git push",
    "pytest fixtures",
    "docker build cache",
    "alembic migration",
    "ruff format",
    "npm install lockfile",
    "kubectl rollout",
    "terraform plan",
    "sqlite WAL checkpoint",
    "cargo clippy",
    "go test race",
    "make lint",
    "CI cache key",
    "feature flags",
    "rebase",
]
VERBS = ["always", "never", "prefer", "avoid", "remember to", "check that you"]
PROMPTS = [
    "I'm about to git push the release branch, anything to check first?",
    "the pytest suite is flaky in CI again, where do I start",
    "add a database migration for the new column",
    "why is the docker build so slow today",
    "set up linting for the new package",
]


def build_store(path: Path, n: int) -> None:
    from zmem import MemoryStore

    rnd = random.Random(7)
    with MemoryStore.open(path) as store:
        for i in range(n):
            topic = rnd.choice(TOPICS)
            text = (
                f"{rnd.choice(VERBS).capitalize()} {topic} in service{i % 97} "
                f"before step {i}: it broke build {rnd.randint(1, 10**6)} last time."
            )
            ns = NS if i % 5 else "user:global"
            store.add(text, namespace=ns, type="lesson", signal=rnd.choice(["test", "user"]))


def floors(rows: int, prompts: list[str], runs: int = 100) -> dict[str, float]:
    """Medians of one query embedding and of one (rows x 384) float32 matrix product."""
    import numpy as np

    from zmem.embedding import load_minilm

    model = load_minilm()
    embed = []
    for i in range(runs):
        time.sleep(0.005)  # as prompts arrive: the model's threads idle in between
        t0 = time.perf_counter()
        model.embed([prompts[i % len(prompts)]])
        embed.append((time.perf_counter() - t0) * 1000)
    matrix = np.random.default_rng(1).standard_normal((rows, 384)).astype(np.float32)
    query = matrix[0].copy()
    product = []
    for _ in range(runs // 4):
        t0 = time.perf_counter()
        matrix @ query
        product.append((time.perf_counter() - t0) * 1000)
    return {"embedding": statistics.median(embed), "product": statistics.median(product)}


def run_hook(env: dict[str, str], cwd: Path, prompt: str, check: bool = True) -> float:
    payload = json.dumps({"session_id": "bench", "cwd": str(cwd), "prompt": prompt})
    t0 = time.perf_counter()
    done = subprocess.run(
        # -S: as the hosts' launch commands run it
        [sys.executable, "-S", str(LAUNCHER), "UserPromptSubmit", "--host", "claude"],
        input=payload.encode(),
        capture_output=True,
        env=env,
    )
    elapsed = (time.perf_counter() - t0) * 1000
    if check and (done.returncode != 0 or not done.stdout):
        raise SystemExit(f"hook produced no output: {done.stderr.decode()[:300]}")
    return elapsed


def ask_directly(env: dict[str, str], sock: Path, cwd: Path, prompt: str) -> float:
    """The same request sent over the socket by this already running process: the resident
    process's answer plus the socket, without a launcher process around it."""
    from zmem.resident import wire
    from zmem.resident.code import PACKAGE_DIR

    payload = json.dumps({"session_id": "bench", "cwd": str(cwd), "prompt": prompt}).encode()
    request = wire.encode_request("claude", "UserPromptSubmit", str(PACKAGE_DIR), payload, env)
    t0 = time.perf_counter()
    state, _ = wire.ask(str(sock), request, 3.0)
    elapsed = (time.perf_counter() - t0) * 1000
    if state != wire.ANSWERED:
        raise SystemExit(f"the resident process did not answer the direct request: {state}")
    return elapsed


def run_bare(env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-S", "-c", "pass"], capture_output=True, env=env)
    return (time.perf_counter() - t0) * 1000


def _rows(path: Path) -> int:
    import apsw

    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return conn.execute("SELECT count(*) FROM memory WHERE superseded_at IS NULL").fetchone()[0]
    finally:
        conn.close()


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--memories", type=int, default=10_000)
    ap.add_argument("--profile", default="minilm")
    ap.add_argument("--runs", type=int, default=40)
    ap.add_argument("--work", default=None, help="keep the store here between runs")
    ap.add_argument("--scale-store", type=Path, help="a bench/recall_scale.py store to use")
    args = ap.parse_args()
    work = Path(args.work or tempfile.mkdtemp(prefix="zmem-bench-hooks-"))
    prompts = PROMPTS
    if args.scale_store:
        import shutil

        sys.path.insert(0, str(ROOT / "bench"))
        import recall_scale

        data = work / f"data-{args.scale_store.stem}"
        project = work / recall_scale.QUERY_NAMESPACE.removeprefix("project:")
        if not (data / "store.sqlite").exists():
            data.mkdir(parents=True, exist_ok=True)
            shutil.copy(args.scale_store, data / "store.sqlite")
        prompts = recall_scale.queries(args.scale_store, 20, 20241202)
        args.memories = _rows(data / "store.sqlite")
    else:
        data = work / f"data-{args.profile}-{args.memories}"
        project = work / "bench"
    project.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ZMEM_")}
    env.update(ZMEM_DATA=str(data), ZMEM_EMBED_PROFILE=args.profile, ZMEM_HOOKD_IDLE_S="120")
    os.environ.update(env)
    store = data / "store.sqlite"
    if not store.exists():
        t0 = time.perf_counter()
        data.mkdir(parents=True, exist_ok=True)
        build_store(store, args.memories)
        print(f"built {args.memories} memories in {time.perf_counter() - t0:.1f} s", flush=True)

    from zmem.resident.client import answers
    from zmem.resident.code import compile_code

    # As `make install`, the plugin bootstrap and the resident process do: with
    # PYTHONDONTWRITEBYTECODE=1 nothing else would write the .pyc files of src/ and hooks/, and
    # every cold run would compile the package.
    compile_code()

    cold_env = dict(env, ZMEM_HOOK_DAEMON="0")
    # Page cache and .pyc files. On a store just copied, at 1M rows, this first read from disk
    # can pass the hook's deadline: the hook then prints nothing, as designed.
    run_hook(cold_env, project, prompts[0], check=False)
    cold = [run_hook(cold_env, project, prompts[i % len(prompts)]) for i in range(args.runs // 4)]

    warm_env = dict(env, ZMEM_HOOK_DAEMON="1")
    sock = data / "zmem-hookd.sock"
    # A socket file left by the previous run's killed process would look ready at once: the
    # first hooks would then find nobody listening, run in-process and start a second
    # resident process that warms up during the measured runs.
    sock.unlink(missing_ok=True)
    daemon = subprocess.Popen(
        [sys.executable, "-m", "zmem.resident.daemon", str(data)],
        env=dict(warm_env, PYTHONPATH=str(ROOT / "src")),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        for _ in range(600):
            if answers(sock):
                break
            time.sleep(0.05)
        for i in range(3):
            run_hook(warm_env, project, prompts[i])
        warm, bare, direct = [], [], []
        for i in range(args.runs):
            warm.append(run_hook(warm_env, project, prompts[i % len(prompts)]))
            bare.append(run_bare(warm_env))
            direct.append(ask_directly(warm_env, sock, project, prompts[i % len(prompts)]))
        log = (data / "zmem-bg.log").read_text().splitlines()[-args.runs :]
        via = sum("via=daemon" in line for line in log)
    finally:
        daemon.kill()
        daemon.wait()
        sock.unlink(missing_ok=True)

    floor = floors(args.memories, prompts)
    print(f"\nUserPromptSubmit end to end, {args.memories} memories, profile {args.profile}")
    print("| mode | runs | p50 ms | p95 ms | max ms | target |")
    print("| --- | --- | --- | --- | --- | --- |")
    # The sizes: about 10k and about 100k live rows.
    goal = (
        "p50 <= 25" if args.memories <= 20_000 else "p50 <= 35" if args.memories <= 200_000 else ""
    )
    rows = (("warm", warm, goal), ("cold", cold, "p50 <= 150"), ("interpreter", bare, ""))
    for name, xs, target in rows:
        row = f"| {name} | {len(xs)} | {statistics.median(xs):.1f} | {pct(xs, 0.95):.1f} |"
        print(f"{row} {max(xs):.1f} | {target} |")
    own = statistics.median(warm) - statistics.median(bare)
    print(f"\nwarm p50 - interpreter p50: {own:.1f} ms (the hook's own cost over a bare start)")
    answer = statistics.median(direct)
    print(
        f"where it goes (p50): interpreter {statistics.median(bare):.1f} ms; the resident "
        f"process's answer with the socket, asked by a running process, {answer:.1f} ms; the "
        f"launcher's own work (imports, payload, printing) "
        f"{statistics.median(warm) - statistics.median(bare) - answer:.1f} ms"
    )
    print(f"\nwarm runs answered by the resident process: {via}/{args.runs}")
    print(
        f"\nfloors, same run: interpreter {statistics.median(bare):.1f} ms + one query "
        f"embedding {floor['embedding']:.1f} ms + one {args.memories:,} x 384 product "
        f"{floor['product']:.1f} ms = "
        f"{statistics.median(bare) + floor['embedding'] + floor['product']:.1f} ms"
    )


if __name__ == "__main__":
    main()
