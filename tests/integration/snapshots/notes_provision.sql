CREATE TABLE IF NOT EXISTS _engine_meta (
  key text PRIMARY KEY,
  value text NOT NULL
);

CREATE TABLE IF NOT EXISTS _engine_plans (
  generation bigserial PRIMARY KEY,
  fingerprint text NOT NULL UNIQUE,
  provisioned_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE IF NOT EXISTS _engine_tombstones (
  id bigserial PRIMARY KEY,
  xid xid8 NOT NULL DEFAULT pg_current_xact_id(),
  table_name text NOT NULL,
  key jsonb NOT NULL,
  buckets text[] NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX IF NOT EXISTS _engine_tombstones_xid ON _engine_tombstones (xid, id);

CREATE INDEX IF NOT EXISTS _engine_tombstones_created ON _engine_tombstones (created_at);

CREATE TABLE IF NOT EXISTS _engine_clients (
  user_id text NOT NULL,
  client_id uuid NOT NULL,
  last_mutation_id bigint NOT NULL DEFAULT 0,
  last_xid xid8 NOT NULL DEFAULT '0',
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (user_id, client_id)
);

CREATE TABLE IF NOT EXISTS _engine_mutations (
  user_id text NOT NULL,
  client_id uuid NOT NULL,
  mutation_id bigint NOT NULL,
  client_mutation_id uuid NOT NULL,
  name text NOT NULL,
  status text NOT NULL,
  result jsonb NOT NULL,
  xid xid8 NOT NULL DEFAULT pg_current_xact_id(),
  applied_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (user_id, client_id, mutation_id)
);

ALTER TABLE _engine_clients ADD COLUMN IF NOT EXISTS last_xid xid8 NOT NULL DEFAULT '0';

ALTER TABLE _engine_mutations ADD COLUMN IF NOT EXISTS xid xid8 NOT NULL DEFAULT pg_current_xact_id();

ALTER TABLE _engine_clients ADD COLUMN IF NOT EXISTS recorded_at timestamptz NOT NULL DEFAULT '-infinity';

ALTER TABLE _engine_clients ADD COLUMN IF NOT EXISTS collected_to bigint;

ALTER TABLE _engine_clients ALTER COLUMN collected_to SET DEFAULT 0;

CREATE UNIQUE INDEX IF NOT EXISTS _engine_mutations_client_mutation ON _engine_mutations (user_id, client_id, client_mutation_id);

CREATE INDEX IF NOT EXISTS _engine_mutations_applied ON _engine_mutations (applied_at);

CREATE INDEX IF NOT EXISTS _engine_clients_updated ON _engine_clients (updated_at);

CREATE TABLE IF NOT EXISTS _engine_bucket_sets (
  digest text PRIMARY KEY,
  buckets text[] NOT NULL,
  used_at timestamptz NOT NULL DEFAULT now(),
  user_id text,
  bytes integer NOT NULL DEFAULT 0
);

CREATE INDEX IF NOT EXISTS _engine_bucket_sets_used ON _engine_bucket_sets (used_at);

ALTER TABLE _engine_bucket_sets ADD COLUMN IF NOT EXISTS user_id text;

ALTER TABLE _engine_bucket_sets ADD COLUMN IF NOT EXISTS bytes integer NOT NULL DEFAULT 0;

CREATE INDEX IF NOT EXISTS _engine_bucket_sets_user ON _engine_bucket_sets (user_id, used_at);

CREATE OR REPLACE FUNCTION _engine_sequence_moved(client uuid, expected bigint) RETURNS text
LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'the sequence of client % is not at %', client, expected USING ERRCODE = 'EN409';
END
$$;

CREATE OR REPLACE FUNCTION _engine_unconfirmed() RETURNS text
LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'a write permission the mutation assumed does not hold' USING ERRCODE = 'EN403';
END
$$;

CREATE OR REPLACE FUNCTION _engine_percent_encode(value text) RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
DECLARE
  bytes bytea;
  encoded text := '';
  b integer;
BEGIN
  IF value ~ '^[A-Za-z0-9._~-]*$' THEN
    RETURN value;
  END IF;
  bytes := convert_to(value, 'UTF8');
  FOR i IN 0 .. octet_length(bytes) - 1 LOOP
    b := get_byte(bytes, i);
    IF b BETWEEN 48 AND 57 OR b BETWEEN 65 AND 90 OR b BETWEEN 97 AND 122 OR b IN (45, 46, 95, 126) THEN
      encoded := encoded || chr(b);
    ELSE
      encoded := encoded || '%' || upper(lpad(to_hex(b), 2, '0'));
    END IF;
  END LOOP;
  RETURN encoded;
END
$$;

CREATE TABLE IF NOT EXISTS _engine_jobs (
  id bigserial PRIMARY KEY,
  name text NOT NULL,
  payload jsonb NOT NULL,
  state text NOT NULL DEFAULT 'queued',
  run_at timestamptz NOT NULL DEFAULT now(),
  attempts integer NOT NULL DEFAULT 0,
  leased_until timestamptz,
  last_error text,
  user_id text,
  created_at timestamptz NOT NULL DEFAULT now(),
  finished_at timestamptz
);

CREATE INDEX IF NOT EXISTS _engine_jobs_due ON _engine_jobs (name, run_at, id) WHERE state = 'queued';

CREATE INDEX IF NOT EXISTS _engine_jobs_leased ON _engine_jobs (leased_until) WHERE state = 'running';

CREATE INDEX IF NOT EXISTS _engine_jobs_finished ON _engine_jobs (finished_at) WHERE finished_at IS NOT NULL;

CREATE OR REPLACE FUNCTION _engine_jobs_notify() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('_engine_jobs', '');
  RETURN NULL;
END
$$;

CREATE OR REPLACE TRIGGER _engine_jobs_notify AFTER INSERT ON _engine_jobs FOR EACH STATEMENT EXECUTE FUNCTION _engine_jobs_notify();

CREATE OR REPLACE FUNCTION _engine_bucket_key(rule text, params text[]) RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
DECLARE
  key text := rule;
  p text;
BEGIN
  FOREACH p IN ARRAY params LOOP
    IF p IS NOT NULL THEN
      key := key || '/' || _engine_percent_encode(p);
    END IF;
  END LOOP;
  RETURN key;
END
$$;

CREATE TABLE IF NOT EXISTS "list_members" (
  "list_id" text NOT NULL,
  "user_id" text NOT NULL,
  "owner_id" text NOT NULL,
  "role" text NOT NULL,
  "accepted" bool NOT NULL,
  "invited_by" text NOT NULL,
  "title" text NOT NULL,
  PRIMARY KEY ("list_id", "user_id")
);

ALTER TABLE "list_members" ADD COLUMN IF NOT EXISTS "list_id" text NOT NULL;

ALTER TABLE "list_members" ADD COLUMN IF NOT EXISTS "user_id" text NOT NULL;

ALTER TABLE "list_members" ADD COLUMN IF NOT EXISTS "owner_id" text NOT NULL;

ALTER TABLE "list_members" ADD COLUMN IF NOT EXISTS "role" text NOT NULL;

ALTER TABLE "list_members" ADD COLUMN IF NOT EXISTS "accepted" bool NOT NULL;

ALTER TABLE "list_members" ADD COLUMN IF NOT EXISTS "invited_by" text NOT NULL;

ALTER TABLE "list_members" ADD COLUMN IF NOT EXISTS "title" text NOT NULL;

ALTER TABLE "list_members" ADD COLUMN IF NOT EXISTS _engine_xid xid8 NOT NULL DEFAULT pg_current_xact_id();

CREATE OR REPLACE FUNCTION "_engine_track_list_members"() RETURNS trigger LANGUAGE plpgsql AS $body$
DECLARE
  old_keys text[] := '{}';
  new_keys text[] := '{}';
  left_keys text[];
BEGIN
  IF TG_WHEN = 'BEFORE' THEN
    NEW._engine_xid := pg_current_xact_id();
    RETURN NEW;
  END IF;
  IF true THEN
    old_keys := array_remove(ARRAY[
      CASE WHEN OLD."user_id" IS NOT NULL AND OLD."accepted" = false THEN _engine_bucket_key('invitations', ARRAY[OLD."user_id"::text]) END,
      CASE WHEN OLD."user_id" IS NOT NULL AND OLD."accepted" = true THEN _engine_bucket_key('memberships', ARRAY[OLD."user_id"::text]) END,
      CASE WHEN OLD."owner_id" IS NOT NULL THEN _engine_bucket_key('own', ARRAY[OLD."owner_id"::text]) END,
      CASE WHEN OLD."list_id" IS NOT NULL THEN _engine_bucket_key('shared', ARRAY[OLD."list_id"::text]) END
    ]::text[], NULL);
  END IF;
  IF TG_OP = 'UPDATE' AND true AND OLD."list_id" IS NOT DISTINCT FROM NEW."list_id" AND OLD."user_id" IS NOT DISTINCT FROM NEW."user_id" THEN
    new_keys := array_remove(ARRAY[
      CASE WHEN NEW."user_id" IS NOT NULL AND NEW."accepted" = false THEN _engine_bucket_key('invitations', ARRAY[NEW."user_id"::text]) END,
      CASE WHEN NEW."user_id" IS NOT NULL AND NEW."accepted" = true THEN _engine_bucket_key('memberships', ARRAY[NEW."user_id"::text]) END,
      CASE WHEN NEW."owner_id" IS NOT NULL THEN _engine_bucket_key('own', ARRAY[NEW."owner_id"::text]) END,
      CASE WHEN NEW."list_id" IS NOT NULL THEN _engine_bucket_key('shared', ARRAY[NEW."list_id"::text]) END
    ]::text[], NULL);
  END IF;
  SELECT coalesce(array_agg(DISTINCT k ORDER BY k), '{}') INTO left_keys FROM unnest(old_keys) AS k WHERE NOT k = ANY(new_keys);
  IF cardinality(left_keys) > 0 THEN
    INSERT INTO _engine_tombstones (table_name, key, buckets) VALUES ('list_members', jsonb_build_object('list_id', OLD."list_id", 'user_id', OLD."user_id"), left_keys);
  END IF;
  RETURN NULL;
END
$body$;

CREATE OR REPLACE TRIGGER _engine_stamp BEFORE INSERT OR UPDATE ON "list_members" FOR EACH ROW WHEN (NEW._engine_xid IS DISTINCT FROM pg_current_xact_id()) EXECUTE FUNCTION "_engine_track_list_members"();

CREATE OR REPLACE TRIGGER _engine_tombstone AFTER UPDATE OR DELETE ON "list_members" FOR EACH ROW EXECUTE FUNCTION "_engine_track_list_members"();

CREATE INDEX IF NOT EXISTS "_engine_list_members_xid" ON "list_members" (_engine_xid, "list_id" COLLATE "C", "user_id" COLLATE "C");

CREATE INDEX IF NOT EXISTS "_engine_list_members_scope_user_id" ON "list_members" ("user_id", _engine_xid, "list_id" COLLATE "C", "user_id" COLLATE "C");

CREATE INDEX IF NOT EXISTS "_engine_list_members_scope_owner_id" ON "list_members" ("owner_id", _engine_xid, "list_id" COLLATE "C", "user_id" COLLATE "C");

CREATE INDEX IF NOT EXISTS "_engine_list_members_scope_list_id" ON "list_members" ("list_id", _engine_xid, "list_id" COLLATE "C", "user_id" COLLATE "C");

CREATE TABLE IF NOT EXISTS "lists" (
  "id" text NOT NULL,
  "owner_id" text NOT NULL,
  "title" text NOT NULL,
  "archived" bool NOT NULL,
  PRIMARY KEY ("id")
);

ALTER TABLE "lists" ADD COLUMN IF NOT EXISTS "id" text NOT NULL;

ALTER TABLE "lists" ADD COLUMN IF NOT EXISTS "owner_id" text NOT NULL;

ALTER TABLE "lists" ADD COLUMN IF NOT EXISTS "title" text NOT NULL;

ALTER TABLE "lists" ADD COLUMN IF NOT EXISTS "archived" bool NOT NULL;

ALTER TABLE "lists" ADD COLUMN IF NOT EXISTS _engine_xid xid8 NOT NULL DEFAULT pg_current_xact_id();

CREATE OR REPLACE FUNCTION "_engine_track_lists"() RETURNS trigger LANGUAGE plpgsql AS $body$
DECLARE
  old_keys text[] := '{}';
  new_keys text[] := '{}';
  left_keys text[];
BEGIN
  IF TG_WHEN = 'BEFORE' THEN
    NEW._engine_xid := pg_current_xact_id();
    RETURN NEW;
  END IF;
  IF true THEN
    old_keys := array_remove(ARRAY[
      CASE WHEN OLD."owner_id" IS NOT NULL THEN _engine_bucket_key('own', ARRAY[OLD."owner_id"::text]) END,
      CASE WHEN OLD."id" IS NOT NULL THEN _engine_bucket_key('shared', ARRAY[OLD."id"::text]) END
    ]::text[], NULL);
  END IF;
  IF TG_OP = 'UPDATE' AND true AND OLD."id" IS NOT DISTINCT FROM NEW."id" THEN
    new_keys := array_remove(ARRAY[
      CASE WHEN NEW."owner_id" IS NOT NULL THEN _engine_bucket_key('own', ARRAY[NEW."owner_id"::text]) END,
      CASE WHEN NEW."id" IS NOT NULL THEN _engine_bucket_key('shared', ARRAY[NEW."id"::text]) END
    ]::text[], NULL);
  END IF;
  SELECT coalesce(array_agg(DISTINCT k ORDER BY k), '{}') INTO left_keys FROM unnest(old_keys) AS k WHERE NOT k = ANY(new_keys);
  IF cardinality(left_keys) > 0 THEN
    INSERT INTO _engine_tombstones (table_name, key, buckets) VALUES ('lists', jsonb_build_object('id', OLD."id"), left_keys);
  END IF;
  RETURN NULL;
END
$body$;

CREATE OR REPLACE TRIGGER _engine_stamp BEFORE INSERT OR UPDATE ON "lists" FOR EACH ROW WHEN (NEW._engine_xid IS DISTINCT FROM pg_current_xact_id()) EXECUTE FUNCTION "_engine_track_lists"();

CREATE OR REPLACE TRIGGER _engine_tombstone AFTER UPDATE OR DELETE ON "lists" FOR EACH ROW EXECUTE FUNCTION "_engine_track_lists"();

CREATE INDEX IF NOT EXISTS "_engine_lists_xid" ON "lists" (_engine_xid, "id" COLLATE "C");

CREATE INDEX IF NOT EXISTS "_engine_lists_scope_owner_id" ON "lists" ("owner_id", _engine_xid, "id" COLLATE "C");

CREATE INDEX IF NOT EXISTS "_engine_lists_scope_id" ON "lists" ("id", _engine_xid, "id" COLLATE "C");

CREATE TABLE IF NOT EXISTS "notes" (
  "id" text NOT NULL,
  "owner_id" text NOT NULL,
  "list_id" text NOT NULL,
  "title" text NOT NULL,
  "done" bool NOT NULL,
  "position" int8 NOT NULL,
  "body" bytea NOT NULL DEFAULT '\x0000'::bytea,
  "image" text,
  "deleted_at" timestamptz,
  PRIMARY KEY ("id")
);

ALTER TABLE "notes" ADD COLUMN IF NOT EXISTS "id" text NOT NULL;

ALTER TABLE "notes" ADD COLUMN IF NOT EXISTS "owner_id" text NOT NULL;

ALTER TABLE "notes" ADD COLUMN IF NOT EXISTS "list_id" text NOT NULL;

ALTER TABLE "notes" ADD COLUMN IF NOT EXISTS "title" text NOT NULL;

ALTER TABLE "notes" ADD COLUMN IF NOT EXISTS "done" bool NOT NULL;

ALTER TABLE "notes" ADD COLUMN IF NOT EXISTS "position" int8 NOT NULL;

ALTER TABLE "notes" ADD COLUMN IF NOT EXISTS "body" bytea NOT NULL DEFAULT '\x0000'::bytea;

ALTER TABLE "notes" ADD COLUMN IF NOT EXISTS "image" text;

ALTER TABLE "notes" ADD COLUMN IF NOT EXISTS "deleted_at" timestamptz;

ALTER TABLE "notes" ADD COLUMN IF NOT EXISTS _engine_xid xid8 NOT NULL DEFAULT pg_current_xact_id();

ALTER TABLE "notes" ADD COLUMN IF NOT EXISTS _engine_hlc jsonb NOT NULL DEFAULT '{}'::jsonb;

CREATE OR REPLACE FUNCTION "_engine_track_notes"() RETURNS trigger LANGUAGE plpgsql AS $body$
DECLARE
  old_keys text[] := '{}';
  new_keys text[] := '{}';
  left_keys text[];
BEGIN
  IF TG_WHEN = 'BEFORE' THEN
    NEW._engine_xid := pg_current_xact_id();
    RETURN NEW;
  END IF;
  IF OLD."deleted_at" IS NULL THEN
    old_keys := array_remove(ARRAY[
      CASE WHEN OLD."list_id" IS NOT NULL THEN _engine_bucket_key('shared', ARRAY[OLD."list_id"::text]) END
    ]::text[], NULL);
  END IF;
  IF TG_OP = 'UPDATE' AND NEW."deleted_at" IS NULL AND OLD."id" IS NOT DISTINCT FROM NEW."id" THEN
    new_keys := array_remove(ARRAY[
      CASE WHEN NEW."list_id" IS NOT NULL THEN _engine_bucket_key('shared', ARRAY[NEW."list_id"::text]) END
    ]::text[], NULL);
  END IF;
  SELECT coalesce(array_agg(DISTINCT k ORDER BY k), '{}') INTO left_keys FROM unnest(old_keys) AS k WHERE NOT k = ANY(new_keys);
  IF cardinality(left_keys) > 0 THEN
    INSERT INTO _engine_tombstones (table_name, key, buckets) VALUES ('notes', jsonb_build_object('id', OLD."id"), left_keys);
  END IF;
  RETURN NULL;
END
$body$;

CREATE OR REPLACE TRIGGER _engine_stamp BEFORE INSERT OR UPDATE ON "notes" FOR EACH ROW WHEN (NEW._engine_xid IS DISTINCT FROM pg_current_xact_id()) EXECUTE FUNCTION "_engine_track_notes"();

CREATE OR REPLACE TRIGGER _engine_tombstone AFTER UPDATE OR DELETE ON "notes" FOR EACH ROW EXECUTE FUNCTION "_engine_track_notes"();

CREATE INDEX IF NOT EXISTS "_engine_notes_xid" ON "notes" (_engine_xid, "id" COLLATE "C");

CREATE INDEX IF NOT EXISTS "_engine_notes_scope_list_id" ON "notes" ("list_id", _engine_xid, "id" COLLATE "C");

CREATE INDEX IF NOT EXISTS "_engine_list_members_member_user_id_accepted" ON "list_members" ("user_id", "accepted");

CREATE TABLE IF NOT EXISTS _engine_blob_refs (
  table_name text NOT NULL,
  row_key jsonb NOT NULL,
  column_name text NOT NULL,
  blob_key text NOT NULL,
  writer text NOT NULL,
  PRIMARY KEY (table_name, row_key, column_name)
);

CREATE INDEX IF NOT EXISTS _engine_blob_refs_key ON _engine_blob_refs (blob_key);

CREATE TABLE IF NOT EXISTS _engine_blobs (
  blob_key text NOT NULL,
  uploader text NOT NULL,
  size bigint NOT NULL,
  stored boolean NOT NULL DEFAULT false,
  ticket text,
  expires_at bigint NOT NULL DEFAULT 0,
  receiving_until bigint,
  unused_since bigint,
  PRIMARY KEY (blob_key, uploader)
);

CREATE INDEX IF NOT EXISTS _engine_blobs_uploader ON _engine_blobs (uploader);

CREATE INDEX IF NOT EXISTS "_engine_notes_blob_image" ON "notes" ("image");

INSERT INTO _engine_meta (key, value) VALUES ('schema_version', '1') ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value WHERE _engine_meta.value IS DISTINCT FROM EXCLUDED.value;

INSERT INTO _engine_meta (key, value) VALUES ('tombstone_horizon', '0') ON CONFLICT (key) DO NOTHING;
