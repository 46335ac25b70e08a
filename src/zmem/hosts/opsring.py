"""The per-session ops ring under <data>/ops/: what PostToolUse records (the tool name plus
allowlisted tokens only: git subcommand chains, test-runner and build verbs, edited-path
basenames; never argument values, output or secret-shaped text) and how UserPromptSubmit folds
its newest tokens into the recall query inside the 500-character cap; also the query a
pending tool call stands for. Standard library only."""

from __future__ import annotations

import os
import re
import shlex
import time
from pathlib import Path

from zmem import untrusted
from zmem.hosts.events import HookEvent, Outcome

QUERY_CAP = 500
# The ops tail's fixed slice inside QUERY_CAP; the separator shares it, so no token is severed.
OPS_SLICE = 120
RING_CAP_BYTES = 64 * 1024
RING_KEEP_LINES = 64
MAX_TOKENS_PER_EVENT = 8
_TAIL_READ = 8192

_GIT_WORDS = frozenset(
    "add am apply bisect branch checkout cherry-pick clean clone commit diff fetch init log "
    "merge mv pull push rebase reflog reset restore revert rm show stash status submodule "
    "switch tag worktree pop drop list save continue abort skip".split()
)
_GIT_FLAGS = frozenset(
    "--soft --hard --mixed --force -f --force-with-lease --amend --no-verify --all "
    "--interactive -i --onto --prune".split()
)
# program -> sub-verbs worth keeping after it (empty: the program name alone)
_VERBS: dict[str, frozenset[str]] = {
    "pytest": frozenset(),
    "tox": frozenset(),
    "nox": frozenset(),
    "ruff": frozenset({"check", "format"}),
    "mypy": frozenset(),
    "npm": frozenset({"test", "run", "install", "ci", "publish", "build"}),
    "pnpm": frozenset({"test", "run", "install", "build", "publish"}),
    "yarn": frozenset({"test", "run", "install", "build", "publish"}),
    "npx": frozenset(),
    "cargo": frozenset({"test", "build", "check", "clippy", "run", "publish"}),
    "go": frozenset({"test", "build", "vet", "run", "mod"}),
    "make": frozenset({"test", "check", "lint", "build", "install", "bench", "clean", "format"}),
    "uv": frozenset({"run", "sync", "pip", "lock"}),
    "pip": frozenset({"install", "uninstall"}),
    "docker": frozenset({"build", "run", "compose", "push", "pull"}),
    "kubectl": frozenset({"apply", "delete", "rollout", "get"}),
    "terraform": frozenset({"plan", "apply", "destroy", "init"}),
    "alembic": frozenset({"upgrade", "downgrade", "revision"}),
    "rm": frozenset(),
    "sqlite3": frozenset(),
    "psql": frozenset(),
    "gh": frozenset({"pr", "release", "issue", "run"}),
}
_SECRET = re.compile(
    r"(gh[pousr]_|github_pat_|sk-|sk_live_|rk_live_|xox[abposr]-|AKIA|ASIA|AIza|glpat-|eyJ"
    r"|-----BEGIN|npm_|hf_)",
)
_LONG_OPAQUE = re.compile(r"^[A-Za-z0-9+/=_\-]{32,}$")
_PATHY = re.compile(r"[/\\]|\.[A-Za-z0-9]{1,6}$")
_SAFE_NAME = re.compile(r"^[A-Za-z0-9._+\-]{1,80}$")
_SEPARATORS = frozenset({"&&", "||", ";", "|", "&"})
_SESSION_SAFE = re.compile(r"^[A-Za-z0-9_-]{1,80}$")


def secret_shaped(token: str) -> bool:
    return bool(_SECRET.search(token) or _LONG_OPAQUE.match(token))


def session_key(session_id: str) -> str:
    """A file-name-safe key for a host session id (hashed when it has other characters)."""
    if _SESSION_SAFE.match(session_id):
        return session_id
    import hashlib  # rare (ids with unsafe characters); ~3 ms the hook client need not pay

    return hashlib.sha256(session_id.encode("utf-8", "replace")).hexdigest()[:32]


def ring_path(data_dir: Path, session_id: str) -> Path:
    return data_dir / "ops" / f"{session_key(session_id)}.log"


def _basename(word: str) -> str | None:
    name = re.split(r"[/\\]", word.rstrip("/\\"))[-1]
    if not name or not _SAFE_NAME.match(name) or secret_shaped(name):
        return None
    return name


