-- v7: provenance of rows absorbed into this one (a JSON array of ids).
ALTER TABLE memory ADD COLUMN merged_from TEXT NOT NULL DEFAULT '[]';
