#!/usr/bin/env python3
"""Train the learned ranker and report it honestly (issue 51). One command builds the dev stores
with MiniLM (the coding and paraphrase sets, the LoCoMo dev conversations), records every
labelled query's candidate pool through the real recall, fits the logistic scorer on the tune
sides only, and writes src/zmem/retrieval/ranker_weights.json; run again, it writes the same
bytes. It then reads every query end to end with the fitted scorer, the hand-set fusion and the
single lanes, on the validation sides and leave-one-dataset-out (fitted without LoCoMo, read on
LoCoMo; fitted without the coding sets, read on them). LoCoMo data (CC BY-NC) is read from
--locomo at run time and never copied here.

    .venv/bin/python scripts/train_ranker.py --locomo ../shared/data/locomo/locomo-dev.json \\
        [--out FILE] [--check] [--json-out F] [--l2 1.0]
"""

# ruff: noqa: E402 (the thread pins below must come before any import that loads numpy)
from __future__ import annotations

import os

# The refit must give the same bits on every run and machine: one BLAS thread (a threaded
# reduction may sum in another order). Set before numpy loads.
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse
import hashlib
import json
import sys
import tempfile
from contextlib import ExitStack
from pathlib import Path
from statistics import fmean
from typing import Any

from zmem.cli import output
from zmem.evaluation import dev_protocol, fixture, gold, harness, locomo
from zmem.evaluation import ranker_train as rt
from zmem.retrieval import ranker

# The LoCoMo dev conversations the shipped scorer is fitted on; the other two are its
# validation side.
LOCOMO_TUNE = {"conv-26", "conv-30", "conv-41"}


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line on stderr, exit 2, nothing written
        self.exit(2, f"train_ranker: {message}\n")


def _hit_table(
    title: str, runs: dict[str, list[dict[str, Any]]], keep: set[str], lines: list[str]
) -> dict[str, dict[str, float]]:
    """hit@5 per kind for each reading, over the items in `keep`; hybrid readings against the
    best single lane."""
    some = next(iter(runs.values()))
    kinds = sorted({r["bucket"] for r in some if r["id"] in keep and r["expect"]})
    table: dict[str, dict[str, float]] = {}
    lines += [
        f"\n### {title} (hit@5)\n",
        f"| kind | items | {' | '.join(runs)} |",
        "|---|---:|" + "---:|" * len(runs),
    ]
    for kind in [*kinds, "all"]:
        row = {}
        count = 0
        for name, items in runs.items():
            scored = [
                r
                for r in items
                if r["id"] in keep and r["expect"] and (kind == "all" or r["bucket"] == kind)
            ]
            count = len(scored)
            row[name] = fmean(float(r["hit"]) for r in scored) if scored else 0.0
        table[kind] = row
        lines.append(f"| {kind} | {count} | " + " | ".join(f"{v:.3f}" for v in row.values()) + " |")
    return table


def _recall_table(
    title: str, runs: dict[str, list[locomo.Scored]], lines: list[str]
) -> dict[str, dict[int, float]]:
    table = {
        name: {k: fmean(r.turn[k] for r in rows) for k in rt.LOCOMO_KS}
        for name, rows in runs.items()
    }
    lines += [
        f"\n### {title} (turn-level recall)\n",
        "| reading | " + " | ".join(f"R@{k}" for k in rt.LOCOMO_KS) + " |",
        "|---|" + "---:|" * len(rt.LOCOMO_KS),
    ]
    for name, by_k in table.items():
        lines.append(f"| {name} | " + " | ".join(f"{by_k[k]:.3f}" for k in rt.LOCOMO_KS) + " |")
    return table