def command_tokens(command: str) -> list[str]:
    """Allowlisted tokens of a shell command: `git stash pop`, `pytest`, `make test`, and the
    basenames of path-like arguments. Bare words and values are never kept."""
    try:
        words = shlex.split(command, posix=True)
    except ValueError:
        words = command.split()
    out: list[str] = []
    segment: list[str] = []
    for word in [*words, ";"]:
        if word in _SEPARATORS or word.endswith(";"):
            if word.endswith(";") and word != ";":
                segment.append(word[:-1])
            out += _segment_tokens(segment)
            segment = []
        else:
            segment.append(word)
    return [t for t in dict.fromkeys(out) if not secret_shaped(t)][:MAX_TOKENS_PER_EVENT]


def _segment_tokens(words: list[str]) -> list[str]:
    # Skip env assignments and wrappers so `FOO=1 sudo git push` still reads as git push.
    while words and ("=" in words[0] or words[0] in ("sudo", "env", "time", "command", "exec")):
        words = words[1:]
    if not words:
        return []
    prog = _basename(words[0]) or ""
    if prog.startswith("python") and len(words) > 2 and words[1] == "-m":
        prog, words = words[2], words[2:]
    out: list[str] = []
    if prog == "git":
        chain = ["git"]
        for w in words[1:]:
            if w in _GIT_WORDS and len(chain) < 4:
                chain.append(w)
            elif w in _GIT_FLAGS:
                out.append(w)
        out.insert(0, " ".join(chain))
    elif prog in _VERBS:
        subs = [w for w in words[1:3] if w in _VERBS[prog]]
        out.append(" ".join([prog, *subs[:1]]))
    for w in words[1:]:
        if w.startswith("-") or not _PATHY.search(w) or "://" in w:
            continue
        name = _basename(w)
        if name:
            out.append(name)
    return out


def event_tokens(tool: str | None, command: str | None, paths: tuple[str, ...]) -> list[str]:
    if command:
        return command_tokens(command)
    names = [_basename(p) for p in paths]
    return [n for n in dict.fromkeys(names) if n][:MAX_TOKENS_PER_EVENT]


