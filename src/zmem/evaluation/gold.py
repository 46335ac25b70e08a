"""The gold-set format and its validation: one JSON object per line naming a query, its tier and
options, and the fixture keys that must (expect) or must not (forbid) come back. An invalid
item is refused by line and id, before anything runs."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from zmem import config
from zmem.errors import UsageError

BUCKETS = (
    "fts",
    "as_of",
    "contested",
    "entity",
    "namespace",
    "injection",
    "retraction",
    "polarity",
    "change_intent",
    "paraphrase",
    # The coding-memory dev set's kinds (eval/coding_gold.jsonl).
    "alias",
    "keyword",
    "tool",
    "update",
    "global",
    "contradiction",
)
_KEYS = {
    "id", "bucket", "query", "namespace", "expect", "forbid", "require", "as_of",
    "include_global", "explicit", "note",
}  # fmt: skip
_FIXTURE_KEY = re.compile(r"^[A-Z]\d{2,3}$")


@dataclass(frozen=True)
class GoldItem:
    id: str
    bucket: str
    query: str
    namespace: str
    expect: tuple[str, ...]
    forbid: tuple[str, ...]
    require: str = "any"  # "all": every expected key must come back (polarity, lineage)
    as_of: str | None = None
    include_global: bool = False
    explicit: bool = False  # run on the explicit path (unfold can fire), still writing nothing


def _item(raw: object, where: str) -> GoldItem:
    if not isinstance(raw, dict):
        raise UsageError(f"{where}: not a JSON object")
    unknown = set(raw) - _KEYS
    if unknown:
        raise UsageError(f"{where}: unknown keys {sorted(unknown)}")
    for key in ("id", "bucket", "query", "namespace"):
        if not isinstance(raw.get(key), str) or not raw[key].strip():
            raise UsageError(f"{where}: '{key}' must be a non-empty string")
    if raw["bucket"] not in BUCKETS:
        raise UsageError(f"{where}: bucket {raw['bucket']!r} is not one of {', '.join(BUCKETS)}")
    lists = {}
    for key in ("expect", "forbid"):
        value = raw.get(key, [])
        if not isinstance(value, list) or not all(
            isinstance(v, str) and _FIXTURE_KEY.match(v) for v in value
        ):
            raise UsageError(f"{where}: '{key}' must be a list of corpus keys like \"F07\"")
        lists[key] = tuple(value)
    if not lists["expect"] and not lists["forbid"]:
        raise UsageError(f"{where}: an item needs 'expect' or 'forbid' keys")
    if set(lists["expect"]) & set(lists["forbid"]):
        raise UsageError(f"{where}: a key is both expected and forbidden")
    require = raw.get("require", "any")
    if require not in ("any", "all"):
        raise UsageError(f'{where}: \'require\' must be "any" or "all"')
    for key in ("include_global", "explicit"):
        if not isinstance(raw.get(key, False), bool):
            raise UsageError(f"{where}: '{key}' must be true or false")
    as_of = raw.get("as_of")
    if as_of is not None:
        if not isinstance(as_of, str):
            raise UsageError(f"{where}: 'as_of' must be an ISO-8601 string")
        try:
            as_of = config.normalize_instant(as_of)
        except UsageError as exc:
            raise UsageError(f"{where}: {exc}") from None
    return GoldItem(
        id=raw["id"],
        bucket=raw["bucket"],
        query=raw["query"],
        namespace=raw["namespace"],
        expect=lists["expect"],
        forbid=lists["forbid"],
        require=require,
        as_of=as_of,
        include_global=raw.get("include_global", False),
        explicit=raw.get("explicit", False),
    )


def load(path: Path) -> list[GoldItem]:
    """Every item of a gold JSONL file, validated; blank lines are skipped."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise UsageError(f"cannot read gold set {path}: {exc.strerror}") from None
    items: list[GoldItem] = []
    seen: set[str] = set()
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            raw = json.loads(line)
        except json.JSONDecodeError as exc:
            raise UsageError(f"gold line {number}: invalid JSON ({exc.msg})") from None
        label = raw.get("id") if isinstance(raw, dict) else None
        where = f"gold line {number}" + (f" (id {label})" if label else "")
        item = _item(raw, where)
        if item.id in seen:
            raise UsageError(f"{where}: duplicate id")
        seen.add(item.id)
        items.append(item)
    if not items:
        raise UsageError(f"gold set {path} holds no items")
    return items
