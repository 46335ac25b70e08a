-- Issue 47: the hub decides what only it may decide. Members no longer write zmem_hub.record:
-- every change goes through zmem_hub.push() (SECURITY DEFINER), which takes the author from the
-- login (session_user), refuses an object whose body disagrees with its key or namespace, keeps
-- an object's identity, namespace and content as first written, and lets a member only retire a
-- memory or close an episode afterwards (recorded as that member's act). A trigger sets the
-- sequence and the transaction id of every change, whoever writes: a reader's cursor is a
-- snapshot (pg_current_snapshot), so no lock orders visibility (docs/decisions.md).

ALTER TABLE zmem_hub.record
    ADD COLUMN xid             xid8,
    ADD COLUMN retired_by      name,
    ADD COLUMN retired_machine text,
    ADD COLUMN retired_at      timestamptz;

-- user:global was one namespace for the whole team: each member's rows move to that member's
-- personal namespace, which no grant exposes to anyone else.
UPDATE zmem_hub.record SET namespace = 'personal:' || written_by WHERE namespace = 'user:global';
DELETE FROM zmem_hub.access WHERE namespace = 'user:global' OR namespace LIKE 'personal:%';

-- A project namespace named after a git remote is lower-cased (ASCII only, as the clients now
-- derive it): `git@github.com:Acme/WebApp.git` and `https://github.com/acme/webapp` are one.
CREATE FUNCTION zmem_hub.fold_case(ns text) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN ns ~ '^project:[^/]*[.][^/]*/'
                THEN translate(ns, 'ABCDEFGHIJKLMNOPQRSTUVWXYZ', 'abcdefghijklmnopqrstuvwxyz')
                ELSE ns END
$$;
UPDATE zmem_hub.record
   SET body = CASE WHEN jsonb_typeof(body) = 'object' AND body->>'namespace' = namespace
                   THEN jsonb_set(body, '{namespace}', to_jsonb(zmem_hub.fold_case(namespace)))
                   ELSE body END,
       namespace = zmem_hub.fold_case(namespace)
 WHERE namespace <> zmem_hub.fold_case(namespace);
INSERT INTO zmem_hub.access (role, namespace, can_write)
SELECT role, zmem_hub.fold_case(namespace), bool_or(can_write) FROM zmem_hub.access
 WHERE namespace <> zmem_hub.fold_case(namespace) GROUP BY 1, 2
ON CONFLICT (role, namespace) DO UPDATE SET can_write = zmem_hub.access.can_write OR excluded.can_write;
DELETE FROM zmem_hub.access WHERE namespace <> zmem_hub.fold_case(namespace);

-- Fresh sequence numbers in the old order (a member could choose any before: one near 2^63
-- froze every cursor), all rows stamped with this transaction's id.
DROP INDEX zmem_hub.record_seq;
UPDATE zmem_hub.record r SET seq = o.n, xid = pg_current_xact_id()
  FROM (SELECT kind, key, row_number() OVER (ORDER BY seq, kind, key) AS n
          FROM zmem_hub.record) o
 WHERE r.kind = o.kind AND r.key = o.key;
SELECT setval('zmem_hub.change_seq', (SELECT coalesce(max(seq), 0) + 1 FROM zmem_hub.record), false);
ALTER TABLE zmem_hub.record ALTER COLUMN xid SET NOT NULL;
CREATE UNIQUE INDEX record_seq ON zmem_hub.record (seq);
CREATE INDEX record_xid ON zmem_hub.record (xid);

-- What the body must agree with. NOT VALID: rows from before keep their place, and every puller
-- quarantines the ones that fail its own checks.
ALTER TABLE zmem_hub.record ADD CONSTRAINT record_body_is_object
    CHECK (jsonb_typeof(body) = 'object') NOT VALID;
ALTER TABLE zmem_hub.record ADD CONSTRAINT record_body_matches_key CHECK (coalesce(
    CASE kind
        WHEN 'memory' THEN body->>'id' = key AND body->>'namespace' =
            CASE WHEN namespace LIKE 'personal:%' THEN 'user:global' ELSE namespace END
        WHEN 'episode' THEN body->>'id' = key AND body->>'namespace' =
            CASE WHEN namespace LIKE 'personal:%' THEN 'user:global' ELSE namespace END
        WHEN 'link' THEN
            key = (body->>'src') || '>' || (body->>'dst') || '>' || (body->>'relation')
        WHEN 'episode_memory' THEN key = (body->>'episode_id') || '/' || (body->>'memory_id')
    END, false)) NOT VALID;

-- The sequence and transaction id of every change, and an object's identity, namespace, author
-- and first content, are the hub's, whoever writes (the admin's purge included).
CREATE FUNCTION zmem_hub.stamp() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    NEW.seq := nextval('zmem_hub.change_seq');
    NEW.xid := pg_current_xact_id();
    IF TG_OP = 'INSERT' THEN
        NEW.written_at := now();
        RETURN NEW;
    END IF;
    IF NEW.kind IS DISTINCT FROM OLD.kind OR NEW.key IS DISTINCT FROM OLD.key
       OR NEW.namespace IS DISTINCT FROM OLD.namespace
       OR NEW.written_by IS DISTINCT FROM OLD.written_by
       OR NEW.written_at IS DISTINCT FROM OLD.written_at
       OR NEW.machine IS DISTINCT FROM OLD.machine THEN
        RAISE EXCEPTION 'an object''s identity, namespace and author never change'
            USING ERRCODE = '42501';
    END IF;
    IF OLD.kind = 'memory' AND jsonb_typeof(OLD.body) = 'object' AND
       (NEW.body - '{superseded_at,valid_until,supersede_reason}'::text[])
       IS DISTINCT FROM (OLD.body - '{superseded_at,valid_until,supersede_reason}'::text[]) THEN
        RAISE EXCEPTION 'a memory''s content never changes: only its retirement is added'
            USING ERRCODE = '42501';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER record_stamp BEFORE INSERT OR UPDATE ON zmem_hub.record
    FOR EACH ROW EXECUTE FUNCTION zmem_hub.stamp();

