"""Builds the all-MiniLM-L6-v2 encoder as an ONNX graph straight from its safetensors weights, so
the offline install needs neither torch nor an exporter. The graph has the interface of the
official sentence-transformers ONNX export (input_ids, attention_mask, token_type_ids ->
last_hidden_state); pooling and normalisation happen in the runtime, identically for both."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

# Bump when the graph changes shape or numerics: it is part of the cache key, so an old cached
# build is never mistaken for the current one.
BUILDER_VERSION = "2"
OPSET = 17

HIDDEN = 384
HEADS = 12
HEAD_DIM = HIDDEN // HEADS
LAYERS = 6
LAYER_NORM_EPS = 1e-12
# Added to the attention scores of padding positions. exp(-10000) underflows to exactly 0 in
# float32, so a padded token has no influence and padding cannot change a vector.
MASK_BIAS = -10000.0


def build_model_bytes(tensors: dict[str, np.ndarray]) -> bytes:
    """Serialise the encoder; `tensors` maps the safetensors names to arrays."""
    import numpy as np
    import onnx  # only the build needs it; the runtime never imports onnx
    from onnx import TensorProto, helper, numpy_helper

    nodes: list = []
    inits: list = []

    def const(name: str, array: np.ndarray) -> str:
        inits.append(numpy_helper.from_array(np.ascontiguousarray(array), name))
        return name

    def weight(name: str) -> np.ndarray:
        try:
            return np.asarray(tensors[name], dtype=np.float32)
        except KeyError:
            raise KeyError(f"weights lack tensor {name!r}") from None

    def node(op: str, inputs: list[str], output: str, **attrs) -> str:
        nodes.append(helper.make_node(op, inputs, [output], name=output, **attrs))
        return output

    def layer_norm(x: str, prefix: str, out: str) -> str:
        scale = const(f"{prefix}.weight", weight(f"{prefix}.weight"))
        bias = const(f"{prefix}.bias", weight(f"{prefix}.bias"))
        return node("LayerNormalization", [x, scale, bias], out, axis=-1, epsilon=LAYER_NORM_EPS)

    def dense(x: str, prefix: str, out: str) -> str:
        # torch Linear keeps weight as [out, in]; MatMul wants [in, out].
        w = const(f"{prefix}.weight_t", weight(f"{prefix}.weight").T)
        b = const(f"{prefix}.bias", weight(f"{prefix}.bias"))
        return node("Add", [node("MatMul", [x, w], f"{out}.mm"), b], out)

    const("shape_heads", np.array([0, 0, HEADS, HEAD_DIM], dtype=np.int64))
    const("shape_hidden", np.array([0, 0, HIDDEN], dtype=np.int64))
    const("axes_1_2", np.array([1, 2], dtype=np.int64))
    const("one_f", np.array(1.0, dtype=np.float32))
    const("half_f", np.array(0.5, dtype=np.float32))
    const("mask_bias", np.array(MASK_BIAS, dtype=np.float32))
    const("sqrt2", np.array(math.sqrt(2.0), dtype=np.float32))
    const("qk_scale", np.array(1.0 / math.sqrt(HEAD_DIM), dtype=np.float32))
    const("zero_1d", np.array([0], dtype=np.int64))
    const("seq_axis", np.array([1], dtype=np.int64))

    # Embeddings: word + position + token type, then LayerNorm.
    word = const("word_embeddings", weight("embeddings.word_embeddings.weight"))
    pos = const("position_embeddings", weight("embeddings.position_embeddings.weight"))
    ttype = const("token_type_embeddings", weight("embeddings.token_type_embeddings.weight"))
    node("Shape", ["input_ids"], "ids_shape")
    node("Gather", ["ids_shape", "seq_axis"], "seq_len_1d", axis=0)
    # Positions are 0..seq-1 for every row: the first seq rows of the table, broadcast.
    pos_rows = node("Slice", [pos, "zero_1d", "seq_len_1d", "zero_1d"], "emb.pos")
    emb = node("Add", [node("Gather", [word, "input_ids"], "emb.word", axis=0), pos_rows], "emb.wp")
    emb = node(
        "Add", [emb, node("Gather", [ttype, "token_type_ids"], "emb.type", axis=0)], "emb.sum"
    )
    hidden = layer_norm(emb, "embeddings.LayerNorm", "emb.out")

    # Attention mask -> additive bias of shape [batch, 1, 1, seq].
    node("Cast", ["attention_mask"], "mask_f", to=TensorProto.FLOAT)
    node("Sub", ["one_f", "mask_f"], "mask_inv")
    node("Mul", ["mask_inv", "mask_bias"], "mask_add")
    bias = node("Unsqueeze", ["mask_add", "axes_1_2"], "mask_bias_4d")

    for i in range(LAYERS):
        p = f"encoder.layer.{i}"
        a = f"{p}.attention"
        # One fused QKV product instead of three small GEMMs.
        qkv_w = np.concatenate(
            [weight(f"{a}.self.{n}.weight") for n in ("query", "key", "value")], axis=0
        ).T
        qkv_b = np.concatenate([weight(f"{a}.self.{n}.bias") for n in ("query", "key", "value")])
        const(f"{p}.qkv.w", qkv_w)
        const(f"{p}.qkv.b", qkv_b)
        node("MatMul", [hidden, f"{p}.qkv.w"], f"{p}.qkv.mm")
        node("Add", [f"{p}.qkv.mm", f"{p}.qkv.b"], f"{p}.qkv")
        nodes.append(
            helper.make_node(
                "Split",
                [f"{p}.qkv"],
                [f"{p}.q", f"{p}.k", f"{p}.v"],
                name=f"{p}.split",
                axis=-1,
                num_outputs=3,
            )
            if OPSET >= 18
            else helper.make_node(
                "Split",
                [f"{p}.qkv", "split_sizes"],
                [f"{p}.q", f"{p}.k", f"{p}.v"],
                name=f"{p}.split",
                axis=-1,
            )
        )
        for n in ("q", "k", "v"):
            node("Reshape", [f"{p}.{n}", "shape_heads"], f"{p}.{n}.heads")
        q = node("Transpose", [f"{p}.q.heads"], f"{p}.q.t", perm=[0, 2, 1, 3])
        k = node("Transpose", [f"{p}.k.heads"], f"{p}.k.t", perm=[0, 2, 3, 1])
        v = node("Transpose", [f"{p}.v.heads"], f"{p}.v.t", perm=[0, 2, 1, 3])
        scores = node("Mul", [node("MatMul", [q, k], f"{p}.qk"), "qk_scale"], f"{p}.scores")
        scores = node("Add", [scores, bias], f"{p}.scores.masked")
        probs = node("Softmax", [scores], f"{p}.probs", axis=-1)
        ctx = node(
            "Transpose", [node("MatMul", [probs, v], f"{p}.ctx")], f"{p}.ctx.t", perm=[0, 2, 1, 3]
        )
        ctx = node("Reshape", [ctx, "shape_hidden"], f"{p}.ctx.flat")
        attn = dense(ctx, f"{a}.output.dense", f"{p}.attn.dense")
        hidden = layer_norm(
            node("Add", [attn, hidden], f"{p}.attn.res"), f"{a}.output.LayerNorm", f"{p}.attn.out"
        )

        # Feed-forward with exact (erf) GELU, as BERT's "gelu" is, written in the canonical
        # x * (1 + erf(x / sqrt 2)) * 0.5 order that onnxruntime fuses into one Gelu kernel.
        up = dense(hidden, f"{p}.intermediate.dense", f"{p}.ffn.up")
        erf = node("Erf", [node("Div", [up, "sqrt2"], f"{p}.gelu.scaled")], f"{p}.gelu.erf")
        act = node("Mul", [up, node("Add", [erf, "one_f"], f"{p}.gelu.1p")], f"{p}.gelu.x")
        act = node("Mul", [act, "half_f"], f"{p}.gelu")
        down = dense(act, f"{p}.output.dense", f"{p}.ffn.down")
        out = "last_hidden_state" if i == LAYERS - 1 else f"{p}.out"
        hidden = layer_norm(
            node("Add", [down, hidden], f"{p}.ffn.res"), f"{p}.output.LayerNorm", out
        )

    if OPSET < 18:
        const("split_sizes", np.array([HIDDEN, HIDDEN, HIDDEN], dtype=np.int64))
    ids = ["batch", "sequence"]
    graph = helper.make_graph(
        nodes,
        "all-MiniLM-L6-v2",
        [
            helper.make_tensor_value_info(n, TensorProto.INT64, ids)
            for n in ("input_ids", "attention_mask", "token_type_ids")
        ],
        [
            helper.make_tensor_value_info(
                "last_hidden_state", TensorProto.FLOAT, ["batch", "sequence", HIDDEN]
            )
        ],
        initializer=inits,
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", OPSET)],
        producer_name="zmem",
        producer_version=BUILDER_VERSION,
    )
    # IR version pinned so the bytes (and so the cached file's hash) do not drift with the
    # installed onnx release, and stay loadable by older runtimes.
    model.ir_version = 8
    blob = model.SerializeToString()
    onnx.checker.check_model(blob)  # checks the serialised bytes: one serialisation, not two
    return blob
