-- v15: each entity link carries its row's valid_from, indexed per entity, so the entity lane
-- reads an entity's newest rows a window at a time instead of joining every link it has
-- (issue 51: a name shared by thousands of rows cost O(links) on every prompt naming it).
ALTER TABLE memory_entity ADD COLUMN valid_from TEXT;
UPDATE memory_entity SET valid_from = (
    SELECT m.valid_from FROM memory AS m WHERE m.id = memory_entity.memory_id
);
-- (entity_id, valid_from, memory_id): serves every lookup by entity the old index served.
DROP INDEX memory_entity_entity;
CREATE INDEX memory_entity_recent ON memory_entity (entity_id, valid_from);
-- The copy follows the row: nothing in this client moves a row's valid_from, but a repair or
-- a test that does must not leave the entity lane reading a stale date.
CREATE TRIGGER memory_entity_valid_from AFTER UPDATE OF valid_from ON memory BEGIN
    UPDATE memory_entity SET valid_from = new.valid_from WHERE memory_id = new.id;
END;
-- A link written without its date (a v14 client let in by ZMEM_ALLOW_NEWER_SCHEMA) would sort
-- last and drop out of the lane's window: it takes its row's date as it lands. (A later
-- migration that rebuilds memory by copy and rename must re-create both triggers.)
CREATE TRIGGER memory_entity_dated AFTER INSERT ON memory_entity WHEN new.valid_from IS NULL
BEGIN
    UPDATE memory_entity SET valid_from = (
        SELECT m.valid_from FROM memory AS m WHERE m.id = new.memory_id
    ) WHERE memory_id = new.memory_id AND entity_id = new.entity_id;
END;
