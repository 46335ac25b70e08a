#!/usr/bin/env python3
"""Recall per dev set and kind before and after `consolidate` + `organize`, on the same store.

Each set is built with MiniLM the way scripts/eval_quality.py builds it (zmem.evaluation.harness
and fixture, the fixture's pinned clocks), every gold item is recalled hybrid and passive with
the global tier (as the prompt hook asks; no MMR, no link expansion: the runner's defaults),
then `MemoryStore.consolidate(force=True)` (default threshold) and `MemoryStore.organize(
force=True)` run on that store at MAINTAIN_AT (after the corpus's last event, before the
queries' clock) and every item is recalled again. Printed per set and side (validation, the
figures to quote; tune; the fixture whole): hit@5, MRR and forbidden rows per kind, before and
after, live rows before and after, the clusters merged, and every item whose hit changed.

Why the harness's matcher is wrapped: the harness names rows by corpus key through the
key -> memory id map made at build time, and scores a returned row only when it IS the
expected row. Consolidation retires rows: an absorbed row is tombstoned, and a keeper whose
text grows becomes a new row (new id, `update_of` = the old keeper, `merged_from` = the
absorbed ids, `:truncated` marking a text left out); organize may compress it into yet another
row. Those rows carry the expected fact but no key, so the unwrapped matcher would count them
as misses. Here a returned row counts for key X when X's row is the row itself, is in its
`merged_from` (suffix stripped), or is reached through `update_of` / `merged_from`
transitively. `update_of` is followed only from rows that maintenance wrote: an update the
corpus itself made (a new fact replacing an old one) must not count as the old fact, or the
update and as_of kinds would score stale rows as hits. A merged row that stands for a
forbidden row counts as returning it. The harness's own figures ("after, unmapped") are
printed beside the mapped ones; before maintenance the two agree on the dev sets.

History checks: every row that existed before maintenance keeps its text; a point-in-time
list at each gold as_of instant and just before MAINTAIN_AT returns the same rows as before;
as_of items are compared row for row (ids, in order), before and after.

The `adversarial` set is the coding corpus plus generated rows (seeded, deterministic):
paraphrased duplicates of ~15% of its rows (2-6 edits: clause order, a filler word added or
dropped, synonyms, a context sentence added, or only the first clause kept), and rows that
differ from an existing one ONLY by a number (n -> 2n) or ONLY by polarity (always/never, a
`not` added or removed). The gold set is the coding one, unchanged; a duplicate that kept all
its source's text counts as its source before maintenance as well as after. A number or
polarity variant must come out of the run as a row of its own: one folded at write or merged
with a row of its family (its source, a duplicate of it) is reported as a bug. Duplicates are
reported by band: at the write path's dedup level they fold at build; between 0.80 and that
level only consolidation can merge them.

Run-to-run variance: every base row is written at one instant, so among rows of equal
confidence and no use the keeper is picked by uuid order; which text leads a merged row (and,
rarely, which rows cluster) varies between runs. The dev sets are untouched by it.

    .venv/bin/python scripts/eval_maintenance.py [--work DIR]
        [--sets coding,paraphrase,fixture,adversarial] [--seed N] [--json-out F]
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
import os
import random
import re
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

from zmem import config
from zmem.capture import stance
from zmem.evaluation import fixture, gold, harness, runner
from zmem.evaluation.environment import restored_env
from zmem.evaluation.gold import GoldItem
from zmem.models import Memory
from zmem.retrieval import fusion
from zmem.retrieval.fusion import DEFAULT_WEIGHTS
from zmem.store import MemoryStore
from zmem.tokens import jaccard, number_tokens, similarity_norm, words

sys.path.insert(0, str(Path(__file__).resolve().parent))
eval_quality = importlib.import_module("eval_quality")  # the sets and their tune/validation split

ROOT = Path(__file__).resolve().parents[1]
EVAL = ROOT / "eval"
K = 5
MODE = "hybrid"
MAINTAIN_AT = "2026-02-28T09:00:00Z"  # after every corpus event, before fixture.QUERY_AT
SUMMARY_PREFIX = "organize:"
ADVERSARIAL = "adversarial"
DEFAULT_SETS = ("coding", "paraphrase", "fixture", ADVERSARIAL)


# ---- the matcher, wrapped ------------------------------------------------------------------------


class _Recorder:
    """The store as runner.run_item sees it: each distinct request is read once and kept, so
    the harness's matcher and the wrapped one score the very same result list."""

    def __init__(self, store: MemoryStore):
        self.store = store
        self.cache: dict[str, Any] = {}
        self.last: Any = None

    def read(self, req: Any) -> Any:
        key = repr(req)
        if key not in self.cache:
            self.cache[key] = self.store.read(req)
        self.last = self.cache[key]
        return self.last