def record(
    data_dir: Path,
    session_id: str,
    tool: str,
    tokens: list[str],
    failed: bool = False,
) -> int:
    """Append one line to the session's ring and trim the ring past its byte cap. Returns the
    number of tokens written."""
    path = ring_path(data_dir, session_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    tool_name = _basename(tool) or "tool"
    flag = "\tfailed" if failed else ""
    # Tokens are joined by commas: no allowlisted token contains one (git chains hold spaces).
    body = ",".join(t for t in tokens if "," not in t and "\t" not in t)
    line = f"{int(time.time())}\t{tool_name}\t{body}"
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(line + flag + "\n")
        size = fh.tell()
    if size > RING_CAP_BYTES:
        _trim(path)
    return len(tokens)


def _trim(path: Path) -> None:
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()[-RING_KEEP_LINES:]
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    os.replace(tmp, path)


def recent_lines(data_dir: Path, session_id: str) -> list[str]:
    return tail_lines(ring_path(data_dir, session_id), _TAIL_READ)


def tail_lines(path: Path | str, limit: int) -> list[str]:
    """The whole lines in the last `limit` bytes of a file; [] when it cannot be read, or is
    not a regular file (a transcript path comes from the host's payload: a FIFO or a device
    there is skipped, never read)."""
    try:
        data, size = untrusted.read_tail(path, limit)
    except OSError:
        return []
    raw = data.decode("utf-8", errors="replace")
    lines = raw.splitlines()
    if size > limit and lines:
        lines = lines[1:]  # the first line may be cut mid-way
    return lines


def tail_tokens(data_dir: Path, session_id: str) -> list[str]:
    """Newest-first distinct tokens of the ring (tool names included)."""
    out: list[str] = []
    for line in reversed(recent_lines(data_dir, session_id)):
        parts = line.split("\t")
        if len(parts) < 3:
            continue
        for tok in parts[2].split(","):
            if tok and tok not in out:
                out.append(tok)
    return out


def compose_query(prompt: str, tokens: list[str]) -> tuple[str, int]:
    """The recall query: the prompt, and the newest ops tokens in a fixed slice inside the
    500-character cap. Returns (query, number of ops tokens used)."""
    prompt = " ".join(prompt.split())
    if not tokens:
        return prompt[:QUERY_CAP], 0
    room = OPS_SLICE
    picked: list[str] = []
    for tok in tokens:
        cost = len(tok) + 1  # the separator before it shares the slice
        if cost > room:
            continue
        picked.append(tok)
        room -= cost
    if not picked:
        return prompt[:QUERY_CAP], 0
    head = prompt[: QUERY_CAP - OPS_SLICE]
    return (head + " " + " ".join(picked)).strip(), len(picked)


def tool_query(event: HookEvent) -> str:
    """What a pending tool call is about, as a recall query: the command (its informative
    tokens first, then the command itself, whose words match lessons about it) or the file
    paths' names and parent folders; capped at QUERY_CAP. Empty when there is nothing."""
    if event.command:
        tokens = command_tokens(event.command)
        text = " ".join(tokens) if tokens else ""
        return (text + " " + " ".join(event.command.split()))[:QUERY_CAP].strip()
    words: list[str] = []
    for p in event.paths:
        path = Path(p)
        words += [path.name, path.stem, *path.parts[-3:-1]]
    return " ".join(dict.fromkeys(w for w in words if w and w != "/"))[:QUERY_CAP]


def failed_since(data_dir: Path, session_id: str, since: float) -> bool:
    for line in recent_lines(data_dir, session_id):
        parts = line.split("\t")
        if len(parts) >= 4 and parts[3] == "failed" and parts[0].isdigit():
            if int(parts[0]) >= since:
                return True
    return False


def record_event(enabled: bool, data_dir: Path, event: HookEvent) -> Outcome:
    """PostToolUse, without the store: one ring line (ZMEM_QUERY_CONTEXT=0 writes nothing)."""
    if not enabled or not event.session_id or not event.tool_name:
        return Outcome(reason="skipped")
    tokens = event_tokens(event.tool_name, event.command, event.paths)
    n = record(data_dir, event.session_id, event.tool_name, tokens, event.tool_failed)
    return Outcome(None, "skipped", {"ops": n})


# ---- Hermes: the ring past the last pre_llm_call delivery ----------------------------------
# Hermes has no pre-tool hook that can add context, so the hazards a session's tool calls
# touched are delivered on the next pre_llm_call (spec). The cursor is (second, how many lines
# of that second were taken): same-second events after it still deliver, and it is written
# before the store is asked, so a delivery is made at most once (a failure skips it).


def cursor_path(data_dir: Path, session_id: str) -> Path:
    return data_dir / "ops" / f"{session_key(session_id)}.cursor"


def _read_cursor(path: Path) -> tuple[int, int]:
    try:
        ts, taken = path.read_text(encoding="utf-8").split()
        return int(ts), int(taken)
    except (OSError, ValueError):
        return -1, 0


def lines_past_cursor(data_dir: Path, session_id: str) -> tuple[list[str], tuple[int, int]]:
    """The ring lines after the session's delivery cursor, and the cursor that takes them."""
    ts0, taken = _read_cursor(cursor_path(data_dir, session_id))
    stamped = []
    for line in recent_lines(data_dir, session_id):
        head = line.split("\t", 1)[0]
        if head.isdigit() and int(head) >= ts0:
            stamped.append((int(head), line))
    fresh: list[str] = []
    at_ts0 = 0
    for ts, line in stamped:
        if ts == ts0:
            at_ts0 += 1
            if at_ts0 <= taken:
                continue  # taken by the last delivery
        fresh.append(line)
    if not stamped:
        return fresh, (ts0, taken)
    newest = stamped[-1][0]
    return fresh, (newest, sum(1 for ts, _ in stamped if ts == newest))


def advance_cursor(data_dir: Path, session_id: str, cursor: tuple[int, int]) -> None:
    path = cursor_path(data_dir, session_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(f"{cursor[0]} {cursor[1]}\n", encoding="utf-8")
    os.replace(tmp, path)


def line_tokens(lines: list[str]) -> list[str]:
    """Newest-first distinct tokens of some ring lines (tool names left out)."""
    out: list[str] = []
    for line in reversed(lines):
        parts = line.split("\t")
        if len(parts) >= 3:
            out += [t for t in parts[2].split(",") if t and t not in out]
    return out
