"""Convert a public memory benchmark on disk (LongMemEval, LoCoMo) into ZMem gold JSONL, and
optionally score ZMem's passive recall on it. Nothing is downloaded: a missing --input prints
`skipped: ...` and exits 0, so CI without the data stays green."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from zmem.cli import output
from zmem.evaluation.adapter_eval import MODES, evaluate
from zmem.evaluation.adapters import ADAPTERS, GRANULARITIES, convert, load_json, write_gold

EPILOG = """\
examples:
  eval_adapters.py --adapter locomo --input locomo10.json --out locomo.gold.jsonl
  eval_adapters.py --adapter longmemeval --input longmemeval_s_cleaned.json \\
      --granularity turn --out lme_turn.gold.jsonl
  eval_adapters.py --adapter locomo --input locomo10.json --evaluate   # JSON report on stdout

--evaluate ingests each question's corpus into a throwaway store (pinned clock, one store per
haystack), recalls passively (no bump, no links, no MMR, limit 50) and prints recall_any@k,
recall_all@k and ndcg_any@k for k in 1, 3, 5, 10, 30, 50 as JSON. Exit codes: 0 done or
skipped (input absent), 1 unreadable input, 2 bad arguments.
"""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line on stderr, exit 2 (argparse adds usage)
        print(f"error: {message}", file=sys.stderr)
        sys.exit(2)


def _parser() -> argparse.ArgumentParser:
    p = _Parser(
        description=__doc__.split("\n\n")[0].replace("\n", " "),
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--adapter", required=True, choices=ADAPTERS)
    p.add_argument("--input", required=True, type=Path, help="the dataset's JSON file")
    p.add_argument("--out", type=Path, help="gold JSONL to write (required without --evaluate)")
    p.add_argument(
        "--granularity",
        choices=GRANULARITIES,
        help="LongMemEval keys: one per session or one per user turn (default session); "
        "LoCoMo is always turn",
    )
    p.add_argument("--evaluate", action="store_true", help="score ZMem recall on the gold set")
    p.add_argument("--mode", choices=MODES, default="lexical", help="recall mode for --evaluate")
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.out is None and not args.evaluate:
        _parser().error("--out is required unless --evaluate is given")
    if args.adapter == "locomo" and args.granularity not in (None, "turn"):
        _parser().error("LoCoMo keys are dialog turns: --granularity session does not apply")
    if not args.input.is_file():
        print(f"skipped: {args.input} not found")
        return 0
    try:
        conversion = convert(args.adapter, load_json(args.input), args.granularity or "session")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        print(f"error: cannot convert {args.input}: {exc!r}", file=sys.stderr)
        return 1
    summary = conversion.summary()
    if args.out is not None:
        write_gold(conversion.records, args.out)
        skipped = ", ".join(f"{k} {v}" for k, v in summary["skipped"].items()) or "none"
        stream = sys.stderr if args.evaluate else sys.stdout
        print(
            f"wrote {summary['questions']} questions to {args.out} (skipped: {skipped})",
            file=stream,
        )
    if args.evaluate:
        report = evaluate(
            conversion.records,
            mode=args.mode,
            total=len(conversion.records),
            track=output.track,
        )
        report["skipped"] = summary["skipped"]
        print(json.dumps(report, indent=2, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
