"""Claude Code's prompt hook with no process (issue 36): the `http` hook `zmem setup claude`
wires, answered by the resident process the keeper starts on a loopback port, against the
command hook (the launcher process, answered by the same resident process over its socket)
and the bare interpreter start, alternated, at N memories. The POST is what Claude Code
2.1.332 sends: a new connection, the hook's JSON as the body, `Content-Type:
application/json` and the secret in `Authorization`; timed from the connect to the last byte
of the reply. Every prompt is a new session, so each does the whole work.

Then what a prompt waits when the answering process is gone: killed (the keeper starts the
next at once; the request waits in the port's queue) and after an idle exit (the keeper
starts one when the request comes), each timed from the POST to the reply.

    .venv/bin/python bench/prompt_http.py [--memories 10000] [--runs 60] [--work /tmp/hookbench]
    .venv/bin/python bench/prompt_http.py --vs /tmp/previous-main/src   # the http hook only,
        # this tree's keeper and that tree's, each on its own copy of the store, alternated
    .venv/bin/python bench/prompt_http.py --scale-store \\
        ~/.cache/zmem-bench/recall-hybrid-v3-100000-20241202.sqlite
    .venv/bin/python bench/prompt_http.py --src /tmp/previous-main/src   # that tree's keeper
        # alone, and its command hook's launcher, on a store it can open
    .venv/bin/python bench/prompt_http.py --entity-heavy [--vs ...]   # issue 51's hard prompts:
        # bench/entity_heavy.py's store (each module/service/client name in 50-100 rows) and
        # prompts naming 1-3 of them; p50/p95 per prompt as well as overall
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "src"))

import entity_heavy  # noqa: E402 - issue 51's store and prompts
import hooks as hook_bench  # noqa: E402 - the same stores, prompts and launcher timing

from zmem.resident import http_hook, keeper  # noqa: E402


def post(config: http_hook.HttpConfig, cwd: Path, prompt: str) -> tuple[float, bytes]:
    body = json.dumps(
        {
            "session_id": hook_bench._session(),
            "transcript_path": str(cwd / "transcript.jsonl"),
            "cwd": str(cwd),
            "permission_mode": "default",
            "hook_event_name": "UserPromptSubmit",
            "prompt": prompt,
        }
    ).encode()
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/plain, */*",
        "Authorization": f"Bearer {config.secret}",
        "User-Agent": "claude-cli/2.1.332 (external, cli)",
    }
    t0 = time.perf_counter()
    conn = http.client.HTTPConnection(http_hook.LOOPBACK, config.port, timeout=60)
    conn.request("POST", "/zmem-hook/claude/UserPromptSubmit", body=body, headers=headers)
    resp = conn.getresponse()
    reply = resp.read()
    elapsed = (time.perf_counter() - t0) * 1000
    conn.close()
    if resp.status != 200:
        raise SystemExit(f"the http hook answered {resp.status}: {reply[:200]!r}")
    return elapsed, reply


def workers(data: Path) -> list[int]:
    found = subprocess.run(
        ["pgrep", "-f", f"zmem.resident.daemon {data} --http-fd"], capture_output=True, text=True
    ).stdout.split()
    return [int(p) for p in found]


def wait(predicate, seconds: float = 120.0) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        if time.monotonic() > deadline:
            raise SystemExit("timed out waiting for the keeper")
        time.sleep(0.02)


def start_keeper(data: Path, env: dict[str, str], src: str | None = None) -> http_hook.HttpConfig:
    """A keeper (of this tree, or of `src`: another tree's keeper and resident process) on
    the data dir's http config, listening."""
    config = http_hook.load_config(data) or http_hook.new_config(None)
    http_hook.write_config(data, config)
    if http_hook.running(data):
        raise SystemExit("no keeper started (one already holds the port?)")
    subprocess.Popen(
        [sys.executable, "-m", "zmem.resident.keeper", str(data)],
        env=dict(env, PYTHONPATH=src or str(ROOT / "src")), start_new_session=True,
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    wait(lambda: http_hook.running(data))
    return config


def stop_keeper(data: Path) -> None:
    keeper.stop(data)
    wait(lambda: not http_hook.running(data) and not workers(data))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--memories", type=int, default=10_000)
    ap.add_argument("--profile", default="minilm")
    ap.add_argument("--runs", type=int, default=60)
    ap.add_argument("--restarts", type=int, default=3, help="kills and idle exits to time")
    ap.add_argument("--work", default="/tmp/hookbench", help="store dir shared with hooks.py")
    ap.add_argument("--scale-store", type=Path, help="a bench/recall_scale.py store to use")
    ap.add_argument("--vs", default=None, help="another tree's src/: its keeper, alternated")
    ap.add_argument(
        "--src", default=None,
        help="another tree's src/: its keeper alone (the http hook; on a store it can open)",
    )  # fmt: skip
    ap.add_argument(
        "--entity-heavy", action="store_true",
        help="bench/entity_heavy.py's store (names shared by 50-100 rows) and its prompts",
    )  # fmt: skip
    args = ap.parse_args()
    work = Path(args.work)
    prompts = hook_bench.PROMPTS
    build_store, args.builder = hook_bench.build_store, "hooks:build_store"
    if args.scale_store:
        data, project, prompts, args.memories = hook_bench.scale_store(args.scale_store, work)
    elif args.entity_heavy:
        data = work / f"data-{args.profile}-entity-{args.memories}"
        project = work / "bench"
        prompts, build_store = entity_heavy.PROMPTS, entity_heavy.build_store
        args.builder = "entity_heavy:build_store"
    else:
        data = work / f"data-{args.profile}-{args.memories}"
        project = work / "bench"
    project.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ZMEM_")}
    env.update(
        ZMEM_DATA=str(data), ZMEM_EMBED_PROFILE=args.profile, ZMEM_HOOK_DAEMON="1",
        ZMEM_HOOKD_IDLE_S="600",
    )  # fmt: skip
    os.environ.update(env)
    store = data / "store.sqlite"
    if not store.exists():
        data.mkdir(parents=True, exist_ok=True)
        build_store(store, args.memories)
    if args.src:  # that tree's keeper answers, on a store of a schema it knows
        data = hook_bench.data_for_tree(args.src, data, args.builder, args.memories)
        env["ZMEM_DATA"] = os.environ["ZMEM_DATA"] = str(data)
    from zmem.resident.code import compile_code

    compile_code()
    stop_keeper(data) if http_hook.running(data) else None
    (data / "zmem-hookd.sock").unlink(missing_ok=True)

    if args.vs:
        compare(data, project, env, prompts, args)
        return
    config = start_keeper(data, env, args.src)
    # The command hook's launcher from the same tree: this tree's would migrate that tree's
    # store under its keeper.
    hook_env, launch = env, (sys.executable, str(hook_bench.LAUNCHER))
    if args.src:
        hook_env = dict(env, PYTHONPATH=args.src)
        launch = (sys.executable, str(Path(args.src) / "zmem/plugin/hooks/zmem_hook.py"))
    http_ms, command_ms, bare_ms = [], [], []
    http_by_prompt: dict[str, list[float]] = {p: [] for p in prompts}
    injected = 0
    try:
        for i in range(5):  # the resident process warms up; page cache, first shapes
            post(config, project, prompts[i % len(prompts)])
            hook_bench.run_hook(hook_env, project, prompts[i % len(prompts)], launch=launch)
        log = data / "zmem-bg.log"
        logged_before = len(log.read_text().splitlines())
        for i in range(args.runs):
            prompt = prompts[i % len(prompts)]
            turns = ["http", "command", "bare"]
            if i % 2:
                turns.reverse()
            for turn in turns:
                if turn == "http":
                    ms, reply = post(config, project, prompt)
                    http_ms.append(ms)
                    http_by_prompt[prompt].append(ms)
                    injected += b"additionalContext" in reply
                elif turn == "command":
                    command_ms.append(hook_bench.run_hook(hook_env, project, prompt, launch=launch))
                else:
                    bare_ms.append(hook_bench.run_bare(env))
        measured = log.read_text().splitlines()[logged_before:]
        via_daemon = sum("via=daemon" in line for line in measured)
        killed_ms = []
        for i in range(args.restarts):
            for pid in workers(data):
                os.kill(pid, signal.SIGKILL)
            killed_ms.append(post(config, project, prompts[i % len(prompts)])[0])
    finally:
        stop_keeper(data)

    idle_ms = []
    config = start_keeper(data, dict(env, ZMEM_HOOKD_IDLE_S="2"), args.src)
    try:
        for i in range(args.restarts):
            post(config, project, prompts[i % len(prompts)])  # one is running, warm
            wait(lambda: not workers(data), 30)  # two seconds idle: it leaves
            idle_ms.append(post(config, project, prompts[(i + 1) % len(prompts)])[0])
    finally:
        stop_keeper(data)

    small = args.memories <= 20_000
    print(f"\nUserPromptSubmit, {args.memories:,} memories, profile {args.profile}, alternated")
    print("| path | runs | p50 ms | p95 ms | max ms | target |\n|---|---:|---:|---:|---:|---|")
    rows = [
        ("http hook (POST to reply)", http_ms, "p50 ≤ 18, p95 ≤ 30" if small else "p50 ≤ 25"),
        ("command hook (launcher process)", command_ms, "p50 ≤ 25" if small else ""),
        ("bare interpreter (python -S -c pass)", bare_ms, "the command hook's floor"),
    ]
    for name, xs, target in rows:
        print(
            f"| {name} | {len(xs)} | {statistics.median(xs):.1f} | "
            f"{hook_bench.pct(xs, 0.95):.1f} | {max(xs):.1f} | {target} |"
        )
    print(
        f"\nhttp replies that injected: {injected}/{args.runs}; command hooks answered by the "
        f"resident process: {via_daemon}/{args.runs}"
    )
    print(f"http / command p50: {statistics.median(http_ms) / statistics.median(command_ms):.2f}")
    print_per_prompt({"http hook": http_by_prompt})
    print("\nThe answering process gone, POST to reply (ms), hook timeout 10 s:")
    print("| case | each |\n|---|---|")
    print(f"| killed (SIGKILL), the keeper starts the next at once | {_each(killed_ms)} |")
    print(f"| after an idle exit, started by the request | {_each(idle_ms)} |")


def compare(data: Path, project: Path, env: dict[str, str], prompts: list[str], args) -> None:
    """This tree's keeper and another's (`--vs`), each on its own copy of the store, the same
    prompts posted to both in turn (the order flipped every round)."""
    import shutil

    other = data.with_name(data.name + "-vs")
    shutil.rmtree(other, ignore_errors=True)
    other.mkdir(parents=True)
    source = hook_bench.data_for_tree(args.vs, data, args.builder, args.memories)
    shutil.copy2(source / "store.sqlite", other / "store.sqlite")
    sides = {"this tree": (data, str(ROOT / "src")), args.vs: (other, args.vs)}
    configs = {}
    try:
        for name, (d, src) in sides.items():
            configs[name] = start_keeper(d, dict(env, ZMEM_DATA=str(d)), src)
        for i in range(5):
            for name in sides:
                post(configs[name], project, prompts[i % len(prompts)])
        times: dict[str, list[float]] = {name: [] for name in sides}
        by_prompt = {name: {p: [] for p in prompts} for name in sides}
        for i in range(args.runs):
            order = list(sides) if i % 2 == 0 else list(reversed(sides))
            prompt = prompts[i % len(prompts)]
            for name in order:
                ms = post(configs[name], project, prompt)[0]
                times[name].append(ms)
                by_prompt[name][prompt].append(ms)
    finally:
        for d, _ in sides.values():
            if http_hook.running(d):
                stop_keeper(d)
    print(f"\nhttp prompt hook, {args.memories:,} memories, profile {args.profile}, alternated")
    print("| keeper from | runs | p50 ms | p95 ms |\n|---|---:|---:|---:|")
    for name, xs in times.items():
        print(f"| {name} | {len(xs)} | {statistics.median(xs):.1f} | "
              f"{hook_bench.pct(xs, 0.95):.1f} |")  # fmt: skip
    a, b = times.values()
    ratio = statistics.median(x / y for x, y in zip(a, b, strict=True))
    print(f"median paired ratio (this tree / {args.vs}): {ratio:.3f}")
    print_per_prompt(by_prompt)


def print_per_prompt(sides: dict[str, dict[str, list[float]]]) -> None:
    """p50/p95 of each prompt on each side (a prompt's time depends on what it names), with
    the median paired ratio per prompt when there are two sides."""
    names = list(sides)
    head = " | ".join(f"{n} p50 | {n} p95" for n in names)
    ratio = len(names) == 2
    print(f"\n| prompt | runs | {head} |" + (" ratio |" if ratio else ""))
    print("|---|---:|" + "---:|---:|" * len(names) + ("---:|" if ratio else ""))
    for prompt in sides[names[0]]:
        xs = [sides[n][prompt] for n in names]
        if not xs[0]:
            continue
        cells = " | ".join(
            f"{statistics.median(x):.1f} | {hook_bench.pct(x, 0.95):.1f}" for x in xs
        )
        line = f"| {prompt[:48]} | {len(xs[0])} | {cells} |"
        if ratio:
            line += f" {statistics.median(a / b for a, b in zip(*xs, strict=True)):.3f} |"
        print(line)


def _each(values: list[float]) -> str:
    return ", ".join(f"{v:,.0f}" for v in values)


if __name__ == "__main__":
    main()