class Lineage:
    """What each row of a store stands for, in corpus keys: its own key, and the keys of the
    rows maintenance folded into it (see the module docstring). `same_as` names generated
    duplicates that say all their source says (adversarial set): they count as the source
    before maintenance as well as after, so merging them gains nothing by itself."""

    def __init__(
        self,
        store: MemoryStore,
        ids: Mapping[str, str],
        pre: set[str] | None,
        same_as: Mapping[str, str] | None = None,
    ):
        self.rows: dict[str, Memory] = {m.id: m for m in store.list(include_superseded=True)}
        self.keys_of: dict[str, set[str]] = {}  # a row's own keys (several: folded at write)
        for key, mid in ids.items():
            self.keys_of.setdefault(mid, set()).add(key)
        self.same_as = dict(same_as or {})
        self.pre = pre if pre is not None else set(self.rows)
        self._memo: dict[str, frozenset[str]] = {}

    def stands_for(self, mid: str) -> frozenset[str]:
        """Ids of the rows `mid` stands for, itself included."""
        if mid in self._memo:
            return self._memo[mid]
        self._memo[mid] = frozenset({mid})  # a cycle guard; never expected
        out = {mid}
        m = self.rows.get(mid)
        if m is not None:
            for src in m.merged_from:
                out |= self.stands_for(src.removesuffix(":truncated"))
            if mid not in self.pre and m.update_of:
                out |= self.stands_for(m.update_of)
        self._memo[mid] = frozenset(out)
        return self._memo[mid]

    def keys(self, mid: str) -> set[str]:
        own = self.own_keys(mid)
        return own | {self.same_as[k] for k in own if k in self.same_as}

    def own_keys(self, mid: str) -> set[str]:
        return {k for x in self.stands_for(mid) for k in self.keys_of.get(x, ())}

    def label(self, mid: str) -> str:
        """How a row is printed: its key; a maintenance row as `keeper+n` (n rows folded in);
        an organize summary as `topic`; `?` for anything else."""
        own = sorted(self.keys_of.get(mid, ()))
        m = self.rows.get(mid)
        if m is not None and (m.source_ref or "").startswith(SUMMARY_PREFIX):
            return "topic"
        keys = sorted(self.own_keys(mid))
        if own and len(keys) == len(own):
            return own[0]
        if not keys:
            return "?"
        head = own[0] if own else _key_of_ref(m) or keys[0]
        return f"{head}+{len(keys) - 1}" if len(keys) > 1 else f"{head}'"

    def live_for(self, mid: str) -> list[str]:
        """The live rows that stand for `mid` (itself if it is still live)."""
        return [r for r, m in self.rows.items() if m.live and mid in self.stands_for(r)]


def _key_of_ref(m: Memory | None) -> str | None:
    ref = (m.source_ref or "") if m else ""
    return ref[len(fixture.KEY_PREFIX) :] if ref.startswith(fixture.KEY_PREFIX) else None


class _ItemKeys(Mapping[str, str]):
    """runner.run_item's `key_of` for one item: a row is named by the expected key it stands
    for (else a forbidden one, else its label), so the harness's own matcher scores it."""

    def __init__(self, lineage: Lineage, item: GoldItem):
        self.lineage, self.item = lineage, item

    def __getitem__(self, mid: str) -> str:
        keys = self.lineage.keys(mid)
        for k in (*self.item.expect, *self.item.forbid):
            if k in keys:
                return k
        if mid not in self.lineage.rows:
            raise KeyError(mid)
        return self.lineage.label(mid)

    def __iter__(self) -> Iterator[str]:
        return iter(self.lineage.rows)

    def __len__(self) -> int:
        return len(self.lineage.rows)


def evaluate(
    store: MemoryStore, items: Sequence[GoldItem], ids: Mapping[str, str], lineage: Lineage
) -> dict[str, dict[str, Any]]:
    """{"harness": the unwrapped report, "mapped": the wrapped one}, from one read per item."""
    rec = _Recorder(store)
    strict = runner.evaluate(rec, items, ids, K, mode=MODE)  # type: ignore[arg-type]
    results = []
    for item in items:
        r = runner.run_item(rec, item, _ItemKeys(lineage, item), K, mode=MODE)  # type: ignore[arg-type]
        hits = rec.last.hits
        r["returned_ids"] = [h.id for h in hits]
        r["labels"] = [lineage.label(h.id) for h in hits]
        # A merged row returns every forbidden row it stands for.
        r["leaked"] = sorted({k for h in hits for k in lineage.keys(h.id) if k in item.forbid})
        r["passed"] = r["hit"] and not r["leaked"]
        r["several_expected_in_one_row"] = any(
            len(lineage.keys(h.id) & set(item.expect)) > 1 for h in hits
        )
        results.append(r)
    return {"harness": strict, "mapped": runner.score(results, items, K)}


# ---- building, maintaining, checking -------------------------------------------------------------


@contextmanager
def isolated_env(data_dir: Path) -> Iterator[None]:
    """No ZMEM_* setting of the caller's shell reaches the run (the harness isolates the ranking
    ones; the maintenance ones, ZMEM_NLI_CMD, ZMEM_KEEPER_COMPRESS_CHARS, ..., matter here
    too). ZMEM_DATA is a private folder, so the maintenance lock is this run's own, with the
    machine's MiniLM files linked in (the shared model cache, or an older data dir's own)."""
    from zmem.embedding.model_files import models_dir

    models = models_dir(config.default_data_dir())
    if not models.is_dir():
        raise SystemExit(f"eval_maintenance: no MiniLM files in {models} (run `zmem doctor`)")
    data_dir.mkdir(parents=True, exist_ok=True)
    if not (data_dir / "models").exists():
        (data_dir / "models").symlink_to(models, target_is_directory=True)
    cleared = {k: os.environ.pop(k) for k in list(os.environ) if k.startswith("ZMEM_")}
    try:
        with restored_env(
            ZMEM_EMBED_PROFILE="minilm", ZMEM_TEST_NOW=fixture.BUILD_AT, ZMEM_DATA=str(data_dir)
        ):
            yield
    finally:
        os.environ.update(cleared)


def snapshot(store: MemoryStore, instants: Sequence[str]) -> dict[str, Any]:
    rows = store.list(include_superseded=True)
    return {
        "content": {m.id: m.content for m in rows},
        "live": {m.id for m in rows if m.live},
        "as_of": {t: sorted(m.id for m in store.list(as_of=t)) for t in instants},
    }


def live_breakdown(store: MemoryStore) -> dict[str, int]:
    live = [m for m in store.list()]
    topics = sum((m.source_ref or "").startswith(SUMMARY_PREFIX) for m in live)
    return {"live": len(live), "memories": len(live) - topics, "summaries": topics}


