#!/usr/bin/env python3
"""Train the learned injection detector (capture/learned_injection.py), report it held out.

Data: eval/injection_set.jsonl (injection and benign texts, each in a family of variants), the
training-only eval/injection_extra.jsonl (and any --train-also set), and the coding corpus's
rows (its injection rows are those its gold set forbids on injection queries).
The split is by family (and by project for the corpus), so no variant of a held-out text is
trained on: a family or project whose stable hash is even is tune, odd is held out. On the tune
side, five family-grouped folds give out-of-fold scores; the threshold is the lowest whose
out-of-fold false-positive rate is at most --max-fp. The model is then trained on the whole tune
side and written to src/zmem/capture/injection_weights.json (bias, threshold) and
injection_weights.f32 (the bucket weights) with --write. Prints the held-out
recall and false-positive rate of the learned model, the patterns, and both together.

    .venv/bin/python scripts/train_injection.py [--write] [--max-fp 0.01] [--show-tune-errors]
        [--embedding-check] [--train-also eval/injection_extra2.jsonl] [--untrusted-max-fp 0.05]
        [--conversations ../shared/data/locomo/locomo-dev.json]

--train-also adds a training-only set (eval/injection_extra2.jsonl: more than half non-English,
with orders that name no addressee; measured in docs/decisions.md, not in the shipped model).
--untrusted-max-fp also reports a second threshold for rows of untrusted taint (every carrier
but a chat note; the corpus rows by their taint), chosen out-of-fold on the tune side's
untrusted rows at that false-positive rate, beside the shipped one threshold for all.

--conversations reads a LoCoMo JSON file at run time (never shipped: CC BY-NC) and reports how
many of its turns, stored as ZMem stores them, the shipped detector flags: benign chat, a kind of
text the training sets lack (short lines, no code).

--embedding-check (needs the MiniLM model; ZMEM_DATA names its data dir) also reports a
logistic model over the MiniLM vectors, alone and stacked with the word model, judged the same
way (threshold at --max-fp out-of-fold): the measurement behind shipping words only.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
import unicodedata
from pathlib import Path

import numpy as np

from zmem.capture.injection import injection_shapes
from zmem.capture.learned_injection import _BITS, _WEIGHTS, bucket_values

ROOT = Path(__file__).resolve().parents[1]
EVAL = ROOT / "eval"
OUT = ROOT / "src" / "zmem" / "capture" / "injection_weights.json"
CODING_TUNE = {
    "project:ferrox",
    "project:relay-mesh",
    "project:tidewater",
    "project:platform-infra",
}
# A feature seen in fewer training texts is those texts' fingerprint. L2 and the steps of
# gradient descent, by out-of-fold recall at 1% FP on the tune side averaged over four fold
# assignments (docs/decisions.md): MIN_DOCS 2 / L2 0.002 / 600 steps (shipped) 0.713; 1500
# steps 0.719; MIN_DOCS 1 0.695, 3 0.721; 1500 steps with L2 0.001 0.728, 0.0005 0.732; all
# three 0.733 (held out one text more, but weaker regularisation flagged a short benign note:
# not shipped); 3000 steps with L2 0.001 0.727. Words only, before the n-grams: L2 0.001 /
# 0.002 / 0.005 / 0.01 / 0.02 -> 0.673 / 0.677 / 0.671 / 0.630 / 0.578.
MIN_DOCS = 2
L2 = 0.002
STEPS = 600
RATE = 0.5


ENGLISH_WORDS = frozenset(
    "the and to of a in is you your for this that with it be are on not please all from "
    "before after run use any".split()
)


def language_family(text: str) -> str:
    """english, other-latin or non-latin, for the held-out report: the script most of the
    letters are in (a few look-alike letters in English text stay Latin), then English words."""
    latin = other = 0
    for ch in text:
        if ch.isalpha():
            if ch.isascii() or unicodedata.name(ch, "").startswith("LATIN"):
                latin += 1
            else:
                other += 1
    if other > latin:
        return "non-latin"
    words = re.findall(r"[a-z]+", text.lower())
    english = sum(w in ENGLISH_WORDS for w in words)
    return "english" if english >= max(1, len(words) // 12) else "other-latin"


def _half(name: str) -> str:
    return "tune" if int(hashlib.sha256(name.encode()).hexdigest(), 16) % 2 == 0 else "heldout"


def load(train_also: list[Path] | None = None) -> list[dict]:
    rows = []
    for line in (EVAL / "injection_set.jsonl").read_text(encoding="utf-8").splitlines():
        r = json.loads(line)
        rows.append({"text": r["text"], "y": int(r["label"] == "injection"), "group": r["family"],
                     "side": _half(r["family"]), "source": "injection_set",
                     "untrusted": r["carrier"] != "chat_note"})  # fmt: skip
    # Blind-written sets for training only: the held-out half stays what it was.
    for path in [EVAL / "injection_extra.jsonl", *(train_also or [])]:
        for line in path.read_text(encoding="utf-8").splitlines():
            r = json.loads(line)
            rows.append({"text": r["text"], "y": int(r["label"] == "injection"),
                         "group": r["family"], "side": "tune", "source": path.stem,
                         "untrusted": r["carrier"] != "chat_note"})  # fmt: skip
    forbidden = set()
    for line in (EVAL / "coding_gold.jsonl").read_text(encoding="utf-8").splitlines():
        g = json.loads(line)
        if g["bucket"] == "injection":
            forbidden.update(g["forbid"])
    for line in (EVAL / "coding_corpus.jsonl").read_text(encoding="utf-8").splitlines():
        r = json.loads(line)
        ns = r["namespace"]
        side = (
            ("tune" if ns in CODING_TUNE else "heldout")
            if ns.startswith("project:")
            else (_half(r["key"]))
        )
        taint = r.get("taint", "trusted_internal")
        rows.append({"text": r["content"], "y": int(r["key"] in forbidden), "group": r["key"],
                     "side": side, "source": "coding_corpus",
                     "untrusted": taint != "trusted_internal"})  # fmt: skip
    return rows


def fit(
    feats: list[dict[int, float]], y: np.ndarray, l2_weight: float = L2
) -> tuple[np.ndarray, float]:
    """Balanced logistic regression over hashed feature buckets (full-batch gradient descent on
    a sparse matrix held as row/column/value triples). A bucket seen in fewer than MIN_DOCS
    training texts keeps weight 0."""
    docs = np.zeros(1 << _BITS, dtype=np.int64)
    for f in feats:
        docs[list(f)] += 1
    rows, cols, vals = [], [], []
    for row, f in enumerate(feats):
        for bucket, value in f.items():
            if docs[bucket] >= MIN_DOCS:
                rows.append(row)
                cols.append(bucket)
                vals.append(value)
    r, c, v = np.array(rows), np.array(cols), np.array(vals)
    # Balanced classes: injections are the minority, and a missed one costs what it costs.
    pos = max(1, int(y.sum()))
    weight = np.where(y == 1, len(y) / (2 * pos), len(y) / (2 * max(1, len(y) - pos)))
    w = np.zeros(1 << _BITS, dtype=np.float64)
    b = 0.0
    for _ in range(STEPS):
        z = np.bincount(r, weights=v * w[c], minlength=len(feats)) + b
        grad = (1.0 / (1.0 + np.exp(-z)) - y) * weight
        w -= RATE * (np.bincount(c, weights=v * grad[r], minlength=len(w)) / len(y) + l2_weight * w)
        b -= RATE * float(grad.mean())
    # Scored as shipped: the weights file holds float32.
    return w.astype(np.float32).astype(np.float64), float(np.float32(b))


def fit_dense(x: np.ndarray, y: np.ndarray, l2_weight: float) -> tuple[np.ndarray, float]:
    """Balanced logistic regression over dense features (the embedding check)."""
    pos = max(1, int(y.sum()))
    weight = np.where(y == 1, len(y) / (2 * pos), len(y) / (2 * max(1, len(y) - pos)))
    w = np.zeros(x.shape[1])
    b = 0.0
    for _ in range(800):
        p = 1.0 / (1.0 + np.exp(-(x @ w + b)))
        grad = (p - y) * weight
        w -= RATE * (x.T @ grad / len(y) + l2_weight * w)
        b -= RATE * float(grad.mean())
    return w, b


def threshold_at(oof: list[tuple[float, int]], max_fp: float) -> float:
    """The lowest score threshold whose out-of-fold false-positive rate is at most max_fp."""
    benign = sorted((s for s, y in oof if y == 0), reverse=True)
    allowed = int(max_fp * len(benign))
    return benign[allowed] + 1e-6 if allowed < len(benign) else float("-inf")


def _fold(r: dict, salt: str, n: int) -> int:
    return int(hashlib.sha256((salt + r["group"]).encode()).hexdigest(), 16) % n


def embedding_scorers(train: list[dict], l2_weight: float) -> dict:
    """Score functions for the embedding check: vectors alone, and stacked with the words (a
    two-weight model fitted on inner out-of-fold scores, so the stack never sees its own
    training scores)."""

    def dense(rows: list[dict]):
        w, b = fit_dense(np.stack([r["e"] for r in rows]) * 10.0, np.array(
            [r["y"] for r in rows], dtype=np.float64), 0.001)  # fmt: skip
        return lambda r: float(r["e"] * 10.0 @ w + b)

    def words(rows: list[dict]):
        model = fit([r["f"] for r in rows], np.array([r["y"] for r in rows], np.float64), l2_weight)
        return lambda r: score(model, r["f"])

    inner = []
    for k in range(4):
        tr = [r for r in train if _fold(r, "inner", 4) != k]
        a, c = words(tr), dense(tr)
        inner += [([a(r), c(r)], r["y"]) for r in train if _fold(r, "inner", 4) == k]
    w, b = fit_dense(np.array([x for x, _ in inner]), np.array([t for _, t in inner], float), 0.0)
    a, c = words(train), dense(train)
    return {"embedding alone": c, "embedding stacked with words": lambda r: float(
        np.array([a(r), c(r)]) @ w + b)}  # fmt: skip


def embedding_check(tune: list[dict], held: list[dict], rows: list[dict], args) -> None:
    from zmem.config import default_data_dir
    from zmem.embedding import get_embedder

    vectors = get_embedder("minilm", default_data_dir()).embed([r["text"] for r in rows])
    for r, v in zip(rows, vectors, strict=True):
        r["e"] = np.asarray(v, dtype=np.float64)
    print("\n| held-out, with the MiniLM vectors | recall | false positives |\n| --- | --- | --- |")
    for name in ("embedding alone", "embedding stacked with words"):
        oof: list[tuple[float, int]] = []
        for k in range(5):
            fn = embedding_scorers([r for r in tune if _fold(r, "fold", 5) != k], args.l2)[name]
            oof += [(fn(r), r["y"]) for r in tune if _fold(r, "fold", 5) == k]
        threshold = threshold_at(oof, args.max_fp)
        fn = embedding_scorers(tune, args.l2)[name]
        pos = [r for r in held if r["y"] == 1]
        neg = [r for r in held if r["y"] == 0]
        tp = sum(1 for r in pos if fn(r) >= threshold or injection_shapes(r["text"]))
        fp = sum(1 for r in neg if fn(r) >= threshold or injection_shapes(r["text"]))
        print(f"| {name}, or patterns | {tp}/{len(pos)} = {tp / len(pos):.3f} | "
              f"{fp}/{len(neg)} = {fp / len(neg):.4f} |")  # fmt: skip


def score(model: tuple[np.ndarray, float], f: dict[int, float]) -> float:
    weights, bias = model
    return bias + sum(float(weights[k]) * v for k, v in f.items())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--write", action="store_true", help="write the weights file")
    ap.add_argument(
        "--max-fp",
        type=float,
        default=0.01,
        help="out-of-fold FP rate to allow on the tune side (default 0.01, the issue's bound)",
    )
    ap.add_argument("--l2", type=float, default=L2, help=f"regularisation (default {L2})")
    ap.add_argument(
        "--show-tune-errors", action="store_true", help="print the tune side's out-of-fold errors"
    )
    ap.add_argument(
        "--embedding-check",
        action="store_true",
        help="also judge MiniLM-vector models (alone and stacked with the words)",
    )
    ap.add_argument(
        "--train-also",
        type=Path,
        action="append",
        default=[],
        help="a training-only JSONL set (label, family, carrier, text) to add",
    )
    ap.add_argument(
        "--untrusted-max-fp",
        type=float,
        help="also report a threshold for untrusted rows at this out-of-fold FP rate",
    )
    ap.add_argument(
        "--conversations",
        type=Path,
        help="a LoCoMo JSON file: report how many of its (benign) turns are flagged",
    )
    args = ap.parse_args()
    rows = load(args.train_also)
    for r in rows:
        r["f"] = bucket_values(r["text"])
    tune = [r for r in rows if r["side"] == "tune"]
    held = [r for r in rows if r["side"] == "heldout"]
    # Out-of-fold scores on the tune side, folds by group, for the threshold.
    oof: list[tuple[float, int]] = []
    oof_rows: list[dict] = []
    for fold in range(5):
        train = [r for r in tune if _fold(r, "fold", 5) != fold]
        model = fit(
            [r["f"] for r in train], np.array([r["y"] for r in train], dtype=np.float64), args.l2
        )
        held_fold = [r for r in tune if _fold(r, "fold", 5) == fold]
        oof += [(score(model, r["f"]), r["y"]) for r in held_fold]
        oof_rows += held_fold
    threshold = threshold_at(oof, args.max_fp)
    oof_recall = sum(1 for s, y in oof if y == 1 and s >= threshold) / max(
        1, sum(y for _, y in oof)
    )
    model = fit([r["f"] for r in tune], np.array([r["y"] for r in tune], dtype=np.float64), args.l2)

    def report(name: str, flagged, pool: list[dict] | None = None) -> str:
        pool = held if pool is None else pool
        pos = [r for r in pool if r["y"] == 1]
        neg = [r for r in pool if r["y"] == 0]
        tp = sum(1 for r in pos if flagged(r))
        fp = sum(1 for r in neg if flagged(r))
        return (f"| {name} | {tp}/{len(pos)} = {tp / len(pos):.3f} | "
                f"{fp}/{len(neg)} = {fp / len(neg):.4f} |")  # fmt: skip

    learned = lambda r: score(model, r["f"]) >= threshold  # noqa: E731
    patterns = lambda r: bool(injection_shapes(r["text"]))  # noqa: E731
    print(f"tune: {len(tune)} texts ({sum(r['y'] for r in tune)} injections); held out: "
          f"{len(held)} ({sum(r['y'] for r in held)} injections); threshold {threshold:.3f}, "
          f"out-of-fold recall {oof_recall:.3f} at FP <= {args.max_fp}")  # fmt: skip
    shipped = lambda r: patterns(r) or learned(r)  # noqa: E731
    print("\n| held-out detector | recall | false positives |\n| --- | --- | --- |")
    print(report("patterns only (before)", patterns))
    print(report("learned model", learned))
    print(report("patterns or learned (shipped)", shipped))
    own = [r for r in held if r["source"] == "injection_set"]
    print(report("shipped, injection set's held-out half alone", shipped, own))
    print("\n| held out, shipped, by language family | recall | false positives |")
    print("| --- | --- | --- |")
    for family in ("english", "other-latin", "non-latin"):
        pool = [r for r in held if language_family(r["text"]) == family]
        if any(r["y"] for r in pool) and any(not r["y"] for r in pool):
            print(report(family, shipped, pool))
        else:
            pos = sum(r["y"] for r in pool)
            print(f"| {family} | {pos} injections, {len(pool) - pos} benign: not reported |")
    if args.conversations is not None:
        from zmem.evaluation import locomo

        turns = [t.content for c in locomo.load(args.conversations).conversations for t in c.turns]
        flagged = [t for t in turns if shipped({"text": t, "f": bucket_values(t)})]
        print(f"\nbenign conversation turns flagged ({args.conversations.name}): "
              f"{len(flagged)}/{len(turns)} = {len(flagged) / max(1, len(turns)):.4f}")  # fmt: skip
    if args.untrusted_max_fp is not None:
        # Out-of-fold scores of the tune side's untrusted rows only, for their own threshold.
        untrusted_oof = [sy for sy, r in zip(oof, oof_rows, strict=True) if r["untrusted"]]
        low = threshold_at(untrusted_oof, args.untrusted_max_fp)
        print(f"\nuntrusted rows' threshold {low:.3f} (out-of-fold FP <= "
              f"{args.untrusted_max_fp} on the tune side's untrusted rows); trusted rows keep "
              f"{threshold:.3f}")  # fmt: skip
        print("\n| held out | recall | false positives |\n| --- | --- | --- |")
        for name, pool in (
            ("untrusted rows, one threshold (shipped)", [r for r in held if r["untrusted"]]),
            ("trusted rows, one threshold (shipped)", [r for r in held if not r["untrusted"]]),
        ):
            if any(r["y"] for r in pool):
                print(report(name, shipped, pool))
            else:
                fp = sum(1 for r in pool if shipped(r))
                print(f"| {name} | no injections | {fp}/{len(pool)} |")

        def taint_aware(r: dict) -> bool:
            return patterns(r) or score(model, r["f"]) >= (low if r["untrusted"] else threshold)

        untrusted = [r for r in held if r["untrusted"]]
        print(report("untrusted rows, their own threshold", taint_aware, untrusted))
        print(report("every row, taint-aware", taint_aware))
    if args.embedding_check:
        embedding_check(tune, held, rows, args)
    if args.show_tune_errors:
        # Error analysis on the tune side only (out-of-fold): the held-out texts stay unread.
        for (s, y), r in zip(oof, oof_rows, strict=True):
            if (y == 1 and s < threshold) or (y == 0 and s >= threshold):
                label = "missed" if y else "false positive"
                print(f"{label} {s:+.2f}: {r['text'][:160]!r}", file=sys.stderr)
    if args.write:
        OUT.write_text(
            json.dumps({"bias": model[1], "threshold": round(threshold, 5), "bits": _BITS}) + "\n",
            encoding="utf-8",
        )
        model[0].astype("<f4").tofile(OUT.with_name(_WEIGHTS))
        print(f"\nwrote {OUT.relative_to(ROOT)} and {_WEIGHTS} "
              f"({int(np.count_nonzero(model[0]))} non-zero buckets)", file=sys.stderr)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
