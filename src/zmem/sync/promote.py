"""promote: the ladder that decides which lessons have earned a skill (explicit feedback only),
the SKILL.md a lesson renders to, the review candidate under <data>/promote/<name>/, and the
installation of the reviewed file into the Claude Code, Codex and ZCode skill directories.
Reads memories; writes only files, never the store."""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from zmem import outputs
from zmem.capture.secrets import find_secrets
from zmem.errors import Refusal, UsageError
from zmem.models import Memory
from zmem.retrieval.scoring import row_injection_risk
from zmem.tokens import first_sentence

MIN_APPLIED = 3
MIN_CONFIDENCE = 0.85
PROMOTE_SIGNALS = ("test", "compile", "lint")
NAME_CHARS = 64
DESCRIPTION_CHARS = 300  # well inside Claude Code's 1,536 and Codex's skill-list budget
HOSTS = ("claude", "codex", "zcode")
# Where each host reads personal skills; each a folder per skill holding SKILL.md. Claude Code:
# ~/.claude/skills; Codex: $HOME/.agents/skills (not ~/.codex); ZCode: ~/.zcode/skills.
_DIR_ENV = {host: f"ZMEM_SKILLS_{host.upper()}" for host in HOSTS}
_DIR_DEFAULT = {"claude": ".claude/skills", "codex": ".agents/skills", "zcode": ".zcode/skills"}
_FRONTMATTER = re.compile(r"\A---\n(.*?)\n---\n", re.DOTALL)


def ladder(m: Memory) -> list[str]:
    """Why `m` is not a candidate (empty: it is). Passive exposure (retrievals, surfaces) is
    deliberately absent: only explicit feedback can promote."""
    why = []
    if not m.live:
        why.append("it is not live")
    if m.type != "lesson":
        why.append(f"it is a {m.type}, not a lesson")
    if m.signal not in PROMOTE_SIGNALS:
        why.append(f"its signal is {m.signal}, not test, compile or lint")
    if m.confidence < MIN_CONFIDENCE:
        why.append(f"confidence {m.confidence:.2f} is under {MIN_CONFIDENCE}")
    if m.violated_count > 0:
        why.append(f"it was violated {m.violated_count} time(s)")
    if m.applied_count < MIN_APPLIED:
        why.append(f"it was applied {m.applied_count} time(s), under {MIN_APPLIED}")
    # A skill is read into every session: nothing that reads as an instruction to the model
    # or holds a secret goes there, whatever its counters say.
    if row_injection_risk(m):
        why.append("it is flagged as possible prompt injection")
    if find_secrets(m.content):
        why.append("it holds secret-like text")
    return why


def skill_name(m: Memory) -> str:
    """zmem-<first words>-<id prefix>: lowercase, digits and hyphens, as all three hosts take."""
    words = re.findall(r"[a-z0-9]+", m.content.lower())[:6]
    slug = "-".join(words)[: NAME_CHARS - 15].strip("-") or "lesson"
    return f"zmem-{slug}-{m.id.replace('-', '')[:8]}"


def _yaml_text(value: str) -> str:
    # A JSON string is a valid YAML double-quoted scalar: quotes, colons and '#' stay text.
    # The skill list shows it to the model too: no !`command` there either.
    return json.dumps(" ".join(value.split()).replace("!`", "! `"), ensure_ascii=False)


def _body_text(content: str) -> str:
    """The lesson as skill text. Claude Code runs !`command` in a skill body when it loads the
    skill, so the sequence is broken up; a line of three dashes would end the frontmatter in a
    naive reader, so it is indented."""
    text = content.replace("!`", "! `")
    return "\n".join(" ---" if line.strip() == "---" else line for line in text.splitlines())


def render(m: Memory, description: str | None, when: str) -> str:
    if description is not None:
        description = " ".join(description.split())
        if not description:
            raise UsageError("--description must not be empty")
        if len(description) > DESCRIPTION_CHARS:
            raise UsageError(f"--description is longer than {DESCRIPTION_CHARS} characters")
    else:
        lead = first_sentence(m.content)
        description = f"Use when this applies: {lead}"[:DESCRIPTION_CHARS]
    name = skill_name(m)
    title = first_sentence(m.content)[:120]
    return (
        f"---\nname: {name}\ndescription: {_yaml_text(description)}\n---\n\n"
        f"# {_body_text(title)}\n\n{_body_text(m.content)}\n\n"
        "## Where this comes from\n\n"
        f"A ZMem lesson ({m.namespace}, memory {m.id}), grounded by {m.signal} "
        f"(confidence {m.confidence:.2f}), applied {m.applied_count} times and never "
        f"violated by the time it was promoted on {when[:10]}. If it stops holding, record "
        f"that with `zmem feedback --id {m.id} --violated`.\n"
    )


def candidate_dir(data_dir: Path, m: Memory) -> Path:
    return data_dir / "promote" / skill_name(m)


def _atomic(path: Path, text: str) -> None:
    outputs.write_text(path, lambda write: write(text), f"write {path.name}")


def write_candidate(data_dir: Path, m: Memory, text: str) -> Path:
    folder = candidate_dir(data_dir, m)
    _atomic(folder / "SKILL.md", text)
    meta = {"memory_id": m.id, "sha256": hashlib.sha256(text.encode()).hexdigest()}
    _atomic(folder / "candidate.json", json.dumps(meta, indent=2) + "\n")
    return folder / "SKILL.md"


def reviewed(data_dir: Path, m: Memory) -> tuple[Path, str, bool]:
    """The candidate as the reviewer left it: (path, text, edited since written). Refused when
    there is none, or when its frontmatter no longer names the skill and describes it."""
    path = candidate_dir(data_dir, m) / "SKILL.md"
    try:
        text = path.read_text(encoding="utf-8")
        meta = json.loads((path.parent / "candidate.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        raise Refusal(
            f"no review candidate for {m.id}: write one with `zmem promote --id {m.id} "
            "--confirm`, review it, then install it with --install-approved"
        ) from None
    head = _FRONTMATTER.match(text)
    fields = dict(
        line.split(":", 1) for line in (head.group(1).splitlines() if head else []) if ":" in line
    )
    named = fields.get("name", "").strip() == path.parent.name
    if not named or not fields.get("description", "").strip():
        raise Refusal(
            f"{path}: the frontmatter must keep `name: {path.parent.name}` and a description"
        )
    return path, text, hashlib.sha256(text.encode()).hexdigest() != meta.get("sha256")


def skill_dirs(env: Mapping[str, str] | None = None) -> dict[str, Path]:
    env = os.environ if env is None else env
    home = Path(env.get("HOME") or Path.home())
    return {
        host: Path(env[_DIR_ENV[host]]).expanduser() if env.get(_DIR_ENV[host])
        else home / _DIR_DEFAULT[host]
        for host in HOSTS
    }  # fmt: skip


def install(name: str, text: str, dirs: Mapping[str, Path]) -> dict[str, str]:
    """The reviewed SKILL.md into every host's skill folder. All three read the portable
    Agent Skills frontmatter (name, description) the candidate holds, and nothing else."""
    out = {}
    for host, root in dirs.items():
        target = root / name / "SKILL.md"
        _atomic(target, text)
        out[host] = str(target)
    return out


def summary(m: Memory) -> dict[str, Any]:
    return {
        "id": m.id,
        "namespace": m.namespace,
        "name": skill_name(m),
        "content": m.content,
        "signal": m.signal,
        "confidence": m.confidence,
        "applied_count": m.applied_count,
        "violated_count": m.violated_count,
        "trust_score": m.trust_score,
    }
