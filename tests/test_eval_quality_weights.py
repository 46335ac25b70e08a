"""scripts/eval_quality.py --weights (issue 35: composite weights read on the coding dev set
beside the conversational protocol): the names and values it takes, and a bad spec refused with
exit 2 before any store is built or report written."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from conftest import load_script
from zmem.retrieval.fusion import DEFAULT_WEIGHTS, Weights

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "eval_quality.py"


def test_named_weights_replace_the_shipped_ones_and_the_rest_stay():
    parse = load_script("eval_quality").parse_weights
    assert parse("bm25=0.55,recency=0.15") == Weights(0.55, 0.20, 0.15, 0.10)
    assert parse(" bm25=0.70 ") == DEFAULT_WEIGHTS


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("bm25=0.85", "sum to 1.15"),
        ("speed=0.1", "'speed=0.1' is not NAME=VALUE"),
        ("recency", "'recency' is not NAME=VALUE"),
        ("bm25=much", "'much' is not a number"),
        ("bm25=1.5,confidence=-0.5", "between 0 and 1"),
    ],
)
def test_a_bad_spec_is_one_line_and_exit_2_with_nothing_written(tmp_path, spec, says):
    out = tmp_path / "report.json"
    work = tmp_path / "work"
    done = subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            "--weights",
            spec,
            "--work",
            str(work),
            "--json-out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("eval_quality: --weights: ") and says in lines[0]
    assert not out.exists() and not work.exists()


@pytest.mark.parametrize("spec", ["mmr.NO_SUCH=1", "no_module.X=1", "FLOOR=1"])
def test_a_param_naming_no_retrieval_constant_is_refused_with_nothing_written(tmp_path, spec):
    out, work = tmp_path / "report.json", tmp_path / "work"
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--param", spec]
        + ["--work", str(work), "--json-out", str(out)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr.strip().endswith("does not exist")
    assert not out.exists() and not work.exists()
