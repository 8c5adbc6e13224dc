-- The baseline's insert as a transaction of its own (no BEGIN and COMMIT round trips).
\set c :client_id
INSERT INTO plain_notes VALUES (gen_random_uuid()::text, 'user-' || :c, 'list-' || :c, 'bench', false, 0, '\x0000', NULL);
