-- v2: tombstones say why.
ALTER TABLE memory ADD COLUMN supersede_reason TEXT;
