-- v9: append-only history. Validity intervals for --as-of, update lineage, provenance taint.
ALTER TABLE memory ADD COLUMN valid_from TEXT;
ALTER TABLE memory ADD COLUMN valid_until TEXT;
ALTER TABLE memory ADD COLUMN update_of TEXT;
ALTER TABLE memory ADD COLUMN taint TEXT NOT NULL DEFAULT 'trusted_internal'
    CHECK (taint IN ('trusted_internal', 'untrusted_tool', 'untrusted_web'));

UPDATE memory SET valid_from = ingestion_ts;
UPDATE memory SET valid_until = superseded_at WHERE superseded_at IS NOT NULL;
UPDATE memory SET taint = 'untrusted_tool' WHERE signal = 'none';

CREATE INDEX memory_update_of ON memory (update_of);
CREATE INDEX memory_valid_from ON memory (valid_from);

-- A tombstone is history: moving it would falsify every --as-of read across it.
CREATE TRIGGER memory_tombstone_write_once
BEFORE UPDATE OF superseded_at, valid_until ON memory
WHEN old.superseded_at IS NOT NULL
     AND (new.superseded_at IS NOT old.superseded_at OR new.valid_until IS NOT old.valid_until)
BEGIN
    SELECT RAISE(ABORT, 'tombstones are write-once');
END;
