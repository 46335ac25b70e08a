-- v11: associative links between memories, and the trust ledger contradictions move.
CREATE TABLE memory_link (
    src        TEXT NOT NULL REFERENCES memory (id) ON DELETE CASCADE,
    dst        TEXT NOT NULL REFERENCES memory (id) ON DELETE CASCADE,
    relation   TEXT NOT NULL
               CHECK (relation IN ('related', 'supports', 'contradicts', 'updates', 'extends',
                                   'derives')),
    score      REAL,
    created_at TEXT NOT NULL,
    PRIMARY KEY (src, dst, relation),
    CHECK (src <> dst)
) WITHOUT ROWID;
CREATE INDEX memory_link_dst ON memory_link (dst);

ALTER TABLE memory ADD COLUMN trust_score REAL NOT NULL DEFAULT 1.0
    CHECK (trust_score >= 0.0 AND trust_score <= 1.0);
