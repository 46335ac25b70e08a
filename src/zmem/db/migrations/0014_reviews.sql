-- v14: the write-time judge's questions (issue 50). A pair of notes the word rules could not
-- decide is stored as written and asked about: pending while `answer` is NULL, answered with
-- same / replaces / contradicts / distinct (a distinct pair is never asked again).
CREATE TABLE review (
    new_id      TEXT NOT NULL REFERENCES memory (id) ON DELETE CASCADE,
    old_id      TEXT NOT NULL REFERENCES memory (id) ON DELETE CASCADE,
    namespace   TEXT NOT NULL,
    likely      TEXT,
    evidence    TEXT NOT NULL,
    origin      TEXT NOT NULL,
    created_at  TEXT NOT NULL,
    offered_at  TEXT,
    answer      TEXT,
    answered_at TEXT,
    answered_by TEXT,
    PRIMARY KEY (new_id, old_id)
) WITHOUT ROWID;
CREATE INDEX review_pending ON review (namespace, created_at) WHERE answer IS NULL;
CREATE INDEX review_old ON review (old_id);