-- Reads: a member's personal namespace, and what zmem_hub.access grants the login.
DROP POLICY member_reads ON zmem_hub.record;
DROP POLICY member_inserts ON zmem_hub.record;
DROP POLICY member_updates ON zmem_hub.record;
CREATE POLICY member_reads ON zmem_hub.record FOR SELECT USING (
    namespace = 'personal:' || session_user
    OR EXISTS (SELECT 1 FROM zmem_hub.access a
               WHERE a.role = session_user AND a.namespace = record.namespace)
);
DROP POLICY member_sees_own_access ON zmem_hub.access;
CREATE POLICY member_sees_own_access ON zmem_hub.access FOR SELECT USING (role = session_user);

-- The one way a member writes: a batch of {kind, key, namespace, body} objects from one machine.
-- Returns one outcome per object, in order: new, retired, closed, unchanged, busy (another
-- session holds the object: pushed again next sync), or "refused: why". A namespace the login
-- may not write raises insufficient_privilege (the whole batch is refused).
CREATE FUNCTION zmem_hub.push(objects jsonb, from_machine text)
RETURNS TABLE (ord bigint, outcome text)
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET lock_timeout = '2s'
AS $$
DECLARE
    me constant name := session_user;
    item record;
    obj jsonb;
    pushed jsonb;
    k text;
    kk text;
    lns text;
    ns text;
    writable text[];
    held zmem_hub.record%ROWTYPE;
