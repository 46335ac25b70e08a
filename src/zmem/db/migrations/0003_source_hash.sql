-- v3: content hash of a file: source, so recall can tell when the source changed.
ALTER TABLE memory ADD COLUMN source_hash TEXT;
