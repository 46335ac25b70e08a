"""rekey-namespace through the real CLI: a preview unless --confirm, live rows only (history
keeps its namespace), rows moved become reachable and dedup against new writes in their new
namespace, and every bad selector or target is refused with nothing written."""

from __future__ import annotations

import json

import apsw
import pytest

from conftest import add_row, table_counts


def _strand(store_path, memory_id: str, namespace: str) -> None:
    # Rows under a near-miss namespace only exist in stores older than the add-time guard.
    conn = apsw.Connection(str(store_path))
    conn.execute("UPDATE memory SET namespace = ? WHERE id = ?", (namespace, memory_id))
    conn.close()


def _namespaces(store_path) -> dict[str, str]:
    conn = apsw.Connection(str(store_path))
    try:
        return dict(conn.execute("SELECT id, namespace FROM memory"))
    finally:
        conn.close()


def test_near_miss_rows_move_to_the_global_namespace(store, store_path, run_cli):
    a = add_row(store, "Prefer ripgrep over grep for code search", namespace="project:x").id
    b = add_row(store, "Always answer in English", namespace="project:x").id
    old = add_row(store, "Use tabs in the makefile", namespace="project:x").id
    store.supersede(old)
    _strand(store_path, a, "global")
    _strand(store_path, b, "userglobal")
    _strand(store_path, old, "global")
    before = table_counts(store_path)
    preview = run_cli("rekey-namespace", "--near-miss-global")
    assert (
        preview.exit_code == 0
        and "would move 1 live row(s): global -> user:global" in (preview.stdout)
        and "preview only" in preview.stdout
    )
    dry = json.loads(run_cli("rekey-namespace", "--near-miss-global", "--confirm", "--dry-run",
                             "--json").stdout)  # fmt: skip
    assert dry == {"to": "user:global", "from": {"global": 1, "userglobal": 1}, "rows": 2,
                   "applied": False}  # fmt: skip
    assert table_counts(store_path) == before
    done = json.loads(
        run_cli("rekey-namespace", "--near-miss-global", "--confirm", "--json").stdout
    )
    assert done["applied"] and done["rows"] == 2
    ns = _namespaces(store_path)
    assert ns[a] == ns[b] == "user:global" and ns[old] == "global"  # history untouched
    # Reachable where the hooks look, and the write path's dedup sees the moved row.
    hits = json.loads(run_cli("recall", "--query", "ripgrep code search", "--namespace",
                              "user:global", "--json").stdout)["results"]  # fmt: skip
    assert hits[0]["id"] == a
    again = store.add("Prefer ripgrep over grep for code search", namespace="user:global",
                      type="lesson", signal="test")  # fmt: skip
    assert (again.result, again.id) == ("deduped", a)


def test_from_to_moves_one_exact_namespace(store, store_path, run_cli):
    a = add_row(store, "Deploys go through atlantis", namespace="project:old-name").id
    b = add_row(store, "Deploys go through atlantis plans", namespace="project:old-name-2").id
    result = run_cli("rekey-namespace", "--from", "project:old-name", "--to", "project:new",
                     "--confirm")  # fmt: skip
    assert result.exit_code == 0 and "moved 1 live row(s)" in result.stdout
    ns = _namespaces(store_path)
    assert ns[a] == "project:new" and ns[b] == "project:old-name-2"
    nothing = run_cli("rekey-namespace", "--from", "project:none", "--to", "project:new")
    assert nothing.exit_code == 0 and "nothing to move" in nothing.stdout


@pytest.mark.parametrize(
    "args",
    [
        ["--near-miss-global", "--to", "global", "--confirm"],  # a near-miss target
        ["--from", "project:a", "--near-miss-global", "--confirm"],  # two selectors
        ["--to", "user:global", "--confirm"],  # no selector
        ["--from", "project:a", "--confirm"],  # --from without --to
        ["--from", "project:a", "--to", "project:a", "--confirm"],
        ["--from", "project:a", "--to", "not a namespace", "--confirm"],
    ],
)
def test_bad_selectors_and_targets_write_nothing(store, store_path, run_cli, args):
    add_row(store, "Deploys go through atlantis", namespace="project:a")
    before = table_counts(store_path)
    assert run_cli("rekey-namespace", *args).exit_code == 2
    assert table_counts(store_path) == before
