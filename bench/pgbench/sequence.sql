-- The client's sequence advanced alone.
\set c :client_id
UPDATE _engine_clients SET last_mutation_id = last_mutation_id + 1, last_xid = pg_current_xact_id(), updated_at = CASE WHEN updated_at < now() - interval '1 minute' THEN now() ELSE updated_at END WHERE user_id = 'user-' || :c;
