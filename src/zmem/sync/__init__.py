"""Moving memories out of a store and between stores: the markdown hand-off pack (and, with
their issue, the JSONL export and ingest)."""
