"""The resident process under abuse from another local user (issue 48): 50 connections that
trickle a byte a second and 300 that connect and say nothing, held open against the http
prompt hook's port, while this user's prompts (the http hook, authorized) and command hooks
(the launcher process over the resident process's socket) are timed; then a flood of
unauthorized requests, and how many log lines it left. Each measurement beside the same with
no attack, on a store of N memories (bench/hooks.py's, MiniLM by default).

The attack runs as this user here (the server cannot tell one user's loopback connection from
another's; tests/test_local_boundary.py runs it as a second user). --src runs the keeper of
another tree (the previous main) for the same table.

    .venv/bin/python bench/local_abuse.py [--memories 10000] [--profile minilm] [--runs 20]
        [--slow 50] [--idle 300] [--src DIR]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "src"))

import hooks as hook_bench  # noqa: E402
import prompt_http  # noqa: E402

from zmem.resident import http_hook  # noqa: E402

ATTACK = """
    import socket, sys, time
    port, n, trickle, seconds = {port}, {n}, {trickle}, {seconds}
    conns = []
    def connect():
        try:
            conns.append(socket.create_connection(("127.0.0.1", port), timeout=5))
        except OSError:
            pass
    for _ in range(n):
        connect()
    print("ready", flush=True)
    end = time.time() + seconds
    while time.time() < end:
        for c in list(conns):
            try:
                if trickle:
                    c.send(b"P")
                elif c.recv(1, socket.MSG_DONTWAIT) == b"":
                    raise OSError
            except BlockingIOError:
                pass
            except OSError:
                conns.remove(c)
                connect()  # dropped by the server: the attacker comes back
        time.sleep(1)
"""

FLOOD = """
    import socket, time
    body = b'{{"prompt": "x"}}'
    req = (b"POST /zmem-hook/claude/UserPromptSubmit HTTP/1.1\\r\\nHost: x\\r\\n"
           b"Authorization: Bearer not-the-secret\\r\\nContent-Length: "
           + str(len(body)).encode() + b"\\r\\n\\r\\n" + body)
    sent, end = 0, time.time() + {seconds}
    while time.time() < end:
        try:
            c = socket.create_connection(("127.0.0.1", {port}), timeout=2)
            c.sendall(req)
            c.recv(64)
            c.close()
            sent += 1
        except OSError:
            pass
    print(sent)
"""


def attack(port: int, n: int, trickle: bool, seconds: int) -> subprocess.Popen:
    code = textwrap.dedent(ATTACK.format(port=port, n=n, trickle=trickle, seconds=seconds))
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    return proc


def timed_prompts(
    config: http_hook.HttpConfig, env: dict[str, str], project: Path, runs: int, src: str
) -> tuple[list[float], list[float]]:
    launch = (sys.executable, str(Path(src) / "zmem" / "plugin" / "hooks" / "zmem-hook"))
    http_ms, command_ms = [], []
    for i in range(runs):
        prompt = hook_bench.PROMPTS[i % len(hook_bench.PROMPTS)]
        try:
            http_ms.append(prompt_http.post(config, project, prompt)[0])
        except OSError:
            http_ms.append(float("inf"))  # no answer within the client's 60 s
        command_ms.append(hook_bench.run_hook(env, project, prompt, launch=launch))
    return http_ms, command_ms


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--memories", type=int, default=10_000)
    ap.add_argument("--profile", default="minilm")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--slow", type=int, default=50)
    ap.add_argument("--idle", type=int, default=300)
    ap.add_argument("--flood-seconds", type=int, default=5)
    ap.add_argument("--work", default="/tmp/hookbench")
    ap.add_argument("--src", default=None, help="run the keeper from this tree's src/")
    args = ap.parse_args()
    src = str(Path(args.src).resolve()) if args.src else str(ROOT / "src")
    data = Path(args.work) / f"data-{args.profile}-{args.memories}"
    project = Path(args.work) / "bench"
    project.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ZMEM_")}
    env.update(ZMEM_DATA=str(data), ZMEM_EMBED_PROFILE=args.profile, ZMEM_HOOK_DAEMON="1",
               ZMEM_HOOKD_IDLE_S="600", PYTHONPATH=src)  # fmt: skip
    os.environ.update(env)
    store = data / "store.sqlite"
    if not store.exists():
        data.mkdir(parents=True, exist_ok=True)
        hook_bench.build_store(store, args.memories)
    if http_hook.running(data):
        prompt_http.stop_keeper(data)
    (data / "zmem-hookd.sock").unlink(missing_ok=True)
    config = prompt_http.start_keeper(data, env, src)
    attackers: list[subprocess.Popen] = []
    try:
        for i in range(5):
            prompt_http.post(config, project, hook_bench.PROMPTS[i % len(hook_bench.PROMPTS)])
            hook_bench.run_hook(
                env, project, hook_bench.PROMPTS[i % len(hook_bench.PROMPTS)],
                launch=(sys.executable, str(Path(src) / "zmem" / "plugin" / "hooks" / "zmem-hook")),
            )  # fmt: skip
        quiet = timed_prompts(config, env, project, args.runs, src)
        seconds = 30 + args.runs * 4
        attackers = [attack(config.port, args.slow, True, seconds),
                     attack(config.port, args.idle, False, seconds)]  # fmt: skip
        time.sleep(2)
        loud = timed_prompts(config, env, project, args.runs, src)
        for a in attackers:
            a.kill()
        log = data / "zmem-bg.log"
        before = len(log.read_text().splitlines()) if log.exists() else 0
        flood = subprocess.run(
            [sys.executable, "-c", textwrap.dedent(FLOOD.format(port=config.port,
                                                                seconds=args.flood_seconds))],
            capture_output=True, text=True,
        )  # fmt: skip
        after = log.read_text().splitlines()[before:] if log.exists() else []
        prompt_http.post(config, project, hook_bench.PROMPTS[0])
    finally:
        for a in attackers:
            a.kill()
        prompt_http.stop_keeper(data)

    def row(name: str, xs: list[float]) -> str:
        finite = [x for x in xs if x != float("inf")]
        unanswered = len(xs) - len(finite)
        p50 = statistics.median(xs) if not unanswered * 2 > len(xs) else float("inf")
        return (f"| {name} | {len(xs)} | {p50:.1f} | {hook_bench.pct(xs, 0.95):.1f} | "
                f"{max(xs):.1f} | {unanswered} |")  # fmt: skip

    print(f"\nkeeper from {src}; {args.memories:,} memories, profile {args.profile}")
    print(f"attack: {args.slow} connections trickling a byte a second + {args.idle} idle")
    print("| this user's request | runs | p50 ms | p95 ms | max ms | unanswered |")
    print("|---|---:|---:|---:|---:|---:|")
    print(row("http prompt hook, no attack", quiet[0]))
    print(row("http prompt hook, under attack", loud[0]))
    print(row("command hook, no attack", quiet[1]))
    print(row("command hook, under attack", loud[1]))
    print(
        f"\ncommand hook p50 under attack / without: "
        f"{statistics.median(loud[1]) / statistics.median(quiet[1]):.2f} (target <= 2); http "
        f"max under attack {max(loud[0]):.0f} ms (target < 1000)"
    )
    sent = int(flood.stdout.strip() or 0)
    unauthorized = sum("reason=unauthorized" in x for x in after)
    print(
        f"flood: {sent:,} unauthorized requests in {args.flood_seconds} s left "
        f"{len(after)} log lines ({unauthorized} of them unauthorized)"
    )


if __name__ == "__main__":
    main()
