#!/usr/bin/env python3
"""Write-time judgement on a pair set (default eval/judge_pairs.jsonl, 240 pairs written blind:
same meaning with negation words, paraphrases, true opposites, swapped preferences, negation
inside flags or quotes, changed numbers and units, changed scope, look-alikes). Each pair goes
through MemoryStore.add on a fresh store (zmem.evaluation.judgement); printed per side of the
fixed split (validation: the figures to quote; tune: what rules may be chosen on) and per
family: how many pairs were folded, flagged as contradicting or kept apart, contradiction
precision and recall, near-duplicates folded, and distinct notes folded (a lost memory).

    .venv/bin/python scripts/eval_judgement.py [--pairs FILE] [--profile minilm|fake]
        [--show-misses] [--json OUT]

eval/judge_pairs2.jsonl is a second set of 240, written blind by another writer after the rules
were (the same families and counts): `--pairs eval/judge_pairs2.jsonl` measures how the rules
carry to phrasing they were not written against (docs/decisions.md).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

TARGETS = (
    "targets (issue 50): automatic fold and contradiction precision >= 0.97, no distinct fact "
    "folded, coverage >= 0.90, distinct pairs asked <= 0.15"
)


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pairs", type=Path, default=ROOT / "eval" / "judge_pairs.jsonl")
    ap.add_argument("--profile", default="minilm", choices=["minilm", "fake"])
    ap.add_argument("--show-misses", action="store_true", help="print every wrong decision")
    ap.add_argument("--json", type=Path, help="also write every decision here")
    ap.add_argument(
        "--answer",
        action="store_true",
        help="a scripted agent answers every question by the pair's label (resolve)",
    )
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="zmem-judgement-data-") as data:
        for key in [k for k in os.environ if k.startswith("ZMEM_")]:
            if key not in ("ZMEM_MODEL_DIR",):
                del os.environ[key]
        os.environ.update(
            ZMEM_DATA=data, ZMEM_EMBED_PROFILE=args.profile, ZMEM_HOOK_DAEMON="0",
            ZMEM_SESSION_UPKEEP="0",
        )  # fmt: skip
        from zmem import MemoryStore
        from zmem.evaluation import judgement

        pairs = judgement.load(args.pairs)

        def tick(n: int) -> None:
            if n % 40 == 0 or n == len(pairs):
                print(f"  {n}/{len(pairs)} pairs", file=sys.stderr, flush=True)

        results = judgement.run(pairs, MemoryStore.open, tick, answer=args.answer)

    print(
        f"\nJudgement on {args.pairs.name} ({len(pairs)} pairs), profile {args.profile}; {TARGETS}"
    )
    for side in ("validation", "tune"):
        mine = [(p, d) for p, d in results if p.side == side]
        by_family = judgement.score(mine, lambda p: p.family)
        print(f"\n{side} side ({len(mine)} pairs)\n")
        print("| family | pairs | label | folded | flagged | kept apart | of which asked | right |")
        print("|---|---:|---|---:|---:|---:|---:|---:|")
        for name in sorted(by_family, key=lambda n: (n == "all", n)):
            s = by_family[name]
            labels = sorted({lab for lab, _ in s.confusion})
            print(
                f"| {name} | {s.pairs} | {'/'.join(labels)} | {s.count(decided='duplicate')} | "
                f"{s.count(decided='contradiction')} | {s.count(decided='distinct')} | "
                f"{sum(s.asked.values())} | {s.accuracy:.2f} |"
            )
        s = by_family["all"]
        print(
            f"\nautomatic: fold precision {_fmt(s.fold_precision)} "
            f"({s.count('duplicate', 'duplicate')}/{s.count(decided='duplicate')}), "
            f"contradiction precision {_fmt(s.flag_precision)} "
            f"({s.count('contradiction', 'contradiction')}/{s.count(decided='contradiction')}), "
            f"wrong folds {s.wrong_folds}; coverage (decided rightly or asked) "
            f"{_fmt(s.coverage)}; distinct pairs asked {_fmt(s.distinct_asked)}"
        )
        if args.answer:
            print(f"with a scripted answerer that follows the labels: "
                  f"{_fmt(s.answered_accuracy)} of pairs end as labelled")  # fmt: skip
    if args.show_misses:
        print("\nWrong decisions:")
        for pair, decided in results:
            if decided.decided != pair.label:
                how = f"asked ({decided.asked})" if decided.asked else decided.decided
                print(f"- {pair.id} [{pair.side}, {pair.family}] {pair.label} -> {how}")
                print(f"    a: {pair.a}\n    b: {pair.b}")
    if args.json:
        args.json.write_text(
            json.dumps(
                [
                    {
                        "id": p.id,
                        "label": p.label,
                        "decided": d.decided,
                        "asked": d.asked,
                        "side": p.side,
                    }
                    for p, d in results
                ],
                indent=1,
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
