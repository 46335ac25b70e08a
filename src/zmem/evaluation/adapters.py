"""Public-corpus adapters: LongMemEval and LoCoMo files on disk become gold JSONL, plus the
retrieval metrics LongMemEval's official code reports (recall_any@k, recall_all@k, ndcg_any@k).
Pure conversion and arithmetic: no store, no SQL, nothing downloaded.

Gold JSONL: one JSON object per question per line, keys sorted, UTF-8, "\\n" line ends, in input
order, so a conversion is byte-for-byte reproducible. Each object holds:

- `id`: the question id (LongMemEval `question_id`; LoCoMo `<sample_id>:<index in qa>`).
- `dataset`: "longmemeval" | "locomo"; `granularity`: "session" | "turn" (LoCoMo: "turn").
- `query`: the question text; `query_date`: when it is asked, ISO-8601 UTC (LongMemEval
  `question_date`; LoCoMo the conversation's last session date).
- `corpus_key`: names the haystack (LongMemEval: the question id; LoCoMo: the sample id), so an
  evaluator can ingest a haystack shared by consecutive questions once.
- `corpus`: the documents to search, in haystack order, each `{"date", "id", "text"}` with `date`
  ISO-8601 UTC and `id` the corpus id the gold refers to.
- `gold`: the sorted corpus ids that answer the question.
- `metadata`: `question_type` (LongMemEval) or `category` and `sample_id` (LoCoMo).

The LongMemEval side follows the official retrieval code, github.com/xiaowu0162/LongMemEval
(commit 9e0b455): src/retrieval/run_retrieval.py (`process_item_flat_index`, the gold
`correct_docs`, the averaging that skips `_abs` and no-target questions) and
src/retrieval/eval_utils.py (`evaluate_retrieval`, `ndcg`, `dcg`,
`evaluate_retrieval_turn2session`). The code here is written afresh, not copied.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from zmem.evaluation.locomo_format import (
    parse_evidence,
    session_date_iso,
    session_numbers,
    turn_content,
)

KS = (1, 3, 5, 10, 30, 50)
GRANULARITIES = ("session", "turn")
ADAPTERS = ("longmemeval", "locomo")

_LME_DATE = re.compile(r"(\d{4})/(\d{1,2})/(\d{1,2})\s*(?:\(\w+\))?\s*(\d{1,2}):(\d{2})")


@dataclass
class Conversion:
    """Gold records in input order, and the questions left out, by reason."""

    records: list[dict[str, Any]] = field(default_factory=list)
    skipped: dict[str, list[str]] = field(default_factory=dict)

    def skip(self, reason: str, question_id: str) -> None:
        self.skipped.setdefault(reason, []).append(question_id)

    def summary(self) -> dict[str, Any]:
        return {
            "questions": len(self.records),
            "skipped": {reason: len(ids) for reason, ids in sorted(self.skipped.items())},
        }


# ---- gold JSONL ------------------------------------------------------------------------------


def gold_line(record: dict[str, Any]) -> str:
    # ensure_ascii=False keeps the file readable UTF-8; sort_keys makes it deterministic.
    return json.dumps(record, ensure_ascii=False, sort_keys=True) + "\n"


def write_gold(records: Iterable[dict[str, Any]], path: str | Path) -> int:
    count = 0
    with open(path, "w", encoding="utf-8", newline="\n") as out:
        for record in records:
            out.write(gold_line(record))
            count += 1
    return count


def read_gold(path: str | Path) -> Iterator[dict[str, Any]]:
    """Stream the records of a gold file (a LongMemEval one can run to gigabytes)."""
    with open(path, encoding="utf-8") as src:
        for line in src:
            if line.strip():
                yield json.loads(line)


def load_json(path: str | Path) -> Any:
    with open(path, encoding="utf-8") as src:
        return json.load(src)


def convert(adapter: str, data: Any, granularity: str = "session") -> Conversion:
    if adapter == "longmemeval":
        return convert_longmemeval(data, granularity)
    if adapter == "locomo":
        return convert_locomo(data)
    raise ValueError(f"unknown adapter {adapter!r}; choose one of {', '.join(ADAPTERS)}")


def _iso(year: int, month: int, day: int, hour: int, minute: int) -> str:
    return f"{year:04d}-{month:02d}-{day:02d}T{hour:02d}:{minute:02d}:00Z"


# ---- LongMemEval -----------------------------------------------------------------------------


def longmemeval_date(text: str) -> str:
    """'2023/05/20 (Sat) 02:21' -> '2023-05-20T02:21:00Z' (the dataset carries no zone)."""
    match = _LME_DATE.fullmatch(text.strip())
    if not match:
        raise ValueError(f"unrecognised LongMemEval date {text!r}")
    y, mo, d, h, mi = (int(g) for g in match.groups())
    return _iso(y, mo, d, h, mi)


def _has_answer(turn: dict[str, Any]) -> bool:
    # The official code indexes turn["has_answer"] inside answer sessions (every user turn there
    # carries it); elsewhere the key may be absent, which means no.
    return bool(turn.get("has_answer", False))


def longmemeval_documents(
    session: Sequence[dict[str, Any]], session_id: str, granularity: str
) -> list[tuple[str, str]]:
    """(corpus id, text) for one haystack session, as `process_item_flat_index` builds them:
    the keys are the user-side turns only. Session: one document, the user turns joined by a
    space, id = the session id, renamed answer -> noans when no user turn has_answer. Turn: one
    document per user turn, id = `<session id>_<1-based index among all turns>`, renamed
    answer -> noans in an answer session when that turn lacks has_answer."""
    user_turns = [(i, t) for i, t in enumerate(session) if t.get("role") == "user"]
    if granularity == "session":
        text = " ".join(t["content"] for _, t in user_turns)
        corpus_id = session_id
        if "answer" in session_id and not any(_has_answer(t) for _, t in user_turns):
            corpus_id = session_id.replace("answer", "noans")
        return [(corpus_id, text)]
    if granularity == "turn":
        docs = []
        for i, turn in user_turns:
            corpus_id = f"{session_id}_{i + 1}"
            if "answer" in session_id and not _has_answer(turn):
                corpus_id = corpus_id.replace("answer", "noans")
            docs.append((corpus_id, turn["content"]))
        return docs
    raise ValueError(f"granularity must be one of {', '.join(GRANULARITIES)}, not {granularity!r}")


def longmemeval_has_target(entry: dict[str, Any]) -> bool:
    """The official averaging drops a question no user turn of whose haystack has_answer."""
    return any(
        _has_answer(turn)
        for session in entry["haystack_sessions"]
        for turn in session
        if turn.get("role") == "user"
    )


def convert_longmemeval(data: Sequence[dict[str, Any]], granularity: str = "session") -> Conversion:
    """One gold record per question. Skipped, as the official averaging skips them:
    abstention questions (`_abs` in the id) and questions without a user-side target."""
    if granularity not in GRANULARITIES:
        raise ValueError(f"granularity must be one of {', '.join(GRANULARITIES)}")
    out = Conversion()
    for entry in data:
        qid = str(entry["question_id"])
        if "_abs" in qid:
            out.skip("abstention", qid)
            continue
        if not longmemeval_has_target(entry):
            out.skip("no_target", qid)
            continue
        corpus = []
        sessions = zip(
            entry["haystack_session_ids"],
            entry["haystack_sessions"],
            entry["haystack_dates"],
            strict=True,
        )
        for session_id, session, date in sessions:
            iso = longmemeval_date(date)
            for corpus_id, text in longmemeval_documents(session, str(session_id), granularity):
                corpus.append({"date": iso, "id": corpus_id, "text": text})
        # Gold is every corpus id still spelling "answer" (run_retrieval.py's correct_docs).
        gold = sorted({doc["id"] for doc in corpus if "answer" in doc["id"]})
        out.records.append(
            {
                "corpus": corpus,
                "corpus_key": qid,
                "dataset": "longmemeval",
                "gold": gold,
                "granularity": granularity,
                "id": qid,
                "metadata": {"question_type": entry.get("question_type")},
                "query": entry["question"],
                "query_date": longmemeval_date(entry["question_date"]),
            }
        )
    return out


# ---- LoCoMo ----------------------------------------------------------------------------------


def locomo_documents(conversation: dict[str, Any]) -> list[dict[str, str]]:
    """One document per dialog turn, sessions in numeric order: `[<session date>] <speaker>:
    <text>`, plus the shared photo's caption when the turn has one."""
    corpus = []
    for n in session_numbers(conversation):
        turns = conversation[f"session_{n}"]
        raw_date = conversation.get(f"session_{n}_date_time")
        if not turns:
            continue
        if not raw_date:
            raise ValueError(f"session_{n} has turns but no session_{n}_date_time")
        iso = session_date_iso(raw_date)
        for turn in turns:
            text = turn_content(raw_date, turn["speaker"], turn["text"], turn.get("blip_caption"))
            corpus.append({"date": iso, "id": turn["dia_id"], "text": text})
    return corpus


