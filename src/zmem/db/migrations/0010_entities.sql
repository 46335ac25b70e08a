-- v10: deterministic entity identity (the third recall lane).
CREATE TABLE entity (
    id         TEXT PRIMARY KEY,
    kind       TEXT NOT NULL CHECK (kind IN ('person', 'project', 'tool', 'preference', 'other')),
    name       TEXT NOT NULL,
    created_at TEXT NOT NULL
);

CREATE TABLE entity_alias (
    alias     TEXT PRIMARY KEY,
    entity_id TEXT NOT NULL REFERENCES entity (id) ON DELETE CASCADE
);
CREATE INDEX entity_alias_entity ON entity_alias (entity_id);

CREATE TABLE memory_entity (
    memory_id TEXT NOT NULL REFERENCES memory (id) ON DELETE CASCADE,
    entity_id TEXT NOT NULL REFERENCES entity (id) ON DELETE CASCADE,
    PRIMARY KEY (memory_id, entity_id)
) WITHOUT ROWID;
CREATE INDEX memory_entity_entity ON memory_entity (entity_id);

-- Rows written before v10 get their entity links from the store on its next open.
INSERT INTO meta (key, value) VALUES ('backfill:entities', '1')
ON CONFLICT (key) DO UPDATE SET value = '1';
