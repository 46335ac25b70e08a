-- v8: dedup and linking without scanning the store.
--
-- content_norm holds a row's similarity tokens. term_df has one row per similarity token and
-- namespace (the token prefixed with a short namespace id, "n1a2b3c4q<token>"): how many rows
-- hold it, and while that count is small, which rows (comma-separated rids). A write reads the
-- entries of its own tokens in one query, takes the rarest, and finds its possible twins in
-- their posting lists without touching the memory table. Tokens held by more than
-- POSTINGS_CAP rows keep only the count (posts NULL); the rare write made only of such tokens
-- falls back to the FTS index. Measured alternatives: fts5vocab walks a term's whole doclist to
-- count it (0.9 ms at 50k rows); a separate (term, rid) posting table doubled the random pages
-- each commit writes.
-- A rowid table with an index on term, not WITHOUT ROWID: a WITHOUT ROWID b-tree keeps whole
-- rows in its interior cells (fan-out ~10 with posting lists inline) and spills any row over
-- ~1 KB to an overflow page that every append rewrites; a table leaf holds a row of up to ~4 KB.
-- Stores created with the WITHOUT ROWID table are converted when opened (migrate.py).
-- The migration step backfills both.
ALTER TABLE memory ADD COLUMN content_norm TEXT;
ALTER TABLE memory ADD COLUMN refreshed_at TEXT;

CREATE TABLE term_df (
    term  TEXT PRIMARY KEY,
    df    INTEGER NOT NULL,
    posts TEXT
);
