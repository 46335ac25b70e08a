"""Would an int8 query embedding cost recall? Quantizes the shipped MiniLM graph (onnxruntime's
dynamic quantization, int8 weights per channel, MatMul only), then prints four things:

- the embedding time of one prompt, fp32 against int8, alternated;
- how close the two models' vectors are on the coding corpus (cosine);
- scripts/eval_quality.py's tables, run once with fp32 query vectors;
- the same tables run once with int8 query vectors.

The stored vectors stay fp32 in both runs (the issue's condition: no store conversion); only
the query side changes. The adoption rule is recall within 0.01 of fp32 for every kind, on
the validation side.

    .venv/bin/python bench/query_int8.py [--side validation] [--sets coding,paraphrase,fixture]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "bench"))

from hooks import PROMPTS  # noqa: E402  the warm hook bench's prompts


def quantized(blobs, work: Path):
    from onnxruntime.quantization import QuantType, quantize_dynamic

    src, dst = work / "fp32.onnx", work / "int8.onnx"
    src.write_bytes(blobs.model)
    quantize_dynamic(
        str(src),
        str(dst),
        weight_type=QuantType.QInt8,
        per_channel=True,
        op_types_to_quantize=["MatMul"],
    )
    return dataclasses.replace(blobs, model=dst.read_bytes())


def embed_ms(embedder, runs: int = 200) -> float:
    times = []
    for i in range(runs):
        time.sleep(0.005)  # prompts arrive apart: the model's threads are idle in between
        t0 = time.perf_counter()
        embedder.embed([PROMPTS[i % len(PROMPTS)]])
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times[20:])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--side", default="validation")
    ap.add_argument("--sets", default="coding,paraphrase,fixture")
    args = ap.parse_args()

    import eval_quality

    from zmem.config import default_data_dir
    from zmem.embedding import model_files
    from zmem.embedding.minilm import MiniLMEmbedder
    from zmem.store import vectors as store_vectors

    work = Path(tempfile.mkdtemp(prefix="zmem-int8-"))
    blobs = model_files.resolve(default_data_dir())
    fp32 = MiniLMEmbedder(blobs)
    small = quantized(blobs, work)
    int8 = MiniLMEmbedder(small)
    size = len(small.model) / 1e6
    for _ in range(2):
        print(f"one prompt: fp32 {embed_ms(fp32):.2f} ms, int8 {embed_ms(int8):.2f} ms")
    corpus = [
        json.loads(line)["content"]
        for line in (ROOT / "eval" / "coding_corpus.jsonl").read_text().splitlines()
        if line.strip()
    ][:1000]
    cos = (fp32.embed(corpus) * int8.embed(corpus)).sum(axis=1)
    print(
        f"int8 graph {size:.1f} MB; cosine fp32 vs int8 over {len(corpus)} corpus texts: "
        f"min {cos.min():.4f}, p5 {np.percentile(cos, 5):.4f}, median {np.median(cos):.4f}"
    )

    original = store_vectors.StoreVectors.query

    def int8_query(self, text: str) -> bytes | None:
        if self.embedder is None:
            return None
        return int8.embed([text])[0].astype("<f4").tobytes()

    for label, query in (("fp32 query vectors", original), ("int8 query vectors", int8_query)):
        store_vectors.StoreVectors.query = query
        print(f"\n## {label}")
        sys.argv = ["eval_quality.py", "--side", args.side, "--sets", args.sets]
        sys.stdout.flush()
        if eval_quality.main() != 0:
            return 1
    store_vectors.StoreVectors.query = original
    return 0


if __name__ == "__main__":
    sys.exit(main())
