#!/usr/bin/env python3
"""Offline recall-quality harness: build the deterministic fixture corpus in a throwaway store,
run the gold set through the real recall pipeline, print one JSON report.

Exit 0 whatever the scores (unless --fail-under is given and hit_at_k is below it: 1);
2 on operational errors (bad arguments, the default store, an invalid gold item)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from zmem.errors import ZMemError
from zmem.evaluation import harness


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="eval_runner.py",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument(
        "--store",
        required=True,
        type=Path,
        help="throwaway store path (built with the fixture corpus on first use); "
        "the default store is refused",
    )
    ap.add_argument(
        "--gold",
        type=Path,
        default=None,
        help="gold JSONL set (default eval/gold.jsonl, or eval/paraphrase_gold.jsonl "
        "with --corpus paraphrase)",
    )
    ap.add_argument(
        "--corpus",
        default=None,
        metavar="PATH|paraphrase",
        help="build the store from this corpus JSONL instead of the 64-row fixture "
        "('paraphrase' = eval/paraphrase_corpus.jsonl); the path must be new",
    )
    ap.add_argument(
        "--profile",
        choices=("fake", "minilm"),
        default="fake",
        help="embedding profile of the built store (default fake: model-absent)",
    )
    ap.add_argument(
        "--mode",
        choices=("lexical", "dense", "hybrid"),
        default="lexical",
        help="lanes to recall with (default lexical, the spec's contract)",
    )
    ap.add_argument("--k", type=int, default=5, help="cut-off for hit_at_k and mrr (default 5)")
    ap.add_argument(
        "--fail-under",
        type=float,
        default=None,
        metavar="X",
        help="exit 1 when hit_at_k < X (off by default)",
    )
    ap.add_argument("--json-out", type=Path, default=None, help="also write the report here")
    try:
        args = ap.parse_args(argv)
    except SystemExit as exc:
        return 2 if exc.code else 0
    try:
        corpus = harness.PARAPHRASE_CORPUS if args.corpus == "paraphrase" else args.corpus
        gold = args.gold or (
            harness.PARAPHRASE_GOLD if args.corpus == "paraphrase" else harness.REPO_GOLD
        )
        report = harness.run(
            args.store,
            gold,
            args.k,
            Path(corpus) if corpus else None,
            profile=args.profile,
            mode=args.mode,
        )
        print(harness.write(report, args.json_out))
    except ZMemError as exc:
        print(f"eval_runner: error: {exc}", file=sys.stderr)
        return 2
    if args.fail_under is not None and (report["hit_at_k"] or 0.0) < args.fail_under:
        print(f"eval_runner: hit_at_k {report['hit_at_k']} < {args.fail_under}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