def run_set(
    name: str,
    store_path: Path,
    gold_path: Path,
    corpus_path: Path | None,
    data_dir: Path,
    same_as: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    items = [dataclasses.replace(i, include_global=True) for i in gold.load(gold_path)]
    rows = fixture.load_corpus(corpus_path) if corpus_path is not None else None
    for suffix in ("", "-wal", "-shm"):
        Path(f"{store_path}{suffix}").unlink(missing_ok=True)
    latest = max([fixture.SECOND_CHANGE_AT, *(r.at for r in rows or () if r.at)])
    if not latest < MAINTAIN_AT < fixture.QUERY_AT:
        raise SystemExit(f"eval_maintenance: {MAINTAIN_AT} is not after {latest} and before now")
    before_maint = config.format_instant(config.parse_instant(MAINTAIN_AT) - timedelta(seconds=1))
    instants = sorted({i.as_of for i in items if i.as_of} | {before_maint})
    out: dict[str, Any] = {"name": name, "timings": {}}
    with isolated_env(data_dir):
        t0 = time.perf_counter()
        store, ids = harness._open(store_path, rows)
        try:
            out["timings"]["build_s"] = time.perf_counter() - t0
            os.environ["ZMEM_TEST_NOW"] = fixture.QUERY_AT
            t0 = time.perf_counter()
            pre = snapshot(store, instants)
            before = evaluate(store, items, ids, Lineage(store, ids, None, same_as))
            out["timings"]["eval_before_s"] = time.perf_counter() - t0
            out["live_before"] = live_breakdown(store)

            os.environ["ZMEM_TEST_NOW"] = MAINTAIN_AT
            t0 = time.perf_counter()
            cons = store.consolidate(force=True).to_dict()
            out["timings"]["consolidate_s"] = time.perf_counter() - t0
            # The fixed point (issue 34): a second run on the store the first one finished.
            again = store.consolidate(force=True).to_dict()
            cons["second_run"] = {k: again.get(k, 1) for k in ("merged", "absorbed", "rounds")}
            t0 = time.perf_counter()
            org = store.organize(force=True).to_dict()
            out["timings"]["organize_s"] = time.perf_counter() - t0

            os.environ["ZMEM_TEST_NOW"] = fixture.QUERY_AT
            t0 = time.perf_counter()
            lineage = Lineage(store, ids, set(pre["content"]), same_as)
            after = evaluate(store, items, ids, lineage)
            out["timings"]["eval_after_s"] = time.perf_counter() - t0
            post = snapshot(store, instants)
            out["live_after"] = live_breakdown(store)
            out["diagnostics"] = diagnose(store, items, ids, lineage, before, after)
        finally:
            store.close()
    out.update(items=items, ids=ids, before=before, after=after, lineage=lineage)
    out["consolidate"], out["organize"] = cons, org
    out["history"] = history_checks(items, pre, post, before, after)
    return out


def history_checks(
    items: Sequence[GoldItem],
    pre: dict[str, Any],
    post: dict[str, Any],
    before: dict[str, Any],
    after: dict[str, Any],
) -> dict[str, Any]:
    changed = [i for i, text in pre["content"].items() if post["content"].get(i) != text]
    as_of_lists = {
        t: pre["as_of"][t] == post["as_of"][t] for t in pre["as_of"]
    }  # point-in-time lists
    b = {r["id"]: r for r in before["mapped"]["per_item"]}
    a = {r["id"]: r for r in after["mapped"]["per_item"]}
    dated = [i.id for i in items if i.as_of]
    differing = {
        i: {
            "same_set": set(b[i]["returned_ids"]) == set(a[i]["returned_ids"]),
            "same_hit_and_rank": (b[i]["hit"], b[i]["first_rank"])
            == (a[i]["hit"], a[i]["first_rank"]),
            "before": b[i]["labels"],
            "after": a[i]["labels"],
        }
        for i in dated
        if b[i]["returned_ids"] != a[i]["returned_ids"]
    }
    return {
        "rows_with_changed_text": changed,
        "as_of_lists_equal": as_of_lists,
        "as_of_items": len(dated),
        "as_of_items_same_rows": len(dated) - len(differing),
        "as_of_items_differing": differing,
    }


def diagnose(
    store: MemoryStore,
    items: Sequence[GoldItem],
    ids: Mapping[str, str],
    lineage: Lineage,
    before: dict[str, Any],
    after: dict[str, Any],
) -> dict[str, Any]:
    """For each item whose mapped hit changed: where its expected rows went, what the merged
    row says, and the expected row's rank when 50 rows are asked for."""
    b = {r["id"]: r for r in before["mapped"]["per_item"]}
    out: dict[str, Any] = {}
    rec = _Recorder(store)
    for item, r in zip(items, after["mapped"]["per_item"], strict=True):
        was = b[item.id]
        if was["hit"] == r["hit"] and was["first_rank"] == r["first_rank"]:
            continue
        fates = {}
        for key in item.expect:
            mid = ids[key]
            live = lineage.live_for(mid)
            fates[key] = [
                {
                    "label": lineage.label(x),
                    "same_row": x == mid,
                    "stands_for": sorted(lineage.keys(x)),
                    "content": lineage.rows[x].content,
                }
                for x in live
            ]
        deep = runner.run_item(rec, item, _ItemKeys(lineage, item), 50, mode=MODE)  # type: ignore[arg-type]
        reference = config.parse_instant(item.as_of or fixture.QUERY_AT)
        place = deep["first_rank"] or K
        shown = [h for h in rec.last.hits if not h.extra][: max(place, K)]
        ranked = [
            {
                "label": lineage.label(h.id),
                "expected": bool(lineage.keys(h.id) & set(item.expect)),
                "content": h.memory.content,
                **score_parts(h, reference, lineage),
            }
            for h in shown[:place]
        ]
        out[item.id] = {
            "bucket": item.bucket,
            "query": item.query,
            "namespace": item.namespace,
            "expect": list(item.expect),
            "before": {"hit": was["hit"], "rank": was["first_rank"], "returned": was["labels"]},
            "after": {"hit": r["hit"], "rank": r["first_rank"], "returned": r["labels"]},
            "rank_of_expected_at_50": deep["first_rank"],
            "expected_now": fates,
            "ranked_to_expected": ranked,
        }
    return out


def score_parts(hit: Any, reference: Any, lineage: Lineage) -> dict[str, Any]:
    """A hit's score and the parts that moved under maintenance. For a row maintenance wrote,
    `score_at_members_age` is its score had it kept the age of its newest member (its
    refreshed_at, else valid_from): the merge itself resets the age to the merge instant."""
    m = hit.memory
    recency = fusion.recency(m.refreshed_at or m.valid_from, reference)
    out = {
        "score": hit.score,
        "relevance": hit.relevance,
        "confidence": hit.effective_confidence,
        "recency": recency,
        "score_at_members_age": None,
    }
    if m.id not in lineage.pre or m.merged_from:
        ages = [
            # A keeper merged in place had its refreshed_at overwritten: its valid_from stands.
            lineage.rows[x].valid_from
            if x == m.id
            else (lineage.rows[x].refreshed_at or lineage.rows[x].valid_from)
            for x in lineage.stands_for(m.id)
            if x in lineage.pre
        ]
        kept = fusion.recency(max(ages), reference) if ages else recency
        out["score_at_members_age"] = hit.score - DEFAULT_WEIGHTS.recency * (recency - kept)
    return out


# ---- the adversarial corpus ----------------------------------------------------------------------

_CODE = re.compile(r"(`[^`]*`)")
SYNONYMS = {
    "run": "execute", "runs": "executes", "because": "since", "fails": "breaks",
    "fail": "break", "before": "prior to", "uses": "relies on", "prefers": "favours",
    "likes": "enjoys", "needs": "requires", "need": "require", "check": "verify",
    "keeps": "retains", "keep": "retain", "every": "each", "also": "additionally",
    "usually": "typically", "wrong": "incorrect", "slow": "sluggish", "fast": "quick",
    "lives": "resides", "stays": "remains", "shows": "displays", "instead of": "rather than",
    "roughly": "about", "whole": "entire", "make sure": "ensure", "large": "big",
    "start": "begin", "starts": "begins", "broken": "faulty", "quickly": "rapidly",
    "add": "include", "adds": "includes", "pick": "choose", "picks": "chooses",
    "after": "following", "set": "configure", "get": "obtain", "gets": "obtains",
    "local": "on-machine", "locally": "on the dev machine", "under": "below",
    "error": "failure", "errors": "failures", "test": "check", "tests": "checks",
    "new": "fresh", "old": "previous", "files": "documents", "change": "modification",
    "changes": "modifications", "team": "group", "code": "source", "hours": "hrs",
    "minutes": "mins", "via": "through", "with": "using", "from": "out of",
    "default": "standard", "build": "compile", "builds": "compiles", "deploy": "release",
    "deploys": "releases", "reports": "summaries", "writes": "produces", "rejects": "refuses",
    "allowed": "permitted", "exported": "set in the environment",
}  # fmt: skip
CONTEXT = (
    "Confirmed again during the last release.",
    "This came up again in review this week.",
    "Still true as of the latest sprint.",
    "Worth repeating to anyone new on the project.",
    "We relearned this the hard way once more.",
    "Double-checked with the team lead.",
)
FILLERS_ADD = ("Note: ", "Reminder: ", "FYI: ", "Heads-up: ")
FILLERS_DROP = ("the", "also", "just", "really", "actually", "currently", "still", "always")
_NUMBER = re.compile(r"(?<![\w.\-/:$#])(\d{1,6})(?![\w.\-/:%])")
# Single flips, first match in this order: each changes the row's polarity and nothing else.
POLARITY_FLIPS = (
    (r"\bnever\b", "always"), (r"\balways\b", "never"),
    (r"\bdo not\b", "do"), (r"\bdoes not\b", "does"), (r"\bdon't\b", "do"),
    (r"\bdoesn't\b", "does"), (r"\bis not\b", "is"), (r"\bisn't\b", "is"),
    (r"\bmust not\b", "must"), (r"\bshould not\b", "should"), (r"\bcannot\b", "can"),
    (r"\bmust\b", "must not"), (r"\bshould\b", "should not"), (r"\bare\b", "are not"),
    (r"\bis\b", "is not"),
)  # fmt: skip
_LEAD = re.compile(r"^(.*?),\s+((?:when|unless|if|before|after|while|once)\b.*?)([.!?]?)$", re.S)


def _outside_code(text: str, fn: Any) -> str | None:
    """Apply fn to the first prose segment (outside `backticks`) it changes; None if none."""
    parts = _CODE.split(text)
    for i in range(0, len(parts), 2):
        new = fn(parts[i])
        if new is not None and new != parts[i]:
            parts[i] = new
            return "".join(parts)
    return None


def _case_like(word: str, like: str) -> str:
    return word[:1].upper() + word[1:] if like[:1].isupper() else word


def _sub_first(pattern: str, repl: str, text: str) -> str | None:
    rx = re.compile(pattern, re.I)
    m = rx.search(text)
    if not m:
        return None
    return text[: m.start()] + _case_like(repl, m.group(0)) + text[m.end() :]


def _balanced(text: str) -> bool:
    return text.count("`") % 2 == 0


def reorder(text: str) -> str | None:
    """A word-order change: two clauses or sentences swapped, or a trailing condition led with."""
    body = text.rstrip()
    end = body[-1] if body[-1:] in ".!?" else ""
    core = body[: len(body) - len(end)]
    for sep in ("; ", ". "):
        if sep in core:
            a, b = core.split(sep, 1)
            if _balanced(a) and _balanced(b) and len(a) > 15 and len(b) > 15:
                return f"{_capital(b)}{sep}{a}{end or '.'}"
    m = _LEAD.match(body)
    if m and _balanced(m.group(1)) and len(m.group(1)) > 15:
        lead = m.group(2)
        rest = m.group(1)
        first = rest.split(" ", 1)[0]
        rest = rest[:1].lower() + rest[1:] if first in ("The", "A", "An", "We", "It") else rest
        return f"{_capital(lead)}, {rest}{m.group(3) or '.'}"
    return None


def _capital(text: str) -> str:
    """Capitalised when its first word is a plain word (never a path or identifier)."""
    first = text.split(" ", 1)[0]
    return text[:1].upper() + text[1:] if first.isalpha() and first.islower() else text


def synonym(text: str, rng: random.Random) -> str | None:
    options = list(SYNONYMS.items())
    rng.shuffle(options)
    for word, other in options:
        new = _outside_code(text, lambda s, w=word, o=other: _sub_first(rf"\b{w}\b", o, s))
        if new is not None:
            return new
    return None


def add_filler(text: str, rng: random.Random) -> str:
    return rng.choice(FILLERS_ADD) + text


def drop_filler(text: str, rng: random.Random) -> str | None:
    options = list(FILLERS_DROP[:-1])  # "always" is polarity, never dropped here
    rng.shuffle(options)
    for word in options:
        new = _outside_code(
            text, lambda s, w=word: re.sub(rf"\b{w}\s+", "", s, count=1, flags=re.I)
        )
        if new is not None:
            return new
    return None


def trim(text: str) -> str | None:
    """The row's first clause or sentence alone: the same memory, captured in part."""
    for sep in ("; ", ". "):
        head, found, _ = text.partition(sep)
        if found and _balanced(head) and len(head) > 40:
            return head.rstrip(".") + "."
    return None


def extend(text: str, rng: random.Random) -> str:
    """The same memory with a sentence of context that changes nothing it says."""
    return text.rstrip() + " " + rng.choice(CONTEXT)


EDITS = (
    "trim",
    "order",
    "synonym",
    "synonym",
    "synonym",
    "synonym",
    "filler-",
    "extend",
    "filler+",
)


def paraphrase(text: str, rng: random.Random, strength: int) -> tuple[str, list[str]]:
    """Up to `strength` edits drawn from EDITS (each applied when it fits), applied in
    EDITS order so a prefix stays in front and an added sentence at the end."""
    done: list[str] = []
    for i in sorted(rng.sample(range(len(EDITS)), strength)):
        edit = EDITS[i]
        if edit == "trim":
            new = trim(text)
        elif edit == "order":
            new = reorder(text)
        elif edit == "synonym":
            new = synonym(text, rng)
        elif edit == "filler-":
            new = drop_filler(text, rng)
        elif edit == "extend":
            new = extend(text, rng)
        else:
            new = add_filler(text, rng)
        if new is not None and new != text:
            text, done = new, [*done, edit]
    return text, done


def number_variant(text: str, rng: random.Random) -> str | None:
    spots: list[tuple[int, int, int]] = []
    offset = 0
    for i, part in enumerate(_CODE.split(text)):
        if i % 2 == 0:
            spots += [
                (offset + m.start(), offset + m.end(), int(m.group(1)))
                for m in _NUMBER.finditer(part)
            ]
        offset += len(part)
    if not spots:
        return None
    start, end, n = rng.choice(spots)
    return text[:start] + str(n * 2 if n else 1) + text[end:]


def polarity_variant(text: str) -> str | None:
    for pattern, repl in POLARITY_FLIPS:
        new = _outside_code(text, lambda s, p=pattern, r=repl: _sub_first(p, r, s))
        if new is not None:
            return new
    return None


def adversarial_corpus(
    corpus: Path,
    gold_paths: Sequence[Path],
    out: Path,
    seed: int,
    dup_share: float,
    variant_share: float,
) -> dict[str, Any]:
    """Write the adversarial corpus to `out`; returns {"dups"|"numbers"|"polarity": {key: src}}
    and the edits made. Each new row follows its source in the file (the same namespace, type,
    signal and taint); updated rows, update rows and rows a gold item forbids are not used."""
    rng = random.Random(seed)
    raw = [json.loads(line) for line in corpus.read_text(encoding="utf-8").splitlines() if line]
    forbidden = set()
    for path in gold_paths:
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                forbidden.update(json.loads(line).get("forbid", []))
    replaced = {r["update_of"] for r in raw if r.get("update_of")}
    usable = [
        r
        for r in raw
        if not r.get("update_of") and r["key"] not in replaced and r["key"] not in forbidden
    ]
    n_dups = round(dup_share * len(raw))
    n_var = round(variant_share * len(raw))
    dups = rng.sample(usable, n_dups)
    with_numbers = [r for r in usable if number_variant(r["content"], random.Random(0))]
    numbers = rng.sample(with_numbers, min(n_var, len(with_numbers)))
    flippable = [r for r in usable if polarity_variant(r["content"])]
    flips = rng.sample(flippable, min(n_var, len(flippable)))
    after: dict[str, list[dict[str, Any]]] = {}
    made: dict[str, dict[str, str]] = {"dups": {}, "numbers": {}, "polarity": {}}
    edits: dict[str, Any] = {}
    for prefix, kind, chosen in (
        ("W", "dups", dups),
        ("N", "numbers", numbers),
        ("V", "polarity", flips),
    ):
        for n, src in enumerate(sorted(chosen, key=lambda r: r["key"]), start=1):
            if kind == "dups":
                text, how = paraphrase(src["content"], rng, rng.randint(2, 6))
            elif kind == "numbers":
                text, how = number_variant(src["content"], rng), ["number"]
            else:
                text, how = polarity_variant(src["content"]), ["polarity"]
            if not text or text == src["content"]:
                continue
            key = f"{prefix}{n:03d}"
            row = {k: v for k, v in src.items() if k not in ("key", "content", "contradicts")}
            after.setdefault(src["key"], []).append({**row, "key": key, "content": text})
            made[kind][key] = src["key"]
            edits[key] = how
    lines = []
    for r in raw:
        lines.append(r)
        lines += after.get(r["key"], [])
    out.write_text("".join(json.dumps(r) + "\n" for r in lines), encoding="utf-8")
    return {**made, "edits": edits, "texts": {r["key"]: r["content"] for r in lines}}


def adversarial_checks(result: dict[str, Any], made: dict[str, Any], store_vectors: Any) -> dict:
    """Per generated row: folded into another row at write, merged with a row of its family
    by maintenance, or a row of its own after maintenance. Duplicates also get consolidation's
    own measures against their source (token Jaccard of the similarity tokens, MiniLM cosine)
    and its guards (same numbers, same polarity)."""
    ids, lineage = result["ids"], result["lineage"]
    texts = made["texts"]
    family: dict[str, set[str]] = {}
    for kind in ("dups", "numbers", "polarity"):
        for key, src in made[kind].items():
            family.setdefault(src, {src}).add(key)
    out: dict[str, Any] = {}
    for kind in ("dups", "numbers", "polarity"):
        rows = {}
        for key, src in made[kind].items():
            if ids[key] == ids[src]:
                fate = "folded_at_write"
            elif ids[key] in {ids[k] for k in family[src] - {key}}:
                fate = "folded_at_write"  # into another row of its family
            else:
                others = {ids[k] for k in family[src] - {key}}
                holders = lineage.live_for(ids[key])
                merged = not holders or any(lineage.stands_for(h) & others for h in holders)
                fate = "merged" if merged else "own_row"
            mine = lineage.live_for(ids[key]) or [ids[key]]
            row: dict[str, Any] = {
                "source": src,
                "fate": fate,
                "with": sorted({k for h in mine for k in lineage.keys(h)} - {key}),
                "now": [lineage.rows[h].content for h in mine if lineage.rows[h].live],
            }
            if kind == "dups":
                a, b = texts[key], texts[src]
                row["jaccard"] = jaccard(
                    frozenset(similarity_norm(a).split()), frozenset(similarity_norm(b).split())
                )
                row["cosine"] = _cosine(store_vectors, a, b)
                row["same_numbers"] = number_tokens(frozenset(words(a))) == number_tokens(
                    frozenset(words(b))
                )
                row["same_polarity"] = stance.relation(a, b) != stance.OPPOSITE
            rows[key] = row
        out[kind] = rows
    return out


def _cosine(vectors: Any, a: str, b: str) -> float | None:
    import numpy as np

    va, vb = vectors.embed(a), vectors.embed(b)
    if not va or not vb:
        return None
    x = np.frombuffer(va[0], dtype=np.float32)
    y = np.frombuffer(vb[0], dtype=np.float32)
    return float(x @ y / (np.linalg.norm(x) * np.linalg.norm(y)))


# ---- printing ------------------------------------------------------------------------------------


def _subset(report: dict[str, Any], items: Sequence[GoldItem], keep: set[str]) -> dict[str, Any]:
    rows = [r for r in report["per_item"] if r["id"] in keep]
    return runner.score(rows, [i for i in items if i.id in keep], K)


def _f(v: float | None) -> str:
    return "-" if v is None else f"{v:.3f}"


def _d(a: float | None, b: float | None) -> str:
    return "-" if a is None or b is None else f"{b - a:+.3f}"


def table(result: dict[str, Any], side: str, tune: set[str] | None) -> list[str]:
    items = result["items"]
    keep_items = [
        i for i in items if side == "all" or eval_quality.side_of(i.namespace, tune) == side
    ]
    kinds = sorted({i.bucket for i in keep_items})
    b, a = result["before"], result["after"]
    out = [
        f"\n### {result['name']} ({side} side; hybrid, passive, with the global tier; "
        f"hit@{K} and MRR@{K})\n",
        "| kind | items | hit@5 before | after | Δ | MRR before | after | Δ "
        "| after, unmapped | forbidden before → after |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for kind in [*kinds, "all"]:
        keep = {i.id for i in keep_items if kind == "all" or i.bucket == kind}
        sb, sa = _subset(b["mapped"], items, keep), _subset(a["mapped"], items, keep)
        raw = _subset(a["harness"], items, keep)
        leaks_b = sum(1 for r in b["mapped"]["per_item"] if r["id"] in keep and r["leaked"])
        leaks_a = sum(1 for r in a["mapped"]["per_item"] if r["id"] in keep and r["leaked"])
        out.append(
            f"| {kind} | {len(keep)} | {_f(sb['hit_at_k'])} | {_f(sa['hit_at_k'])} "
            f"| {_d(sb['hit_at_k'], sa['hit_at_k'])} | {_f(sb['mrr'])} | {_f(sa['mrr'])} "
            f"| {_d(sb['mrr'], sa['mrr'])} | {_f(raw['hit_at_k'])} | {leaks_b} → {leaks_a} |"
        )
    return out


def summary(result: dict[str, Any]) -> list[str]:
    c, o = result["consolidate"], result["organize"]
    oc = o["consolidate"] or {}
    lb, la = result["live_before"], result["live_after"]
    h = result["history"]
    t = result["timings"]
    agree = all(
        x["hit"] == y["hit"] and x["first_rank"] == y["first_rank"]
        for x, y in zip(
            result["before"]["harness"]["per_item"],
            result["before"]["mapped"]["per_item"],
            strict=True,
        )
    )
    several = [
        r["id"] for r in result["after"]["mapped"]["per_item"] if r["several_expected_in_one_row"]
    ]
    topics_returned = sum("topic" in r["labels"] for r in result["after"]["mapped"]["per_item"])
    shared = len(result["ids"]) - len(set(result["ids"].values()))
    return [
        f"\n**{result['name']}**: live rows {lb['live']} → {la['live']} "
        f"(memories {lb['memories']} → {la['memories']}, organize summaries "
        f"{lb['summaries']} → {la['summaries']}); fewer live rows: "
        f"{'yes' if la['live'] < lb['live'] else 'NO'}, fewer live memories (summaries "
        f"aside): {'yes' if la['memories'] < lb['memories'] else 'NO'}",
        f"- consolidate: {c['merged']} cluster(s) merged, {c['absorbed']} row(s) absorbed, "
        f"{c['parked']} parked, {len(c['clusters'])} cluster(s) planned, in {c.get('rounds', 1)} "
        f"round(s); live {c['live_before']} → {c['live_after']}; a second consolidate then "
        f"merged {c['second_run']['merged']} cluster(s) ({c['second_run']['absorbed']} rows)",
        f"- organize: episode {len(o['episode_ids'])}, {oc.get('merged', 0)} more cluster(s) "
        f"merged ({oc.get('absorbed', 0)} absorbed, {oc.get('parked', 0)} parked), "
        f"{o['compressed']} compressed, {o['topics']} topic(s), {o['summaries']} summary "
        f"row(s) written, entity backfill {o['entity_backfill']}, link backfill "
        f"{o['link_backfill']}; live {o['live_before']} → {o['live_after']}",
        f"- corpus keys the write path folded into another row at build: {shared}"
        + (
            " (runner.evaluate keeps one key per row, so the unmapped column misses the "
            "others: read the mapped one)"
            if shared
            else ""
        ),
        f"- matchers agree before maintenance: {'yes' if agree else 'NO'}; items where one row "
        f"stood for several expected rows: {several or 'none'}; after-lists holding a topic "
        f"summary: {topics_returned}",
        f"- history: pre-existing rows with changed text: {len(h['rows_with_changed_text'])}; "
        f"point-in-time lists equal at {sum(h['as_of_lists_equal'].values())}/"
        f"{len(h['as_of_lists_equal'])} instants; as_of items returning the same rows: "
        f"{h['as_of_items_same_rows']}/{h['as_of_items']} in the same order",
        *(
            f"  - {i}: same rows {d['same_set']}, same hit and expected rank "
            f"{d['same_hit_and_rank']}: {d['before']} -> {d['after']}"
            for i, d in h["as_of_items_differing"].items()
        ),
        f"- time: build {t['build_s']:.1f} s, recall before {t['eval_before_s']:.1f} s, "
        f"consolidate {t['consolidate_s']:.1f} s, organize {t['organize_s']:.1f} s, recall "
        f"after {t['eval_after_s']:.1f} s",
    ]


def clusters_text(result: dict[str, Any]) -> list[str]:
    lineage = result["lineage"]
    out = []
    subs = [result["consolidate"], result["organize"]["consolidate"] or {"clusters": []}]
    for job, rep in zip(("consolidate", "organize"), subs, strict=True):
        for c in rep["clusters"]:
            members = ", ".join(
                f"{lineage.label(m['id'])} {m['action']} {m['similarity']:.2f}"
                for m in c["members"]
            )
            out.append(f"  {job}: {c['decision']} {c['namespace']} {c['type']}: {members}")
    return out


def changes_text(result: dict[str, Any], side_of: Any) -> list[str]:
    out = []
    for item_id, d in result["diagnostics"].items():
        out.append(
            f"- {item_id} [{side_of(d['namespace'])}, {d['bucket']}] {d['query']!r} expects "
            f"{d['expect']}: before hit={d['before']['hit']} rank={d['before']['rank']} "
            f"{d['before']['returned']}; after hit={d['after']['hit']} rank={d['after']['rank']} "
            f"{d['after']['returned']}; expected row's rank at limit 50: "
            f"{d['rank_of_expected_at_50']}"
        )
        for key, fates in d["expected_now"].items():
            for f in fates:
                where = "the same row" if f["same_row"] else f"{f['label']} {f['stands_for']}"
                out.append(f"    {key} is now {where}: {f['content'][:300]!r}")
            if not fates:
                out.append(f"    {key}: no live row stands for it")
        for n, x in enumerate(d["ranked_to_expected"], start=1):
            what = "expected" if x["expected"] else "above it"
            kept = x["score_at_members_age"]
            out.append(
                f"    #{n} {what}: {x['label']} score {x['score']:.3f} (relevance "
                f"{x['relevance']:.3f}, confidence {x['confidence']:.2f}, recency "
                f"{x['recency']:.3f}"
                + (f"; at its members' age {kept:.3f}" if kept is not None else "")
                + f") {x['content'][:140]!r}"
            )
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", type=Path, help="where the built stores go (default: a temp dir)")
    ap.add_argument("--sets", default=",".join(DEFAULT_SETS))
    ap.add_argument("--seed", type=int, default=16, help="the adversarial corpus's seed")
    ap.add_argument("--dup-share", type=float, default=0.15)
    ap.add_argument(
        "--variant-share",
        type=float,
        default=0.08,
        help="number variants, and polarity variants, each this share of the rows",
    )
    ap.add_argument("--show-clusters", action="store_true", help="print every planned cluster")
    ap.add_argument("--json-out", type=Path, help="also write every per-item result here")
    args = ap.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="zmem-maintenance-"))
    work.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    saved: dict[str, Any] = {}
    for name in args.sets.split(","):
        if name not in (*eval_quality.SETS, ADVERSARIAL):
            print(f"eval_maintenance: unknown set {name!r}", file=sys.stderr)
            return 2
        made = None
        if name == ADVERSARIAL:
            corpus, gold_path, tune = eval_quality.SETS["coding"]
            corpus = work / "adversarial_corpus.jsonl"
            made = adversarial_corpus(
                eval_quality.SETS["coding"][0],
                [gold_path],
                corpus,
                args.seed,
                args.dup_share,
                args.variant_share,
            )
        else:
            corpus, gold_path, tune = eval_quality.SETS[name]
        print(f"building, recalling, maintaining, recalling {name} ...", file=sys.stderr)
        # A duplicate that kept all of its source's text counts as its source, before and after.
        same_as = {
            k: src
            for k, src in (made or {}).get("dups", {}).items()
            if "trim" not in made["edits"][k]
        }
        result = run_set(name, work / f"{name}.sqlite", gold_path, corpus, work / "data", same_as)
        sides = ("all",) if tune is None else ("validation", "tune")
        for side in sides:
            print("\n".join(table(result, side, tune)))
        print("\n".join(summary(result)))
        if made is not None:
            with isolated_env(work / "data"):
                store = MemoryStore.open(
                    settings=config.load_settings(store_path=work / f"{name}.sqlite")
                )
                try:
                    checks = adversarial_checks(result, made, store.vectors)
                finally:
                    store.close()
            print("\n".join(adversarial_text(checks, made)))
            saved[f"{name}:generated"] = {"made": made, "checks": checks}
        print(f"\nItems whose hit or rank changed ({name}):")
        print(
            "\n".join(changes_text(result, lambda ns, t=tune: eval_quality.side_of(ns, t)))
            or "- none"
        )
        if args.show_clusters:
            print(f"\nClusters ({name}):")
            print("\n".join(clusters_text(result)) or "  none")
        saved[name] = {
            "before": result["before"]["mapped"]["per_item"],
            "after": result["after"]["mapped"]["per_item"],
            "after_unmapped": result["after"]["harness"]["per_item"],
            "consolidate": result["consolidate"],
            "organize": result["organize"],
            "history": result["history"],
            "live_before": result["live_before"],
            "live_after": result["live_after"],
            "diagnostics": result["diagnostics"],
            "timings": result["timings"],
        }
    print(f"\ntotal {time.perf_counter() - started:.0f} s; stores in {work}", file=sys.stderr)
    if args.json_out:
        args.json_out.write_text(json.dumps(saved, indent=1, default=str), encoding="utf-8")
    return 0