def convert_locomo(data: Sequence[dict[str, Any]]) -> Conversion:
    """One gold record per QA item over its conversation's turns. Gold = the evidence ids that
    name a turn of that conversation; an item with none is skipped (`no_evidence`)."""
    out = Conversion()
    for sample in data:
        sample_id = str(sample["sample_id"])
        corpus = locomo_documents(sample["conversation"])
        known = {doc["id"] for doc in corpus}
        query_date = max((doc["date"] for doc in corpus), default=None)
        for index, qa in enumerate(sample.get("qa", [])):
            qid = f"{sample_id}:{index}"
            gold = sorted(d for d in parse_evidence(qa.get("evidence")) if d in known)
            if not gold:
                out.skip("no_evidence", qid)
                continue
            out.records.append(
                {
                    "corpus": corpus,
                    "corpus_key": sample_id,
                    "dataset": "locomo",
                    "gold": gold,
                    "granularity": "turn",
                    "id": qid,
                    "metadata": {"category": qa.get("category"), "sample_id": sample_id},
                    "query": qa["question"],
                    "query_date": query_date,
                }
            )
    return out


# ---- metrics (eval_utils.py) -----------------------------------------------------------------
# The official code ranks the whole corpus (an argsort); ZMem returns at most `limit` hits, so a
# ranking here is a prefix: a corpus id absent from it was not retrieved at any k.


