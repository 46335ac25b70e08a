-- v6: passive surfaces (hooks) count separately from explicit retrievals.
ALTER TABLE memory ADD COLUMN surfaced_count INTEGER NOT NULL DEFAULT 0;
ALTER TABLE memory ADD COLUMN last_surfaced TEXT;
