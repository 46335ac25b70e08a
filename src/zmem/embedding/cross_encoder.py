"""The optional cross-encoder rerank: a local pair-scoring ONNX model (with the tokenizer.json
beside it) re-orders the head of a recall by how well each passage answers the query. Every
problem yields no reranker or the unchanged order, so a rerank can never fail a recall."""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

if TYPE_CHECKING:
    import numpy as np

MAX_TOKENS = 512  # BERT-style cross-encoders (ms-marco-MiniLM included) have 512 positions
BATCH_SIZE = 16
TOKENIZER_FILE = "tokenizer.json"
# The only inputs a pair scorer is fed; a graph that declares anything else cannot be driven.
KNOWN_INPUTS = ("input_ids", "attention_mask", "token_type_ids")
_INT_TYPES = {"tensor(int64)": "int64", "tensor(int32)": "int32"}

T = TypeVar("T")


class Scorer(Protocol):
    def score(self, query: str, passages: list[str]) -> list[float]: ...


class Reranker:
    """Scores (query, passage) pairs with a loaded ONNX cross-encoder; higher is more relevant."""

    def __init__(self, session: Any, tokenizer: Any, source: Path):
        self._session = session
        self._tokenizer = tokenizer
        self.source = source
        padding = tokenizer.padding or {}
        pad = padding.get("pad_id", tokenizer.token_to_id("[PAD]"))
        self._pad = 0 if pad is None else int(pad)
        # Padding is done per batch to the longest pair; a shipped fixed-length padding would
        # only waste compute.
        tokenizer.no_padding()
        self._dtypes: dict[str, str] = {}
        self._fixed_len: int | None = None
        self._fixed_batch: int | None = None
        for spec in session.get_inputs():
            if spec.name not in KNOWN_INPUTS or spec.type not in _INT_TYPES:
                raise ValueError(f"unsupported model input {spec.name} ({spec.type})")
            if len(spec.shape) != 2:
                raise ValueError(f"input {spec.name} is not [batch, sequence]")
            self._dtypes[spec.name] = _INT_TYPES[spec.type]
            batch, seq = spec.shape
            # Fixed-shape exports must be fed exactly their declared sizes.
            if isinstance(seq, int) and seq > 0:
                self._fixed_len = min(seq, self._fixed_len or seq)
            if isinstance(batch, int) and batch > 0:
                self._fixed_batch = min(batch, self._fixed_batch or batch)
        self._batch = self._fixed_batch or BATCH_SIZE
        if "input_ids" not in self._dtypes:
            raise ValueError("model has no input_ids input")
        outputs = session.get_outputs()
        if not outputs:
            raise ValueError("model has no output")
        names = [o.name for o in outputs]
        self._output = "logits" if "logits" in names else names[0]
        shape = outputs[names.index(self._output)].shape
        if shape is not None and len(shape) not in (1, 2):
            raise ValueError(f"output {self._output} has rank {len(shape)}, expected logits")
        # Longest-first cuts the longer side of a pair first, like transformers' truncation=True.
        limit = min(MAX_TOKENS, self._fixed_len or MAX_TOKENS)
        tokenizer.enable_truncation(max_length=limit, strategy="longest_first")

    def score(self, query: str, passages: list[str]) -> list[float]:
        """One relevance logit per passage, in input order."""
        if isinstance(passages, str):
            raise TypeError("score() takes a list of passages, not one string")
        if not passages:
            return []
        encodings = self._tokenizer.encode_batch(
            [(query, p) for p in passages], add_special_tokens=True
        )
        scores = [0.0] * len(passages)
        # Similar lengths share a batch, so little compute goes to padding.
        order = sorted(range(len(passages)), key=lambda i: len(encodings[i].ids))
        for start in range(0, len(order), self._batch):
            rows = order[start : start + self._batch]
            for row, value in zip(rows, self._run([encodings[i] for i in rows]), strict=True):
                scores[row] = float(value)
        return scores

    def _run(self, encodings: list) -> np.ndarray:
        import numpy as np

        width = self._fixed_len or max(len(e.ids) for e in encodings)
        # A fixed batch size is filled with empty rows whose scores are dropped below.
        rows = self._fixed_batch or len(encodings)
        ids = np.full((rows, width), self._pad, dtype=np.int64)
        mask = np.zeros_like(ids)
        types = np.zeros_like(ids)
        for row, enc in enumerate(encodings):
            n = len(enc.ids)
            ids[row, :n] = enc.ids
            mask[row, :n] = 1
            types[row, :n] = enc.type_ids
        feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
        out = np.asarray(
            self._session.run(
                [self._output], {k: feed[k].astype(t) for k, t in self._dtypes.items()}
            )[0]
        )
        if out.ndim == 2 and out.shape[1] in (1, 2):
            # One column is the logit; of a 2-class head the last column is "relevant".
            out = out[:, -1]
        if out.shape != (rows,):
            raise ValueError(f"model returned shape {out.shape} for {rows} pairs")
        return out[: len(encodings)]