def recall_any(ranked: Sequence[str], gold: Iterable[str], k: int) -> float:
    """1.0 when any gold id is in the top k."""
    top = set(ranked[:k])
    return float(any(doc in top for doc in gold))


def recall_all(ranked: Sequence[str], gold: Iterable[str], k: int) -> float:
    """1.0 when every gold id is in the top k (vacuously 1.0 for empty gold, as officially)."""
    top = set(ranked[:k])
    return float(all(doc in top for doc in gold))


def dcg(relevances: Sequence[float], k: int) -> float:
    """The official DCG: the first position is undiscounted and position i >= 2 (1-based) is
    divided by log2(i), so positions 1 and 2 both weigh 1."""
    rel = list(relevances[:k])
    if not rel:
        return 0.0
    return rel[0] + sum(r / math.log2(i + 1) for i, r in enumerate(rel[1:], start=1))


def ndcg_any(
    ranked: Sequence[str],
    gold: Iterable[str],
    k: int,
    corpus_ids: Sequence[str] | None = None,
) -> float:
    """Binary-relevance nDCG@k. The ideal ranking counts the relevant corpus positions (one per
    gold id when corpus_ids is not given; corpus ids are unique in both datasets)."""
    wanted = set(gold)
    relevant = sum(1 for c in corpus_ids if c in wanted) if corpus_ids is not None else len(wanted)
    ideal = dcg([1.0] * relevant, k)
    if ideal == 0:
        return 0.0
    return dcg([1.0 if doc in wanted else 0.0 for doc in ranked[:k]], k) / ideal


def retrieval_metrics(
    ranked: Sequence[str],
    gold: Sequence[str],
    ks: Sequence[int] = KS,
    corpus_ids: Sequence[str] | None = None,
) -> dict[str, float]:
    """recall_any@k, recall_all@k and ndcg_any@k for every k (`evaluate_retrieval`)."""
    out: dict[str, float] = {}
    for k in ks:
        out[f"recall_any@{k}"] = recall_any(ranked, gold, k)
        out[f"recall_all@{k}"] = recall_all(ranked, gold, k)
        out[f"ndcg_any@{k}"] = ndcg_any(ranked, gold, k, corpus_ids)
    return out


def strip_turn(corpus_id: str) -> str:
    """A LongMemEval turn id's session: everything before the last underscore."""
    return "_".join(corpus_id.split("_")[:-1])


def turn_to_session_metrics(
    ranked: Sequence[str],
    gold: Sequence[str],
    corpus_ids: Sequence[str],
    ks: Sequence[int] = KS,
) -> dict[str, float]:
    """Session-level scores of a turn ranking (`evaluate_retrieval_turn2session`): ids are cut
    to their session and k grows until the top k turns span k distinct sessions (or the corpus
    runs out), then the ordinary metrics run on the session ids."""
    sessions = [strip_turn(c) for c in ranked]
    session_gold = sorted({strip_turn(g) for g in gold})
    session_corpus = [strip_turn(c) for c in corpus_ids]
    out: dict[str, float] = {}
    for k in ks:
        effective = k
        while effective <= len(session_corpus) and len(set(sessions[:effective])) < k:
            effective += 1
        out[f"recall_any@{k}"] = recall_any(sessions, session_gold, effective)
        out[f"recall_all@{k}"] = recall_all(sessions, session_gold, effective)
        out[f"ndcg_any@{k}"] = ndcg_any(sessions, session_gold, effective, session_corpus)
    return out
