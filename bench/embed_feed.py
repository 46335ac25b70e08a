"""The model alone, fed different ways: texts/s of MiniLM on bench/write_path.py's corpus (the
texts bench/ingest.py ingests, ~56 tokens each) for each way of feeding it that could move
ingest's bound: how many texts one embed call sorts by length (ingest hands it 1,024), the
batch width inside a call, ORT's thread spinning and thread count, and (--fused, needs sympy)
onnxruntime's transformer fusions applied to the graph. Medians of --rounds passes.

    .venv/bin/python bench/embed_feed.py [--texts 4096] [--rounds 3] [--fused]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from write_path import Corpus  # noqa: E402


def _rate(embed, texts: list[str], window: int, rounds: int) -> float:
    embed(texts[:64])  # warm the shapes
    rates = []
    for _ in range(rounds):
        started = time.perf_counter()
        for i in range(0, len(texts), window):
            embed(texts[i : i + window])
        rates.append(len(texts) / (time.perf_counter() - started))
    return statistics.median(rates)


def _session(model: bytes, *, spin: bool, threads: int | None):
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 3
    if threads:
        options.intra_op_num_threads = threads
    options.add_session_config_entry("session.intra_op.allow_spinning", "1" if spin else "0")
    return ort.InferenceSession(model, sess_options=options, providers=["CPUExecutionProvider"])


def _fused(model: bytes) -> bytes | None:
    try:
        import onnx
        import sympy  # noqa: F401 - the optimizer's shape inference needs it
        from onnxruntime.transformers.optimizer import optimize_model
    except ImportError as exc:
        print(f"--fused skipped: {exc}", file=sys.stderr)
        return None
    optimized = optimize_model(
        onnx.load_from_string(model), model_type="bert", num_heads=12, hidden_size=384, opt_level=0
    )
    print(f"fused: {optimized.get_fused_operator_statistics()}", file=sys.stderr)
    return optimized.model.SerializeToString()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--texts", type=int, default=4096)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--fused", action="store_true", help="also the fused graph (needs sympy)")
    ap.add_argument("--data-dir", type=Path, help="data dir holding (or to hold) the model")
    args = ap.parse_args()

    from zmem.embedding import minilm, model_files
    from zmem.embedding.minilm import MiniLMEmbedder

    texts = [row.content for row in Corpus(args.seed).rows(args.texts)]
    with tempfile.TemporaryDirectory(prefix="zmem-feed-bench-") as tmp:
        blobs = model_files.resolve(args.data_dir or Path(tmp))
        emb = MiniLMEmbedder(blobs)
        lengths = [len(e.ids) for e in emb._tokenizer.encode_batch(texts)]
        rows: list[tuple[str, float]] = []

        def measure(name: str, window: int = 1024) -> None:
            rate = _rate(emb.embed, texts, window, args.rounds)
            rows.append((name, rate))
            print(f"  {name}: {rate:.0f} texts/s", file=sys.stderr)

        measure("as ingest: 1,024 a call, sorted, batches of 32, no spinning, 2 threads")
        measure("64 a call (sorted within 64)", window=64)
        measure("4,096 a call (sorted within 4,096)", window=4096)
        default_width = minilm.BATCH_SIZE
        for width in (16, 64, 128):
            minilm.BATCH_SIZE = width
            measure(f"batches of {width}")
        minilm.BATCH_SIZE = default_width
        default_session = emb._session
        emb._session = _session(blobs.model, spin=True, threads=None)
        measure("ORT threads spinning")
        emb._session = _session(blobs.model, spin=False, threads=1)
        measure("one ORT thread")
        if args.fused:
            fused = _fused(blobs.model)
            if fused is not None:
                emb._session = _session(fused, spin=False, threads=None)
                measure("fused graph (SkipLayerNorm, BiasGelu)")
        emb._session = default_session
        measure("as ingest, again (drift check)")

    mean = sum(lengths) / len(lengths)
    print(
        f"\nMiniLM alone on {len(texts):,} write-path texts ({mean:.0f} tokens on average), "
        f"median of {args.rounds} passes\n"
    )
    print("| feed | texts/s | vs ingest's feed |\n|---|---:|---:|")
    base = rows[0][1]
    for name, rate in rows:
        print(f"| {name} | {rate:.0f} | {rate / base:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
