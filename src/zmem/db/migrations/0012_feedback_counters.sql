-- v12: explicit usage feedback (the promote ladder's only inputs).
ALTER TABLE memory ADD COLUMN applied_count INTEGER NOT NULL DEFAULT 0;
ALTER TABLE memory ADD COLUMN violated_count INTEGER NOT NULL DEFAULT 0;
