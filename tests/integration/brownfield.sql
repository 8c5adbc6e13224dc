-- A brownfield schema for `engine introspect`: a task tracker built without the engine, with rows.
-- Organisations have members with roles; projects, tasks, comments and the rest carry `org_id`.

CREATE TYPE invoice_status AS ENUM ('draft', 'sent', 'paid');

CREATE TABLE organisations (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  name text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE members (
  id bigserial PRIMARY KEY,
  org_id uuid NOT NULL REFERENCES organisations (id),
  user_id text NOT NULL,
  role text NOT NULL DEFAULT 'member' CHECK (role IN ('owner', 'admin', 'member')),
  UNIQUE (org_id, user_id)
);

CREATE TABLE projects (
  id bigint PRIMARY KEY,
  org_id uuid NOT NULL REFERENCES organisations (id),
  owner_id text NOT NULL,
  name varchar(80) NOT NULL,
  archived boolean NOT NULL DEFAULT false,
  deleted_at timestamptz
);

CREATE TABLE tasks (
  id uuid PRIMARY KEY,
  org_id uuid NOT NULL REFERENCES organisations (id),
  project_id bigint NOT NULL REFERENCES projects (id),
  title text NOT NULL,
  type text NOT NULL DEFAULT 'task',
  assignee_id text,
  priority smallint NOT NULL DEFAULT 0,
  points integer,
  estimate double precision,
  details jsonb,
  due_at timestamptz
);

CREATE TABLE comments (
  id bigint PRIMARY KEY,
  org_id uuid NOT NULL REFERENCES organisations (id),
  task_id uuid NOT NULL REFERENCES tasks (id),
  author_id text NOT NULL,
  body text NOT NULL,
  attachment bytea,
  "postedAt" timestamptz NOT NULL DEFAULT now()
);

-- A composite key: who watches which task.
CREATE TABLE task_watchers (
  task_id uuid NOT NULL REFERENCES tasks (id),
  user_id text NOT NULL,
  org_id uuid NOT NULL REFERENCES organisations (id),
  since timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (task_id, user_id)
);

-- A timestamp key.
CREATE TABLE activity (
  at timestamptz PRIMARY KEY,
  org_id uuid NOT NULL REFERENCES organisations (id),
  actor_id text NOT NULL,
  what text NOT NULL
);

-- Types the engine does not carry.
CREATE TABLE invoices (
  id bigint PRIMARY KEY,
  org_id uuid NOT NULL REFERENCES organisations (id),
  number integer NOT NULL,
  -- Required, with a default: a required column the app cannot declare and that has no
  -- default would make the app's inserts fail, and provisioning refuses it as drift.
  amount numeric(12, 2) NOT NULL DEFAULT 0,
  issued_on date,
  status invoice_status NOT NULL DEFAULT 'draft',
  tags text[],
  total_cents bigint GENERATED ALWAYS AS ((amount * 100)::bigint) STORED,
  seq integer GENERATED ALWAYS AS IDENTITY
);

-- Nothing scopes it to a user.
CREATE TABLE feature_flags (
  name text PRIMARY KEY,
  enabled boolean NOT NULL,
  crate text -- the package a flag belongs to; not a name a Rust field can have
);

-- No primary key.
CREATE TABLE import_log (
  line text,
  at timestamp
);

INSERT INTO organisations (id, name) VALUES
  ('00000000-0000-4000-8000-00000000000a', 'Acme'),
  ('00000000-0000-4000-8000-00000000000b', 'Globex');

INSERT INTO members (org_id, user_id, role) VALUES
  ('00000000-0000-4000-8000-00000000000a', 'alice', 'owner'),
  ('00000000-0000-4000-8000-00000000000a', 'dave', 'member'),
  ('00000000-0000-4000-8000-00000000000b', 'bob', 'owner'),
  ('00000000-0000-4000-8000-00000000000b', 'erin', 'admin');

INSERT INTO projects (id, org_id, owner_id, name, archived, deleted_at) VALUES
  (1, '00000000-0000-4000-8000-00000000000a', 'alice', 'Launch', false, NULL),
  (2, '00000000-0000-4000-8000-00000000000a', 'dave', 'Website', true, NULL),
  (3, '00000000-0000-4000-8000-00000000000a', 'alice', 'Abandoned', false, '2024-01-02T03:04:05Z'),
  (4, '00000000-0000-4000-8000-00000000000b', 'bob', 'Merger', false, NULL);

INSERT INTO tasks (id, org_id, project_id, title, type, assignee_id, priority, points, estimate, details, due_at) VALUES
  ('10000000-0000-4000-8000-000000000001', '00000000-0000-4000-8000-00000000000a', 1, 'Write the plan', 'task', 'alice', 2, 3, 1.5, '{"tags": ["plan"]}', '2025-06-01T09:00:00Z'),
  ('10000000-0000-4000-8000-000000000002', '00000000-0000-4000-8000-00000000000a', 1, 'Book the venue', 'chore', 'dave', 0, NULL, NULL, NULL, NULL),
  ('10000000-0000-4000-8000-000000000003', '00000000-0000-4000-8000-00000000000a', 2, 'New logo', 'task', NULL, 1, 5, 8.25, '{}', NULL),
  ('10000000-0000-4000-8000-000000000004', '00000000-0000-4000-8000-00000000000b', 4, 'Due diligence', 'task', 'erin', 3, 13, 40, '{"secret": true}', '2025-07-01T00:00:00Z');

INSERT INTO comments (id, org_id, task_id, author_id, body, attachment) VALUES
  (1, '00000000-0000-4000-8000-00000000000a', '10000000-0000-4000-8000-000000000001', 'dave', 'Looks good', NULL),
  (2, '00000000-0000-4000-8000-00000000000a', '10000000-0000-4000-8000-000000000002', 'alice', 'Booked', '\x89504e47'),
  (3, '00000000-0000-4000-8000-00000000000b', '10000000-0000-4000-8000-000000000004', 'bob', 'Confidential', NULL);

INSERT INTO task_watchers (task_id, user_id, org_id) VALUES
  ('10000000-0000-4000-8000-000000000001', 'dave', '00000000-0000-4000-8000-00000000000a'),
  ('10000000-0000-4000-8000-000000000003', 'alice', '00000000-0000-4000-8000-00000000000a'),
  ('10000000-0000-4000-8000-000000000004', 'erin', '00000000-0000-4000-8000-00000000000b');

INSERT INTO activity (at, org_id, actor_id, what) VALUES
  ('2025-01-01T10:00:00.123456Z', '00000000-0000-4000-8000-00000000000a', 'alice', 'created Launch'),
  ('2025-01-01T10:00:01Z', '00000000-0000-4000-8000-00000000000b', 'bob', 'created Merger'),
  ('2025-01-02T08:30:00Z', '00000000-0000-4000-8000-00000000000a', 'dave', 'created Website');

INSERT INTO invoices (id, org_id, number, amount, issued_on, status, tags) VALUES
  (1, '00000000-0000-4000-8000-00000000000a', 1001, 1250.50, '2025-02-01', 'sent', '{q1}'),
  (2, '00000000-0000-4000-8000-00000000000b', 7, 99.99, NULL, 'draft', NULL);

INSERT INTO feature_flags (name, enabled, crate) VALUES ('dark_mode', true, 'web');
INSERT INTO import_log (line, at) VALUES ('legacy row', '2020-01-01 00:00:00');
