#!/usr/bin/env python3
"""Self-corpus probe: how well does recall find the rows of YOUR store? Probes are templated
from a copy of the store's live rows (first sentence, distinctive words, an entity name) and run
passively; the store stays byte-identical. The report can contain your memories' text: keep it
out of version control.

Exit 0 on success, 2 on bad arguments, the live default store or a missing path."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from zmem.cli import output
from zmem.errors import ZMemError
from zmem.evaluation import self_corpus


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="eval_self_corpus.py",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--store", required=True, type=Path, help="a COPY of a store file")
    ap.add_argument("--k", default="5,20", help="comma-separated cut-offs (default 5,20)")
    ap.add_argument("--limit", type=int, default=100, help="rows to probe, oldest first")
    ap.add_argument("--json-out", type=Path, default=None, help="also write the report here")
    try:
        args = ap.parse_args(argv)
    except SystemExit as exc:
        return 2 if exc.code else 0
    try:
        ks = [int(x) for x in args.k.split(",") if x.strip()]
    except ValueError:
        print(f"eval_self_corpus: error: --k {args.k!r} is not a list of integers", file=sys.stderr)
        return 2
    try:
        report = self_corpus.run(args.store, ks, args.limit, track=output.track)
    except ZMemError as exc:
        print(f"eval_self_corpus: error: {exc}", file=sys.stderr)
        return 2
    text = json.dumps(report, indent=2, sort_keys=True)
    if args.json_out is not None:
        args.json_out.write_text(text + "\n", encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
