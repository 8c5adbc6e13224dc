-- The push benchmark's baseline: BEGIN; INSERT; COMMIT of one row of the notes' shape.
\set c :client_id
BEGIN;
INSERT INTO plain_notes VALUES (gen_random_uuid()::text, 'user-' || :c, 'list-' || :c, 'bench', false, 0, '\x0000', NULL);
COMMIT;
