-- The mutation's record alone.
\set c :client_id
INSERT INTO _engine_mutations (user_id, client_id, mutation_id, client_mutation_id, name, status, result) VALUES ('user-' || :c, gen_random_uuid(), 1, gen_random_uuid(), 'add_note', 'applied', '{"serverId": "01a21889-0b5c-7f94-8325-5314837b7287", "superseded": false, "reconciliation": {"": "01a21889-0b5c-7f94-8325-5314837b7287"}}');