def main(argv: list[str] | None = None) -> int:
    p = _Parser(description=__doc__.split("\n\n")[0])
    p.add_argument("--locomo", required=True, help="the LoCoMo dev JSON (at least 3 conversations)")
    p.add_argument(
        "--out",
        type=Path,
        default=ranker.WEIGHTS_FILE,
        help=f"where the fitted weights go (default {ranker.WEIGHTS_FILE})",
    )
    p.add_argument(
        "--check",
        action="store_true",
        help="write nothing: exit 1 unless the fit gives --out's bytes exactly",
    )
    p.add_argument("--json-out", type=Path, help="also write every figure here")
    p.add_argument("--l2", type=float, default=rt.FitSettings.l2, help="ridge strength")
    p.add_argument("--work", type=Path, help="where the dev stores are built (default: temp)")
    p.add_argument(
        "--save-pools",
        type=Path,
        help="also pickle the recorded candidate pools here (to study fits without a rebuild)",
    )
    args = p.parse_args(argv)
    if args.l2 < 0:
        p.error("--l2 must be at least 0")
    try:
        data = locomo.load(args.locomo)
    except (OSError, ValueError, KeyError) as exc:
        p.error(f"cannot read {args.locomo}: {exc}")
    missing = LOCOMO_TUNE - {c.sample_id for c in data.conversations}
    if missing:
        p.error(f"{args.locomo} lacks the tune conversations {sorted(missing)}")
    settings = rt.FitSettings(l2=args.l2)
    work = args.work or Path(tempfile.mkdtemp(prefix="zmem-ranker-"))
    work.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {"input": {"locomo": args.locomo, "sha256": data.sha256}}
    lines: list[str] = []
    with ExitStack() as stack:
        # ---- build and record --------------------------------------------------------------
        stores: dict[str, tuple[Any, dict[str, str], list[gold.GoldItem], set[str]]] = {}
        pools: list[rt.Pool] = []
        for name, (corpus, gold_path, tune) in harness.DEV_SETS.items():
            path = work / f"{name}.sqlite"
            for suffix in ("", "-wal", "-shm"):
                Path(f"{path}{suffix}").unlink(missing_ok=True)
            print(f"building {name} ...", file=sys.stderr)
            store, ids = stack.enter_context(harness.corpus_store(path, corpus, profile=rt.PROFILE))
            items = gold.load(gold_path)
            stores[name] = (store, ids, items, tune)
            os.environ["ZMEM_TEST_NOW"] = fixture.QUERY_AT
            pools += rt.record_gold(store, items, ids, name, tune)
        print("ingesting LoCoMo ...", file=sys.stderr)
        lstore, stands_for, _ = stack.enter_context(
            locomo.ingested(data, profile=rt.PROFILE, track=output.track)
        )
        pools += rt.record_locomo(lstore, data, stands_for, LOCOMO_TUNE, output.track)
        if args.save_pools:
            import pickle

            args.save_pools.write_bytes(pickle.dumps(pools))

        # ---- fit -----------------------------------------------------------------------------
        shipped = rt.fit(rt.selected(pools, side="tune"), settings)
        without_locomo = rt.fit(rt.selected(pools, not_dataset="locomo"), settings)
        without_coding = rt.fit(rt.selected(pools, dataset="locomo"), settings)
        report["model"] = shipped.to_dict()
        report["pools"] = {
            f"{d}/{s}": len(rt.selected(pools, dataset=d, side=s))
            for d in ("coding", "paraphrase", "locomo")
            for s in ("tune", "validation")
        }
        offline: dict[str, Any] = {}
        for d in ("coding", "paraphrase", "locomo"):
            for s in ("tune", "validation"):
                chosen = rt.selected(pools, dataset=d, side=s)
                k = 10 if d == "locomo" else rt.CODING_K
                offline[f"{d}/{s}@{k}"] = {
                    "fusion": round(rt.offline(chosen, None, k), 4),
                    "learned": round(rt.offline(chosen, shipped, k), 4),
                }
        report["offline"] = offline

        # ---- read end to end -----------------------------------------------------------------
        coding: dict[str, Any] = {}
        for name, (store, ids, items, tune) in stores.items():
            os.environ["ZMEM_TEST_NOW"] = fixture.QUERY_AT
            runs = {
                "lexical": rt.score_gold(store, items, ids, None, mode="lexical"),
                "dense": rt.score_gold(store, items, ids, None, mode="dense"),
                "fusion": rt.score_gold(store, items, ids, None),
                "learned": rt.score_gold(store, items, ids, shipped),
                "learned w/o coding": rt.score_gold(store, items, ids, without_coding),
            }
            for side in ("tune", "validation"):
                keep = {i.id for i in items if (i.namespace in tune) == (side == "tune")}
                coding[f"{name}/{side}"] = _hit_table(f"{name}, {side} side", runs, keep, lines)
        report["coding"] = coding

        scores = dev_protocol.Scores()
        dev_protocol.read_baselines(data, scores, profile=rt.PROFILE, track=output.track)
        readings = {
            "fusion": None,
            "learned": shipped,
            "learned w/o LoCoMo": without_locomo,
        }
        by_reading = {
            name: rt.score_locomo(lstore, data, stands_for, scorer)
            for name, scorer in readings.items()
        }
        conversations: dict[str, Any] = {}
        for side, samples in (
            ("validation", {c.sample_id for c in data.conversations} - LOCOMO_TUNE),
            ("tune", LOCOMO_TUNE),
            ("all", {c.sample_id for c in data.conversations}),
        ):
            runs = {
                name: [s for conv, s in rows if conv in samples]
                for name, rows in by_reading.items()
            }
            runs["bm25"] = scores.rows("bm25", sorted(samples))
            runs["naive rrf"] = scores.rows("rrf", sorted(samples))
            conversations[side] = _recall_table(f"LoCoMo dev, {side}", runs, lines)
        report["locomo"] = conversations

    data_bytes = (json.dumps(shipped.to_dict(), indent=1, sort_keys=True) + "\n").encode()
    digest = hashlib.sha256(data_bytes).hexdigest()
    report["weights_sha256"] = digest
    print("\n".join(lines))
    print(f"\nweights sha256 {digest}")
    if args.json_out:
        args.json_out.write_text(json.dumps(report, indent=1, default=str) + "\n")
    if args.check:
        same = args.out.exists() and args.out.read_bytes() == data_bytes
        print(f"{args.out}: {'identical' if same else 'DIFFERS'}")
        return 0 if same else 1
    rt.write_weights(shipped, args.out)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