BEGIN
    IF jsonb_typeof(objects) IS DISTINCT FROM 'array' OR jsonb_array_length(objects) > 5000 THEN
        RAISE EXCEPTION 'zmem_hub.push takes a JSON array of at most 5000 objects'
            USING ERRCODE = '22023';
    END IF;
    IF from_machine IS NULL OR length(from_machine) NOT BETWEEN 1 AND 200 THEN
        RAISE EXCEPTION 'zmem_hub.push needs the machine (1 to 200 characters)'
            USING ERRCODE = '22023';
    END IF;
    SELECT coalesce(array_agg(a.namespace), '{}') INTO writable
      FROM zmem_hub.access a WHERE a.role = me AND a.can_write;
    FOR item IN SELECT t.value AS v, t.ordinality AS n
                  FROM jsonb_array_elements(objects) WITH ORDINALITY AS t LOOP
        ord := item.n;
        obj := item.v;
        IF jsonb_typeof(obj) IS DISTINCT FROM 'object'
           OR jsonb_typeof(obj->'body') IS DISTINCT FROM 'object' THEN
            outcome := 'refused: not an object with an object body'; RETURN NEXT; CONTINUE;
        END IF;
        pushed := obj->'body';
        k := obj->>'kind';
        kk := obj->>'key';
        lns := obj->>'namespace';
        IF k IS NULL OR k NOT IN ('memory', 'link', 'episode', 'episode_memory') THEN
            outcome := 'refused: unknown kind'; RETURN NEXT; CONTINUE;
        END IF;
        IF kk IS NULL OR length(kk) NOT BETWEEN 1 AND 400 OR lns IS NULL
           OR length(lns) NOT BETWEEN 1 AND 200 THEN
            outcome := 'refused: the key or namespace is missing or too long'; RETURN NEXT; CONTINUE;
        END IF;
        IF octet_length(pushed::text) > 400000 THEN
            outcome := 'refused: the body is over 400 kB'; RETURN NEXT; CONTINUE;
        END IF;
        IF lns LIKE 'personal:%' THEN
            outcome := 'refused: personal namespaces are written as user:global'; RETURN NEXT; CONTINUE;
        END IF;
        ns := CASE WHEN lns = 'user:global' THEN 'personal:' || me ELSE lns END;
        IF ns <> 'personal:' || me AND NOT ns = ANY (writable) THEN
            RAISE EXCEPTION 'role % may not write the namespace %', me, lns
                USING ERRCODE = '42501';
        END IF;
        IF NOT coalesce(CASE k
                WHEN 'memory' THEN pushed->>'id' = kk AND pushed->>'namespace' = lns
                WHEN 'episode' THEN pushed->>'id' = kk AND pushed->>'namespace' = lns
                WHEN 'link' THEN
                    kk = (pushed->>'src') || '>' || (pushed->>'dst') || '>' || (pushed->>'relation')
                WHEN 'episode_memory' THEN kk = (pushed->>'episode_id') || '/' || (pushed->>'memory_id')
            END, false) THEN
            outcome := 'refused: the body does not match its key and namespace'; RETURN NEXT; CONTINUE;
        END IF;
        SELECT * INTO held FROM zmem_hub.record r WHERE r.kind = k AND r.key = kk
           FOR UPDATE SKIP LOCKED;
        IF NOT FOUND THEN
            PERFORM 1 FROM zmem_hub.record r WHERE r.kind = k AND r.key = kk;
            IF FOUND THEN
                outcome := 'busy'; RETURN NEXT; CONTINUE;
            END IF;
            INSERT INTO zmem_hub.record (kind, key, namespace, seq, body, written_by, machine)
            VALUES (k, kk, ns, 0, pushed, me, from_machine)
            ON CONFLICT (kind, key) DO NOTHING;
            IF FOUND THEN
                outcome := 'new'; RETURN NEXT; CONTINUE;
            END IF;
            SELECT * INTO held FROM zmem_hub.record r WHERE r.kind = k AND r.key = kk
               FOR UPDATE SKIP LOCKED;
            IF NOT FOUND THEN
                outcome := 'busy'; RETURN NEXT; CONTINUE;
            END IF;
        END IF;
        IF held.namespace <> ns THEN
            outcome := 'refused: the hub holds this object in another namespace';
        ELSIF k = 'memory' AND jsonb_typeof(held.body) = 'object'
              AND held.body->>'superseded_at' IS NULL AND pushed->>'superseded_at' IS NOT NULL THEN
            UPDATE zmem_hub.record r SET
                body = held.body || jsonb_build_object(
                    'superseded_at', pushed->'superseded_at',
                    'valid_until', coalesce(pushed->'valid_until', 'null'::jsonb),
                    'supersede_reason', coalesce(pushed->'supersede_reason', 'null'::jsonb)),
                retired_by = me, retired_machine = from_machine, retired_at = now()
             WHERE r.kind = k AND r.key = kk;
            outcome := 'retired';
        ELSIF k = 'episode' AND jsonb_typeof(held.body) = 'object'
              AND held.body->>'ended_at' IS NULL AND pushed->>'ended_at' IS NOT NULL THEN
            UPDATE zmem_hub.record r SET
                body = held.body || jsonb_build_object(
                    'ended_at', pushed->'ended_at',
                    'token_count', coalesce(pushed->'token_count', 'null'::jsonb),
                    'summary_memory_id', coalesce(pushed->'summary_memory_id', 'null'::jsonb)),
                retired_by = me, retired_machine = from_machine, retired_at = now()
             WHERE r.kind = k AND r.key = kk;
            outcome := 'closed';
        ELSE
            outcome := 'unchanged';
        END IF;
        RETURN NEXT;
    END LOOP;
END $$;
REVOKE ALL ON FUNCTION zmem_hub.push(jsonb, text) FROM PUBLIC;
