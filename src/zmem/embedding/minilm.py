"""The `minilm` runtime: all-MiniLM-L6-v2 under onnxruntime with the `tokenizers` tokenizer,
mean pooling over the attention mask and L2 normalisation, matching sentence-transformers
(max_seq_length 256). Texts are sorted by length and padded per batch to the longest one."""

from __future__ import annotations

import numpy as np

from zmem.embedding.model_files import ModelBlobs

DIM = 384
MODEL_NAME = "all-MiniLM-L6-v2"
MAX_TOKENS = 256  # sentence-transformers' max_seq_length for this model
BATCH_SIZE = 32


class MiniLMEmbedder:
    """Embeds texts into unit-length float32 vectors of 384 dimensions."""

    dim = DIM
    model_name = MODEL_NAME

    def __init__(self, blobs: ModelBlobs, *, threads: int | None = None):
        import onnxruntime as ort
        from tokenizers import Tokenizer

        tokenizer = Tokenizer.from_str(blobs.tokenizer_json)
        # The shipped tokenizer.json pads every input to 128 and truncates at 128 (3.5x slower,
        # and long texts embed differently from the reference). Padding is done per batch below.
        tokenizer.no_padding()
        tokenizer.enable_truncation(max_length=MAX_TOKENS)
        self._tokenizer = tokenizer
        options = ort.SessionOptions()
        options.log_severity_level = 3  # shape-merge notices are not the user's business
        if threads:
            options.intra_op_num_threads = threads
        # ORT's worker threads otherwise busy-wait after each run and, on a 2-core machine,
        # take the cores from the SQLite and numpy work that follows every embedding (a
        # recall's lanes, an add's dedup): warm prompt KNN 5.3 -> 1.8 ms, its embedding
        # 9.7 -> 7.7 ms. Back-to-back batches (backfill) lose ~15% (docs/decisions.md).
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self._session = ort.InferenceSession(
            blobs.model, sess_options=options, providers=["CPUExecutionProvider"]
        )
        self._inputs = {i.name for i in self._session.get_inputs()}
        self.source = blobs.source

    def embed(self, texts: list[str]) -> np.ndarray:
        """float32 array (len(texts), 384), rows in input order, each of unit length."""
        if isinstance(texts, str):
            raise TypeError("embed() takes a list of texts, not one string")
        out = np.zeros((len(texts), DIM), dtype=np.float32)
        if not texts:
            return out
        encodings = self._tokenizer.encode_batch(list(texts), add_special_tokens=True)
        # Similar lengths share a batch, so little compute goes to padding.
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
        for start in range(0, len(order), BATCH_SIZE):
            rows = order[start : start + BATCH_SIZE]
            out[rows] = self._run([encodings[i] for i in rows])
        return out

    def _run(self, encodings: list) -> np.ndarray:
        width = max(len(e.ids) for e in encodings)
        ids = np.zeros((len(encodings), width), dtype=np.int64)
        mask = np.zeros_like(ids)
        for row, enc in enumerate(encodings):
            ids[row, : len(enc.ids)] = enc.ids
            mask[row, : len(enc.ids)] = 1
        feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        hidden = self._session.run(None, {k: v for k, v in feed.items() if k in self._inputs})[0]
        if hidden.ndim == 2:  # an export that pools inside the graph
            pooled = hidden.astype(np.float32)
        else:
            weights = mask[:, :, None].astype(np.float32)
            pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return pooled / np.maximum(norms, 1e-12)
