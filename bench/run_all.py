"""Every benchmark in one run: write path, recall scale, LoCoMo dev (ZMem and plain BM25), and
the eval_runner gold set. Each runs as its own process (a failure is reported, the rest still
run), progress goes to stderr, and the tables are written to one markdown file."""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
DEFAULT_LOCOMO = ROOT.parent / "shared" / "data" / "locomo" / "locomo-dev.json"


def _run(title: str, argv: list[str]) -> tuple[str, float, int]:
    """Run one benchmark; its stderr (progress) passes through, its stdout is the table."""
    print(f"==> {title}: {' '.join(argv)}", file=sys.stderr, flush=True)
    started = time.perf_counter()
    done = subprocess.run(argv, cwd=ROOT, stdout=subprocess.PIPE, text=True)
    return done.stdout, time.perf_counter() - started, done.returncode


def _table_lines(text: str) -> str:
    """The markdown table rows (and their caption line) a benchmark printed."""
    lines = text.strip().splitlines()
    keep = [ln for ln in lines if ln.startswith("|")]
    return "\n".join(keep) if keep else "```\n" + text.strip() + "\n```"


def _eval_table(report: dict) -> str:
    rows = ["| bucket | items | hit_at_k | mrr | pass rate |", "|---|---|---|---|---|"]
    for name, b in report["buckets"].items():
        rows.append(f"| {name} | {b['items']} | {b['hit_at_k']} | {b['mrr']} | {b['pass_rate']} |")
    head = (
        f"hit_at_{report['k']} {report['hit_at_k']}, mrr {report['mrr']}, "
        f"as_of_accuracy {report['as_of_accuracy']}, "
        f"injection_omit_rate {report['injection_omit_rate']}"
    )
    return head + "\n\n" + "\n".join(rows)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true", help="smaller sizes (10k rows at most)")
    ap.add_argument("--locomo", type=Path, default=DEFAULT_LOCOMO, help="LoCoMo JSON file")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "latest.md")
    args = ap.parse_args()
    sizes_write = "1000,10000" if args.quick else "1000,10000,100000"
    sizes_recall = "10000" if args.quick else "10000,100000,1000000"
    sizes_hybrid = "10000" if args.quick else "10000,100000,1000000"
    sections: list[str] = []
    failures = 0
    with tempfile.TemporaryDirectory(prefix="zmem-bench-") as tmp:
        steps = [
            ("Write path", [PY, "bench/write_path.py", "--sizes", sizes_write], None),
            ("Recall scale (lexical)", [PY, "bench/recall_scale.py", "--sizes", sizes_recall],
             None),
            ("Recall scale (hybrid: MiniLM query, vec0 KNN)",
             [PY, "bench/recall_scale.py", "--hybrid", "--sizes", sizes_hybrid], None),
            ("Embedding (MiniLM, onnxruntime)",
             [PY, "bench/embed.py", *(["--quick"] if args.quick else [])], None),
            (
                "Evaluation gold set (eval_runner, k=5)",
                [PY, "scripts/eval_runner.py", "--store", f"{tmp}/eval.sqlite", "--json-out",
                 f"{tmp}/eval.json"],
                f"{tmp}/eval.json",
            ),
            (
                "Paraphrase set (eval_runner --corpus paraphrase, k=5)",
                [PY, "scripts/eval_runner.py", "--store", f"{tmp}/para.sqlite", "--corpus",
                 "paraphrase", "--json-out", f"{tmp}/para.json"],
                f"{tmp}/para.json",
            ),
        ]  # fmt: skip
        if args.locomo.exists():
            steps.append(
                (
                    "LoCoMo dev, turn-level R@k (lexical; plain BM25 baseline)",
                    [PY, "scripts/bench_locomo.py", "--input", str(args.locomo), "--no-hybrid",
                     "--baseline", "bm25", "--json-out", f"{tmp}/locomo.json"],
                    None,
                )
            )  # fmt: skip
        else:
            sections.append(f"## LoCoMo dev\n\nskipped: {args.locomo} not found\n")
        for title, argv, json_path in steps:
            out, seconds, code = _run(title, argv)
            if code != 0:
                failures += 1
                sections.append(f"## {title}\n\nFAILED (exit {code}) after {seconds:.0f} s\n")
                continue
            body = (
                _eval_table(json.loads(Path(json_path).read_text()))
                if json_path
                else (_table_lines(out))
            )
            sections.append(f"## {title}\n\n{body}\n\n({seconds:.0f} s)\n")
    header = (
        f"# ZMem benchmarks, {datetime.now(UTC):%Y-%m-%d %H:%M} UTC\n\n"
        f"{platform.machine()}, {platform.processor() or 'cpu n/a'}, Python "
        f"{platform.python_version()}; command: `python bench/run_all.py"
        f"{' --quick' if args.quick else ''}`.\nThe gold and paraphrase rows are lexical "
        "(the fixture is model-absent by contract); the hybrid tables are in docs/benchmarks.md.\n"
    )
    text = header + "\n" + "\n".join(sections)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text, encoding="utf-8")
    print(text)
    print(f"tables written to {args.out}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
