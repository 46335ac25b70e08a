-- v4: the row's embedding and which model produced it.
ALTER TABLE memory ADD COLUMN embedding BLOB;
ALTER TABLE memory ADD COLUMN embedding_model TEXT;
ALTER TABLE memory ADD COLUMN embedded_at TEXT;
