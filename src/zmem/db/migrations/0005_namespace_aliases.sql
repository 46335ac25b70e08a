-- v5: old namespace keys that now resolve to a canonical one.
CREATE TABLE namespace_alias (
    alias      TEXT PRIMARY KEY,
    namespace  TEXT NOT NULL,
    created_at TEXT NOT NULL
);
CREATE INDEX namespace_alias_target ON namespace_alias (namespace);
