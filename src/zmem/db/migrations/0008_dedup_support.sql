-- v8: dedup without scanning the store. content_norm holds the row's similarity tokens
-- (backfilled by the migration step); the vocabulary table gives per-term document counts so a
-- write can query by its rarest terms only.
ALTER TABLE memory ADD COLUMN content_norm TEXT;
ALTER TABLE memory ADD COLUMN refreshed_at TEXT;
CREATE VIRTUAL TABLE memory_vocab USING fts5vocab (memory_fts, 'row');
