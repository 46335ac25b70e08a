#!/usr/bin/env python3
"""Does a change keep behaviour? Run two checkouts of ZMem side by side on the same data and
compare, item by item: the gold fixture and the paraphrase set through eval_runner (per-item
JSON, lexical and hybrid), every LoCoMo dev question's ranked list (lexical and hybrid) read by
each tree from copies of ONE store, and the LoCoMo store each tree writes, table by table.

The store is built once for the read comparison because ingestion is not bit-reproducible run
to run: ids are random uuid4s and they break ties in the write path (a link or a contradiction
can form in one run and not in another). The write comparison pins uuid4 to a seeded sequence.

    .venv/bin/python scripts/compare_trees.py --old /tmp/base --locomo PATH/locomo-dev.json

Exit 0 when everything is identical, 1 when anything differs (each difference is listed), 2 on
bad arguments. Needs MiniLM (make install) for the hybrid rows; about ten minutes."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve()
ROOT = HERE.parents[1]
EVAL_SETS = {"gold": [], "paraphrase": ["--corpus", "paraphrase"]}
MODES = {"lexical": "fake", "hybrid": "minilm"}
# Report fields that name the run, not its result.
VOLATILE = {"store", "gold", "corpus"}


# ---- children: run inside one tree (PYTHONPATH=<tree>/src) ---------------------------------


def _pin_uuids() -> None:
    import random
    import uuid

    rnd = random.Random(1234)
    uuid.uuid4 = lambda: uuid.UUID(int=rnd.getrandbits(128), version=4)


def child_build(locomo: str, store: str, mode: str) -> None:
    _pin_uuids()
    from zmem.evaluation import locomo as bench

    hybrid = mode == "hybrid"
    bench.run_benchmark(locomo, hybrid=hybrid, profile=MODES[mode], store=store)


def child_query(locomo: str, store: str, mode: str, out: str) -> None:
    import dataclasses

    from zmem import MemoryStore, config
    from zmem.evaluation import locomo as bench

    os.environ["ZMEM_EMBED_PROFILE"] = MODES[mode]
    data = bench.load(locomo)
    settings = config.load_settings(store_path=store)
    settings = dataclasses.replace(settings, inject_token_budget=bench.UNLIMITED_TOKENS)
    options = dict(limit=50, link_hops=0, no_mmr=True, hybrid=None if mode == "hybrid" else False)
    rows = []
    with MemoryStore.open(settings=settings) as s:
        for conv in data.conversations:
            os.environ["ZMEM_TEST_NOW"] = config.format_instant(conv.query_time)
            for q in conv.questions:
                try:
                    from zmem.retrieval.request import RecallRequest
                except ImportError:  # a tree from before RecallRequest was the one request
                    report = s.recall_report(
                        q.text, namespace=conv.namespace, no_bump=True, **options
                    )
                else:
                    req = RecallRequest(q.text, namespace=conv.namespace, passive=True, **options)
                    report = s.read(req)
                hits = [[h.memory.source_ref, round(h.score, 9), h.tier] for h in report.hits]
                rows.append({"q": q.text, "hybrid": report.hybrid, "hits": hits})
    Path(out).write_text(json.dumps(rows))


# ---- the parent ----------------------------------------------------------------------------


def _run(tree: Path, *args: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ZMEM_")}
    env["PYTHONPATH"] = str(tree / "src")
    subprocess.run([sys.executable, *args], env=env, check=True, stdout=subprocess.DEVNULL)


def _strip(doc: object) -> object:
    if isinstance(doc, dict):
        return {k: _strip(v) for k, v in doc.items() if k not in VOLATILE}
    if isinstance(doc, list):
        return [_strip(v) for v in doc]
    return doc


def _tables(path: Path) -> dict[str, list[str]]:
    import apsw

    conn = apsw.Connection(str(path))
    try:
        names = [r[0] for r in conn.execute("SELECT name FROM sqlite_schema WHERE type='table'")]
        keep = [n for n in names if not n.startswith(("sqlite_", "memory_fts", "memory_vec"))]
        return {n: sorted(map(repr, conn.execute(f"SELECT * FROM {n}"))) for n in keep}
    finally:
        conn.close()


def compare(old: Path, new: Path, locomo: Path | None, work: Path) -> list[tuple[str, str]]:
    results: list[tuple[str, str]] = []
    trees = {"old": old, "new": new}

    def outcome(name: str, a: object, b: object, size: int) -> None:
        results.append((name, f"identical ({size})" if a == b else "DIFFERENT"))
        print(f"{name}: {results[-1][1]}", flush=True)

    for set_name, extra in EVAL_SETS.items():
        for mode, profile in MODES.items():
            docs = {}
            for side, tree in trees.items():
                store = work / f"{set_name}-{mode}-{side}.sqlite"
                out = work / f"{set_name}-{mode}-{side}.json"
                runner = tree / "scripts" / "eval_runner.py"
                args = ["--store", str(store), "--profile", profile, "--mode", mode, *extra]
                _run(tree, str(runner), *args, "--json-out", str(out))
                docs[side] = _strip(json.loads(out.read_text()))
            items = len(docs["old"].get("per_item", []))
            outcome(f"eval {set_name} {mode} per item", docs["old"], docs["new"], items)
    if locomo is None:
        return results
    for mode in MODES:
        built = {}
        for side, tree in trees.items():
            built[side] = work / f"locomo-{mode}-{side}.sqlite"
            _run(tree, str(HERE), "--child", "build", str(locomo), str(built[side]), mode)
        a, b = _tables(built["old"]), _tables(built["new"])
        outcome(f"locomo {mode} store written (uuids pinned)", a, b, sum(map(len, a.values())))
        lists = {}
        for side, tree in trees.items():
            copy = work / f"locomo-{mode}-read-{side}.sqlite"
            for ext in ("", "-wal", "-shm"):
                if Path(f"{built['old']}{ext}").exists():
                    shutil.copy(f"{built['old']}{ext}", f"{copy}{ext}")
            out = work / f"locomo-{mode}-{side}.json"
            _run(tree, str(HERE), "--child", "query", str(locomo), str(copy), mode, str(out))
            lists[side] = json.loads(out.read_text())
        outcome(
            f"locomo {mode} ranked list per question", lists["old"], lists["new"], len(lists["old"])
        )
    return results


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["--child"]:
        kind, *rest = args[1:]
        {"build": child_build, "query": child_query}[kind](*rest)
        return 0
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--old", required=True, type=Path, help="checkout root of the old tree")
    ap.add_argument("--new", type=Path, default=ROOT, help="checkout root (default: this one)")
    ap.add_argument("--locomo", type=Path, default=None, help="LoCoMo JSON (CC BY-NC, not here)")
    ap.add_argument("--work", type=Path, default=None, help="keep the stores and JSON here")
    try:
        opts = ap.parse_args(args)
    except SystemExit as exc:
        return 2 if exc.code else 0
    for tree in (opts.old, opts.new):
        if (
            not (tree / "src" / "zmem").is_dir()
            or not (tree / "scripts" / "eval_runner.py").exists()
        ):
            print(f"compare_trees: error: {tree} is not a ZMem checkout", file=sys.stderr)
            return 2
    if opts.locomo is not None and not opts.locomo.is_file():
        print(f"compare_trees: error: {opts.locomo} is not a file", file=sys.stderr)
        return 2
    work = opts.work or Path(tempfile.mkdtemp(prefix="zmem-compare-"))
    work.mkdir(parents=True, exist_ok=True)
    results = compare(opts.old.resolve(), opts.new.resolve(), opts.locomo, work)
    different = [name for name, verdict in results if verdict == "DIFFERENT"]
    print(f"\n{len(results) - len(different)} identical, {len(different)} different ({work})")
    return 1 if different else 0


if __name__ == "__main__":
    sys.exit(main())