_lock = threading.Lock()
# (model path, model stat, tokenizer stat) -> (reranker or None, why not). The stats are part of
# the key so a model fixed or replaced on disk is picked up by a long-running process.
_cache: dict[tuple, tuple[Reranker | None, str | None]] = {}


def _stat(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size)


def _key(model_path: str) -> tuple[Path, tuple]:
    path = Path(model_path).expanduser().resolve()
    return path, (str(path), _stat(path), _stat(path.with_name(TOKENIZER_FILE)))


def _load(path: Path) -> Reranker:
    if not path.is_file():
        raise FileNotFoundError(f"no model file at {path}")
    tokenizer_path = path.with_name(TOKENIZER_FILE)
    if not tokenizer_path.is_file():
        raise FileNotFoundError(f"no {TOKENIZER_FILE} beside {path}")
    import onnxruntime as ort
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(tokenizer_path))
    options = ort.SessionOptions()
    options.log_severity_level = 3
    session = ort.InferenceSession(
        str(path), sess_options=options, providers=["CPUExecutionProvider"]
    )
    reranker = Reranker(session, tokenizer, path)
    # One real pair at load time: a graph whose signature looks right but cannot run (or
    # returns something other than one number per pair) is refused here, not per recall.
    probe = reranker.score("probe query", ["probe passage"])
    if len(probe) != 1 or not math.isfinite(probe[0]):
        raise ValueError(f"probe scoring returned {probe!r}")
    return reranker


def load_reranker(model_path: str | None) -> Reranker | None:
    """The cached reranker of `model_path` (a local .onnx with tokenizer.json beside it), or None
    when the path is unset, a file is missing, or the model cannot be loaded or driven. Never
    raises; `reranker_problem` tells why a path gave None."""
    if not model_path:
        return None
    try:
        path, key = _key(model_path)
        with _lock:
            found = _cache.get(key)
            if found is None:
                try:
                    found = (_load(path), None)
                except Exception as exc:  # any failure means "no rerank", never a failed recall
                    found = (None, f"{type(exc).__name__}: {exc}")
                _cache[key] = found
        return found[0]
    except Exception:
        return None


def reranker_problem(model_path: str | None) -> str | None:
    """Why `load_reranker(model_path)` gives None (for diagnostics), or None if it loads."""
    if not model_path:
        return "no cross-encoder model path is set"
    load_reranker(model_path)
    try:
        found = _cache.get(_key(model_path)[1])
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    return None if found is None else found[1]


def rerank(hits: Sequence[T], query: str, reranker: Scorer | None, top_n: int) -> list[T]:
    """The first `top_n` of `hits` (anything with a `.content`) ordered by cross-encoder score,
    ties in their original order, followed by the rest untouched. Returns a new list; on any
    scoring problem it is the input order unchanged."""
    out = list(hits)
    if reranker is None or top_n < 2 or len(out) < 2:
        return out
    head = out[:top_n]
    try:
        scores = [float(s) for s in reranker.score(query, [str(h.content) for h in head])]
    except Exception:
        return out
    if len(scores) != len(head) or not all(math.isfinite(s) for s in scores):
        return out
    order = sorted(range(len(head)), key=lambda i: -scores[i])  # sorted() is stable
    return [head[i] for i in order] + out[top_n:]
