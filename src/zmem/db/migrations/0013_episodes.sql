-- v13: episodes, containers for the memories of one working session.
CREATE TABLE episode (
    id                TEXT PRIMARY KEY,
    namespace         TEXT NOT NULL,
    started_at        TEXT NOT NULL,
    ended_at          TEXT,
    token_count       INTEGER,
    summary_memory_id TEXT REFERENCES memory (id)
);
CREATE INDEX episode_namespace ON episode (namespace, started_at);

CREATE TABLE episode_memory (
    episode_id TEXT NOT NULL REFERENCES episode (id) ON DELETE CASCADE,
    memory_id  TEXT NOT NULL REFERENCES memory (id) ON DELETE CASCADE,
    added_at   TEXT NOT NULL,
    PRIMARY KEY (episode_id, memory_id)
) WITHOUT ROWID;
CREATE INDEX episode_memory_memory ON episode_memory (memory_id);
