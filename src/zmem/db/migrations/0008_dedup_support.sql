-- v8: dedup and linking without scanning the store.
--
-- content_norm holds a row's similarity tokens. dedup_fts indexes them once more, each token
-- prefixed with a short id of the row's namespace ("n1a2b3c4q<token>"), so a posting list holds
-- one namespace's rows only and a write's candidate query touches nothing outside its own
-- namespace. term_df counts rows per prefixed token, so the query can use the rarest tokens
-- (FTS5's fts5vocab would walk a term's whole doclist to count it: 0.9 ms at 50k rows).
-- The migration step backfills all three.
ALTER TABLE memory ADD COLUMN content_norm TEXT;
ALTER TABLE memory ADD COLUMN refreshed_at TEXT;

CREATE VIRTUAL TABLE dedup_fts USING fts5 (
    terms,
    content = '',
    tokenize = 'unicode61 remove_diacritics 0'
);

CREATE TABLE term_df (
    term TEXT PRIMARY KEY,
    df   INTEGER NOT NULL
) WITHOUT ROWID;
