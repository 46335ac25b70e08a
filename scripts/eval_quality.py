#!/usr/bin/env python3
"""Recall quality per dev set, kind and lane, on a fixed tune/validation split by project.

Each set is built once with MiniLM in --work, then every gold item is recalled lexical, dense
and hybrid (passive, no MMR, no link expansion). Parameters are chosen on the tune side only;
the tables to quote are the validation side's. The split is by project, so a project's rows and
queries are never on both sides; a global query belongs to the project it is asked from.

    .venv/bin/python scripts/eval_quality.py [--work DIR] [--side validation|tune|all]
                                             [--sets coding,paraphrase,fixture] [--json-out F]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from dataclasses import fields, replace
from pathlib import Path

from zmem.evaluation import harness, runner
from zmem.retrieval.fusion import DEFAULT_WEIGHTS, Weights

SETS = {
    # name: (corpus or None for the 64-row fixture, gold, tune-side namespaces)
    **harness.DEV_SETS,
    # Too small to split: a check that nothing regressed, quoted whole.
    "fixture": (None, harness.REPO_GOLD, None),
}
K = 5


def side_of(namespace: str, tune: set[str] | None) -> str:
    if tune is None:
        return "all"
    return "tune" if namespace in tune else "validation"


def table(name: str, reports: dict[str, dict], tune: set[str] | None, side: str) -> list[str]:
    """Markdown rows: kind, items, hit@5 per lane, hybrid minus the best single lane."""
    gold = {r["id"]: r for r in reports["lexical"]["per_item"]}
    namespaces = {}
    for line in SETS[name][1].read_text(encoding="utf-8").splitlines():
        if line.strip():
            item = json.loads(line)
            namespaces[item["id"]] = item["namespace"]
    keep = {i for i in gold if side == "all" or side_of(namespaces[i], tune) in (side, "all")}
    kinds = sorted({gold[i]["bucket"] for i in keep})
    out = [
        f"\n### {name} ({side} side, hit@{K}; forbidden = passive queries returning a forbidden "
        "row)\n",
        "| kind | items | lexical | dense | hybrid | hybrid - best lane | forbidden (hybrid) |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for kind in [*kinds, "all"]:
        ids = [i for i in keep if kind == "all" or gold[i]["bucket"] == kind]
        scores = {}
        for mode, report in reports.items():
            rows = [r for r in report["per_item"] if r["id"] in ids]
            scored = [r for r in rows if r["expect"]]
            scores[mode] = sum(r["hit"] for r in scored) / len(scored) if scored else None
        leaks = sum(1 for r in reports["hybrid"]["per_item"] if r["id"] in ids and r["leaked"])
        cells = [f"{scores[m]:.3f}" if scores[m] is not None else "-" for m in reports]
        lanes = [scores[m] for m in ("lexical", "dense") if scores[m] is not None]
        gap = (
            f"{scores['hybrid'] - max(lanes):+.3f}"
            if lanes and scores["hybrid"] is not None
            else "-"
        )
        out.append(f"| {kind} | {len(ids)} | {' | '.join(cells)} | {gap} | {leaks} |")
    return out


def parse_weights(spec: str) -> Weights:
    """bm25=0.70,recency=0 -> the shipped Weights with those two replaced; ValueError (one
    line) on an unknown name, a value that is not a number in 0..1, or a sum other than 1."""
    known = {f.name for f in fields(Weights)}
    given: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in spec.split(","))):
        name, sep, value = part.partition("=")
        if not sep or name not in known:
            raise ValueError(
                f"{part!r} is not NAME=VALUE with NAME one of {', '.join(sorted(known))}"
            )
        try:
            given[name] = float(value)
        except ValueError:
            raise ValueError(f"{part!r}: {value!r} is not a number") from None
        if not 0.0 <= given[name] <= 1.0:
            raise ValueError(f"{part!r}: a weight is between 0 and 1")
    weights = replace(DEFAULT_WEIGHTS, **given)
    total = sum(getattr(weights, f) for f in known)
    if abs(total - 1.0) > 1e-6:
        raise ValueError(f"the weights sum to {total:.2f}, not 1")
    return weights


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", type=Path, help="where the built stores go (default: a temp dir)")
    ap.add_argument("--side", choices=("validation", "tune", "all"), default="validation")
    ap.add_argument("--sets", default=",".join(SETS), help="comma-separated: " + ",".join(SETS))
    ap.add_argument("--json-out", type=Path, help="also write every per-item result here")
    ap.add_argument(
        "--from-json", type=Path, help="print the tables of an earlier --json-out; build nothing"
    )
    ap.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="MODULE.NAME=VALUE",
        help="for tuning: set a zmem.retrieval constant, e.g. pipeline.GLOBAL_MARGIN=0.05",
    )
    ap.add_argument(
        "--weights",
        metavar="NAME=VALUE,...",
        help="composite weights to read with instead of the shipped ones, e.g. "
        "bm25=0.70,recency=0 (names: bm25, confidence, recency, popularity; the rest keep "
        "their defaults; they must sum to 1)",
    )
    ap.add_argument(
        "--mmr", action="store_true", help="recall with MMR on, as the hooks and the CLI do"
    )
    ap.add_argument(
        "--fusion",
        action="store_true",
        help="rank hybrid reads with the hand-set fusion instead of the learned ranker",
    )
    ap.add_argument(
        "--with-global",
        action="store_true",
        help="recall every item with --include-global (what the prompt hook does)",
    )
    args = ap.parse_args()
    constants = []
    for spec in args.param:
        name, _, value = spec.partition("=")
        try:
            module, attr = harness.retrieval_constant(name)
        except AttributeError as exc:
            print(f"eval_quality: {exc}", file=sys.stderr)
            return 2
        kind = type(getattr(module, attr))
        constants.append(
            (name, value.lower() in ("1", "true", "yes") if kind is bool else kind(value))
        )
    runner.MMR = args.mmr
    if args.fusion:
        constants.append(("ranker.ACTIVE", None))
    weights = None
    if args.weights:
        try:
            weights = parse_weights(args.weights)
        except ValueError as exc:
            print(f"eval_quality: --weights: {exc}", file=sys.stderr)
            return 2
    with harness.retrieval_constants(constants):
        return evaluate(args, weights)


def evaluate(args: argparse.Namespace, weights: Weights | None) -> int:
    if args.from_json:
        saved = json.loads(args.from_json.read_text(encoding="utf-8"))
        for name, per_mode in saved.items():
            reports = {mode: {"per_item": items} for mode, items in per_mode.items()}
            print("\n".join(table(name, reports, SETS[name][2], args.side)))
        return 0
    work = args.work or Path(tempfile.mkdtemp(prefix="zmem-quality-"))
    work.mkdir(parents=True, exist_ok=True)
    everything = {}
    for name in args.sets.split(","):
        if name not in SETS:
            print(f"eval_quality: unknown set {name!r} ({', '.join(SETS)})", file=sys.stderr)
            return 2
        corpus, gold_path, tune = SETS[name]
        store = work / f"{name}.sqlite"
        for suffix in ("", "-wal", "-shm"):
            Path(f"{store}{suffix}").unlink(missing_ok=True)
        print(f"building and querying {name} ...", file=sys.stderr)
        reports = harness.run_modes(
            store,
            gold_path,
            K,
            corpus,
            profile="minilm",
            include_global=args.with_global,
            weights=weights,
        )
        everything[name] = {m: r["per_item"] for m, r in reports.items()}
        print("\n".join(table(name, reports, tune, args.side)))
    if args.json_out:
        args.json_out.write_text(json.dumps(everything, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
