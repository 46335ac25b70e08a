-- v1: memories, their full-text index, and a key/value meta table.
CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);

CREATE TABLE memory (
    rid             INTEGER PRIMARY KEY,
    id              TEXT NOT NULL UNIQUE,
    content         TEXT NOT NULL,
    type            TEXT NOT NULL
                    CHECK (type IN ('fact', 'lesson', 'convention', 'preference', 'decision',
                                    'constraint')),
    tags            TEXT NOT NULL DEFAULT '',
    namespace       TEXT NOT NULL,
    signal          TEXT NOT NULL
                    CHECK (signal IN ('test', 'compile', 'lint', 'reviewer', 'user', 'none')),
    confidence      REAL NOT NULL CHECK (confidence >= 0.0 AND confidence <= 1.0),
    source_ref      TEXT,
    ingestion_ts    TEXT NOT NULL,
    superseded_at   TEXT,
    retrieval_count INTEGER NOT NULL DEFAULT 0,
    last_retrieved  TEXT
);

CREATE INDEX memory_namespace_live ON memory (namespace, superseded_at);
CREATE INDEX memory_ingestion ON memory (ingestion_ts);

-- External content: the text lives once, in memory; the index holds only postings.
CREATE VIRTUAL TABLE memory_fts USING fts5 (
    content, tags,
    content = 'memory', content_rowid = 'rid',
    tokenize = 'unicode61 remove_diacritics 2'
);

CREATE TRIGGER memory_fts_insert AFTER INSERT ON memory BEGIN
    INSERT INTO memory_fts (rowid, content, tags) VALUES (new.rid, new.content, new.tags);
END;

CREATE TRIGGER memory_fts_delete AFTER DELETE ON memory BEGIN
    INSERT INTO memory_fts (memory_fts, rowid, content, tags)
    VALUES ('delete', old.rid, old.content, old.tags);
END;

-- Only a change of indexed text re-indexes; counter bumps must not touch the index.
CREATE TRIGGER memory_fts_update AFTER UPDATE OF content, tags ON memory BEGIN
    INSERT INTO memory_fts (memory_fts, rowid, content, tags)
    VALUES ('delete', old.rid, old.content, old.tags);
    INSERT INTO memory_fts (rowid, content, tags) VALUES (new.rid, new.content, new.tags);
END;
