-- The team hub (issue 32): shared rows in the sync record shape, one row per object, each with
-- the server-assigned sequence of its last change and who wrote it from where. Access is row
-- level security on the namespace, per role (zmem_hub.access).
CREATE TABLE zmem_hub.record (
    kind       text        NOT NULL CHECK (kind IN ('memory', 'link', 'episode', 'episode_memory')),
    key        text        NOT NULL,
    namespace  text        NOT NULL,
    seq        bigint      NOT NULL,
    body       jsonb       NOT NULL,
    written_by name        NOT NULL DEFAULT current_user,
    machine    text        NOT NULL,
    written_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (kind, key)
);
CREATE UNIQUE INDEX record_seq ON zmem_hub.record (seq);
CREATE INDEX record_namespace_seq ON zmem_hub.record (namespace, seq);

-- Every change draws the next value, under one advisory lock held until commit: changes
-- become visible in sequence order, so a reader's cursor never passes one still in flight.
CREATE SEQUENCE zmem_hub.change_seq;

CREATE TABLE zmem_hub.access (
    role      name    NOT NULL,
    namespace text    NOT NULL,
    can_write boolean NOT NULL DEFAULT true,
    PRIMARY KEY (role, namespace)
);

ALTER TABLE zmem_hub.record ENABLE ROW LEVEL SECURITY;
ALTER TABLE zmem_hub.access ENABLE ROW LEVEL SECURITY;

CREATE POLICY member_reads ON zmem_hub.record FOR SELECT USING (
    EXISTS (SELECT 1 FROM zmem_hub.access a
            WHERE a.role = current_user AND a.namespace = record.namespace)
);
CREATE POLICY member_inserts ON zmem_hub.record FOR INSERT WITH CHECK (
    written_by = current_user AND EXISTS (
        SELECT 1 FROM zmem_hub.access a
        WHERE a.role = current_user AND a.namespace = record.namespace AND a.can_write)
);
CREATE POLICY member_updates ON zmem_hub.record FOR UPDATE USING (
    EXISTS (SELECT 1 FROM zmem_hub.access a
            WHERE a.role = current_user AND a.namespace = record.namespace AND a.can_write)
) WITH CHECK (
    written_by = current_user AND EXISTS (
        SELECT 1 FROM zmem_hub.access a
        WHERE a.role = current_user AND a.namespace = record.namespace AND a.can_write)
);
CREATE POLICY member_sees_own_access ON zmem_hub.access FOR SELECT USING (role = current_user);
