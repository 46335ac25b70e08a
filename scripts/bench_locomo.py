"""LoCoMo retrieval benchmark: one memory per dialog turn, every question recalled passively,
turn- and session-level R@5/10/25/50 per category. The data (CC BY-NC) is read from --input at
run time and never copied here. The logic lives in zmem.evaluation.locomo."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from zmem.cli import output
from zmem.evaluation.locomo import PROFILES, format_table, run_benchmark


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--input", required=True, help="a LoCoMo JSON file (e.g. locomo10.json)")
    p.add_argument("--json-out", required=True, help="where to write the JSON report")
    p.add_argument("--no-hybrid", action="store_true", help="recall with hybrid=False")
    p.add_argument(
        "--dense-only",
        action="store_true",
        help="recall with the vector lane alone (needs an embedding profile)",
    )
    p.add_argument("--profile", default="fake", choices=PROFILES, help="ZMEM_EMBED_PROFILE")
    p.add_argument(
        "--baseline",
        choices=["bm25"],
        help="also rank each conversation's turns with plain Okapi BM25 (k1=1.2, b=0.75, "
        "ZMem's tokenizer and stop words): a second row in the same report",
    )
    p.add_argument("--store", help="a fresh store path to keep (default: a temp dir, deleted)")
    p.add_argument(
        "--token-budget",
        type=int,
        help="passive token budget (default: unlimited, so R@50 sees 50 rows)",
    )
    args = p.parse_args(argv)
    doc = run_benchmark(
        args.input,
        track=output.track,
        systems=("zmem", args.baseline) if args.baseline else ("zmem",),
        hybrid=not args.no_hybrid,
        dense_only=args.dense_only,
        profile=args.profile,
        store=args.store,
        token_budget=args.token_budget,
    )
    Path(args.json_out).write_text(json.dumps(doc, indent=2) + "\n")
    print(format_table(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
