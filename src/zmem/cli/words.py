"""The CLI's shared wording: the help of options many commands take, said the same way
everywhere, and the glossary of ZMem's own words, which `zmem --help` prints and which every
help page defines where it first uses one (tests/test_cli_language.py holds the pages to it)."""

from __future__ import annotations

# --json on a command whose output is JSON anyway: every command that prints data takes --json,
# so a script can pass it everywhere.
ALWAYS_JSON = "Accepted everywhere: this command always prints JSON."
JSON = "Print the result as one JSON document."
MEMORY_ID = "The memory: its id or an unambiguous prefix of it."
LIVE_ID = "The live memory: its id or an unambiguous prefix of it."

# Words a new user does not know, each with what it means, in the words the help pages gloss
# it with. A help page that uses one says what it means the first time (in parentheses or
# after a colon); `zmem --help` lists them all.
GLOSSARY: dict[str, str] = {
    "tombstone": "retire a memory: it stops being recalled but stays readable as history "
    "(--as-of, --include-superseded); nothing is ever deleted",
    "taint": "how far a memory's origin is trusted: trusted_internal (a person, a passing "
    "test), untrusted_tool (an agent), untrusted_web (fetched from the web)",
    "tier": "one namespace's share of a read: a recall reads the project's tier and, on its "
    "own slots, user:global's",
    "surface event": "a memory shown to an agent without being asked for (a hook injected "
    "it); it counts as seen, not as used",
    "lineage": "the earlier versions a memory replaced (update, consolidate)",
    "unfold": "append a memory's lineage to a recall when the query is about changing it",
    "keeper": "the memory that survives a merge; the others are tombstoned into it",
    "cadence gate": "the rule that an automatic consolidate or organize is skipped while its "
    "last run is recent (ZMEM_CONSOLIDATE_MIN_INTERVAL_DAYS) and the store grew little since",
    "ops ring": "the per-session list of recent tool calls (commands, edited file names, no "
    "output) that the hooks keep under <data>/ops/",
    "sentinel": "a small marker file a hook leaves so it asks something once per session",
    "lane": "one way of finding candidates: keywords (BM25), entities, or embeddings (vector)",
    "injection risk": "text shaped like an instruction to the model; such memories are "
    "never injected automatically",
}