def _band(row: dict[str, Any]) -> str:
    best = max(row["jaccard"], row["cosine"] or 0.0)
    if (row["cosine"] or 0.0) >= 0.92 or row["jaccard"] >= 0.85:
        return "write-dedup level (cosine >= 0.92 or Jaccard >= 0.85)"
    if best >= 0.80:
        return "consolidation band (max(cosine, Jaccard) in [0.80, dedup level))"
    return "below 0.80"


def adversarial_text(checks: dict[str, Any], made: dict[str, Any]) -> list[str]:
    out = [
        "\nGenerated rows (adversarial):",
        "| rows | added | folded at write | merged by maintenance | own row after |",
        "| --- | --- | --- | --- | --- |",
    ]
    groups: list[tuple[str, dict[str, Any]]] = []
    dups = checks["dups"]
    for band in sorted({_band(r) for r in dups.values()}, reverse=True):
        groups.append((f"duplicates, {band}", {k: r for k, r in dups.items() if _band(r) == band}))
    groups.append(("duplicates, all", dups))
    groups.append(("number variants", checks["numbers"]))
    groups.append(("polarity variants", checks["polarity"]))
    for label, rows in groups:
        fates = [r["fate"] for r in rows.values()]
        out.append(
            f"| {label} | {len(rows)} | {fates.count('folded_at_write')} "
            f"| {fates.count('merged')} | {fates.count('own_row')} |"
        )
    for kind in ("numbers", "polarity"):
        for key, r in checks[kind].items():
            if r["fate"] != "own_row":
                out.append(
                    f"- BUG: {kind} variant {key} of {r['source']} is {r['fate']}: its row "
                    f"now also stands for {r['with']}"
                )
                for other in [key, r["source"], *r["with"]]:
                    out.append(f"    {other}: {made['texts'].get(other, '?')!r}")
                for text in r["now"]:
                    out.append(f"    the live row now: {text!r}")
    for key, r in dups.items():
        band = _band(r)
        expected = "merged" if band.startswith("consolidation") else None
        if band.startswith("write"):
            expected = "folded_at_write"
        if expected and r["fate"] != expected:
            why = []
            if not r["same_numbers"]:
                why.append("numbers differ")
            if not r["same_polarity"]:
                why.append("polarity differs")
            out.append(
                f"- duplicate {key} of {r['source']} ({band.split(' (')[0]}, Jaccard "
                f"{r['jaccard']:.2f}, cosine {r['cosine'] or 0:.3f}) is {r['fate']}"
                f"{' (' + ', '.join(why) + ')' if why else ''}: {made['texts'][key]!r}"
            )
    return out


if __name__ == "__main__":
    sys.exit(main())
