//! Write authorization attacked over real HTTP, with an app built for it: teams whose membership
//! table no rule selects, a task board with an "assigned to me" bucket that accepts tasks from
//! teammates, inboxes that accept messages from their senders' outboxes, and organisations whose
//! membership is raw SQL over a table only server code writes. No write grants a bucket its writer could
//! not read, writes follow the rules' `write(...)`, rows enter another actor's bucket only when
//! its rule accepts them, and a refusal names no bucket key or value the actor did not send.

use std::sync::{Arc, Mutex};

use serde_json::json;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

use crate::support::actors::{applied, count, forbidden, has, pulled, push};
use crate::support::{Backend, TestDb, TestServer, backend, postgres_only};

pub(crate) mod app {
    use engine::{MutatorCtx, Outcome, Result};

    /// A team.
    #[engine::table]
    pub(crate) struct Team {
        #[engine(primary_key)]
        pub id: String,
        pub name: String,
    }

    /// Who is in which team, and as what (`lead`, `member` or `viewer`). No rule selects it.
    #[engine::table]
    pub(crate) struct TeamMember {
        #[engine(primary_key)]
        pub team_id: String,
        #[engine(primary_key)]
        pub user_id: String,
        pub role: String,
    }

    /// A task of a team, assigned to a user.
    #[engine::table]
    pub(crate) struct Task {
        #[engine(primary_key)]
        pub id: String,
        pub team_id: String,
        pub assignee: String,
        pub title: String,
        pub done: bool,
    }

    /// A message from one user to another.
    #[engine::table]
    pub(crate) struct Message {
        #[engine(primary_key)]
        pub id: String,
        pub sender: String,
        pub recipient: String,
        pub body: String,
    }

    /// Who is in which organisation: a raw membership query reads it, and the organisation's
    /// bucket holds it.
    #[engine::table]
    pub(crate) struct OrgMember {
        #[engine(primary_key)]
        pub org: String,
        #[engine(primary_key)]
        pub user_id: String,
    }

    /// What server code notes of a team: no bucket holds it, and no client writes it.
    #[engine::table]
    pub(crate) struct AuditEntry {
        #[engine(primary_key)]
        pub id: String,
        pub team_id: String,
        pub note: String,
    }

    /// A project of an organisation.
    #[engine::table]
    pub(crate) struct Project {
        #[engine(primary_key)]
        pub id: String,
        pub org: String,
        pub title: String,
    }

    /// Rules `$attr` twice from the same words: module `rules` with every bucket of both lists,
    /// and `table_rules` with the first list's only.
    macro_rules! rules_with_and_without {
        (#[$($attr:tt)*] { $($shared:tt)* } { $($extra:tt)* }) => {
            #[$($attr)*]
            pub(crate) mod rules {
                use super::*;
                $($shared)*
                $($extra)*
            }

            #[$($attr)*]
            pub(crate) mod table_rules {
                use super::*;
                $($shared)*
            }
        };
    }

    // Teams, tasks and messages; and organisations held through raw SQL, which only Postgres
    // serves.
    rules_with_and_without! {
        #[engine::sync_rules(server_only(AuditEntry))]
        {
        /// The teams the actor is in, with their tasks; viewers do not write tasks.
        #[bucket(
            name = "team",
            membership(TeamMember::user_id == actor.user_id),
            data(Team::id == bucket.team_id, Task::team_id == bucket.team_id, TeamMember::team_id == bucket.team_id),
            write(
                Task: TeamMember::role == "lead" || TeamMember::role == "member",
                Team: TeamMember::role == "lead",
                TeamMember: TeamMember::role == "lead",
            ),
            leave,
            anchor(Team::id == bucket.team_id),
        )]
        pub(crate) struct TeamBucket {
            #[param(TeamMember::team_id)]
            pub team_id: String,
        }

        /// The tasks assigned to the actor, in any team; a teammate may assign one.
        #[bucket(data(Task::assignee == bucket.user_id), write(Task), accept(TeamBucket))]
        pub(crate) struct Assigned {
            #[param(actor.user_id)]
            pub user_id: String,
        }

        /// The messages the actor sent.
        #[bucket(data(Message::sender == bucket.user_id), write(Message))]
        pub(crate) struct Outbox {
            #[param(actor.user_id)]
            pub user_id: String,
        }

        /// The messages sent to the actor, by anyone from their own outbox.
        #[bucket(data(Message::recipient == bucket.user_id), write(Message), accept(open(Outbox)))]
        pub(crate) struct Inbox {
            #[param(actor.user_id)]
            pub user_id: String,
        }
        }
        {
        /// The organisations the actor is in, with their projects and members.
        #[bucket(
            membership(raw("SELECT org FROM org_members WHERE user_id = $user_id", reads(OrgMember))),
            data(Project::org == bucket.org, OrgMember::org == bucket.org),
            write(Project),
        )]
        pub(crate) struct Org {
            #[param(membership.org)]
            pub org: String,
        }
        }
    }

    #[engine::args]
    pub(crate) struct CreateTeam {
        pub id: String,
        pub name: String,
    }

    /// Create a team led by the actor.
    #[engine::mutator]
    pub(crate) async fn create_team(ctx: &mut MutatorCtx<'_>, args: CreateTeam) -> Result<Outcome> {
        let user_id = ctx.actor().user_id.clone();
        ctx.insert(&Team { id: args.id.clone(), name: args.name }).await?;
        ctx.insert(&TeamMember { team_id: args.id, user_id, role: "lead".into() }).await?;
        Ok(Outcome::new())
    }

    #[engine::args]
    pub(crate) struct TeamId {
        pub team_id: String,
    }

    /// Join a team: as naive as a mutator can be.
    #[engine::mutator]
    pub(crate) async fn join_team(ctx: &mut MutatorCtx<'_>, args: TeamId) -> Result<Outcome> {
        let user_id = ctx.actor().user_id.clone();
        ctx.insert(&TeamMember { team_id: args.team_id, user_id, role: "member".into() }).await?;
        Ok(Outcome::new())
    }

    #[engine::args]
    pub(crate) struct AddMember {
        pub team_id: String,
        pub user_id: String,
        pub role: String,
    }

    /// Put a user into a team, or change their role.
    #[engine::mutator]
    pub(crate) async fn add_member(ctx: &mut MutatorCtx<'_>, args: AddMember) -> Result<Outcome> {
        let key = (args.team_id.clone(), args.user_id.clone());
        if ctx.get::<TeamMember>(&key).await?.is_some() {
            ctx.update::<TeamMember>(&key, [TeamMember::role.set(args.role)]).await?;
        } else {
            ctx.insert(&TeamMember { team_id: args.team_id, user_id: args.user_id, role: args.role }).await?;
        }
        Ok(Outcome::new())
    }

    #[engine::args]
    pub(crate) struct AddTask {
        pub id: String,
        pub team_id: String,
        pub assignee: String,
        pub title: String,
    }

    /// Add a task to a team.
    #[engine::mutator]
    pub(crate) async fn add_task(ctx: &mut MutatorCtx<'_>, args: AddTask) -> Result<Outcome> {
        let task = Task { id: args.id, team_id: args.team_id, assignee: args.assignee, title: args.title, done: false };
        ctx.insert(&task).await?;
        Ok(Outcome::new())
    }

    #[engine::args]
    pub(crate) struct TaskId {
        pub id: String,
    }

    /// Mark a task done.
    #[engine::mutator]
    pub(crate) async fn complete_task(ctx: &mut MutatorCtx<'_>, args: TaskId) -> Result<Outcome> {
        let found = ctx.update::<Task>(&args.id, [Task::done.set(true)]).await?;
        if !found {
            return Err(engine::Error::mutator_failed(format!("no task `{}`", args.id)));
        }
        Ok(Outcome::new())
    }

    #[engine::args]
    pub(crate) struct SendMessage {
        pub id: String,
        /// The sender as the message claims it (a well-behaved client sends its own id).
        pub from: String,
        pub to: String,
        pub body: String,
    }

    /// Send a message, with whatever sender the client claims.
    #[engine::mutator]
    pub(crate) async fn send(ctx: &mut MutatorCtx<'_>, args: SendMessage) -> Result<Outcome> {
        ctx.insert(&Message { id: args.id, sender: args.from, recipient: args.to, body: args.body }).await?;
        Ok(Outcome::new())
    }

    #[engine::args]
    pub(crate) struct JoinOrg {
        pub org: String,
        /// A project to add in the same mutation, if any.
        #[serde(default)]
        pub project: Option<String>,
    }

    /// Join an organisation (naively), and maybe add a project to it at once.
    #[engine::mutator]
    pub(crate) async fn join_org(ctx: &mut MutatorCtx<'_>, args: JoinOrg) -> Result<Outcome> {
        let user_id = ctx.actor().user_id.clone();
        ctx.insert(&OrgMember { org: args.org.clone(), user_id }).await?;
        if let Some(id) = args.project {
            ctx.insert(&Project { id, org: args.org, title: "mine".into() }).await?;
        }
        Ok(Outcome::new())
    }

    #[engine::args]
    pub(crate) struct AddProject {
        pub id: String,
        pub org: String,
        pub title: String,
    }

    /// Add a project to an organisation.
    #[engine::mutator]
    pub(crate) async fn add_project(ctx: &mut MutatorCtx<'_>, args: AddProject) -> Result<Outcome> {
        ctx.insert(&Project { id: args.id, org: args.org, title: args.title }).await?;
        Ok(Outcome::new())
    }

    #[engine::args]
    pub(crate) struct Member {
        pub team_id: String,
        pub user_id: String,
    }

    /// Remove a user from a team (a lead's work, or the user's own when leaving).
    #[engine::mutator]
    pub(crate) async fn remove_member(ctx: &mut MutatorCtx<'_>, args: Member) -> Result<Outcome> {
        ctx.delete::<TeamMember>(&(args.team_id, args.user_id)).await?;
        Ok(Outcome::new())
    }

    #[engine::args]
    pub(crate) struct Audit {
        pub id: String,
        pub team_id: String,
    }

    /// Note something of a team where no bucket holds it.
    #[engine::mutator]
    pub(crate) async fn audit(ctx: &mut MutatorCtx<'_>, args: Audit) -> Result<Outcome> {
        ctx.insert(&AuditEntry { id: args.id, team_id: args.team_id, note: "written by a client".into() }).await?;
        Ok(Outcome::new())
    }

    /// Start work in a team: a task, and the actor as the team's lead, in one mutation.
    #[engine::mutator]
    pub(crate) async fn squat(ctx: &mut MutatorCtx<'_>, args: TeamId) -> Result<Outcome> {
        let user_id = ctx.actor().user_id.clone();
        let task = Task {
            id: format!("{}-first", args.team_id),
            team_id: args.team_id.clone(),
            assignee: user_id.clone(),
            title: "first".into(),
            done: false,
        };
        ctx.insert(&task).await?;
        ctx.insert(&TeamMember { team_id: args.team_id, user_id, role: "lead".into() }).await?;
        Ok(Outcome::new())
    }

    /// Delete a team's row (its tasks and members stay).
    #[engine::mutator]
    pub(crate) async fn delete_team(ctx: &mut MutatorCtx<'_>, args: TeamId) -> Result<Outcome> {
        ctx.delete::<Team>(&args.team_id).await?;
        Ok(Outcome::new())
    }

    #[engine::args]
    pub(crate) struct MoveTask {
        pub id: String,
        pub team_id: String,
    }

    /// Move a task to another team.
    #[engine::mutator]
    pub(crate) async fn move_task(ctx: &mut MutatorCtx<'_>, args: MoveTask) -> Result<Outcome> {
        ctx.update::<Task>(&args.id, [Task::team_id.set(args.team_id)]).await?;
        Ok(Outcome::new())
    }

    #[engine::args]
    pub(crate) struct Forget {
        pub task_id: String,
    }

    /// Try a write the rules refuse and go on as if nothing happened.
    #[engine::mutator]
    pub(crate) async fn shrug(ctx: &mut MutatorCtx<'_>, args: Forget) -> Result<Outcome> {
        let _ = ctx.update::<Task>(&args.task_id, [Task::title.set("defaced".to_owned())]).await;
        Ok(Outcome::new())
    }

    /// Rules whose raw membership reads `org_members` without saying so.
    #[engine::sync_rules]
    pub(crate) mod undeclared {
        use super::Project;

        /// The organisations the actor is in: its SQL reads `org_members` and says nothing of it.
        #[bucket(
            membership(raw("SELECT m.org FROM org_members AS m WHERE m.user_id = $user_id")),
            data(Project::org == bucket.org),
        )]
        pub(crate) struct Org {
            #[param(membership.org)]
            pub org: String,
        }
    }

    /// An app of those rules.
    pub(crate) fn undeclared_app() -> engine::App {
        engine::app! { tables: [OrgMember, Project], mutators: [], sync_rules: undeclared }
    }

    /// An app of the teams, tasks and messages and of `$rules`, with `$tables` and `$mutators`
    /// besides theirs.
    macro_rules! teams_app {
        ($rules:ident, [$($table:ident),*], [$($mutator:ident),*]) => {
            engine::app! {
                tables: [Team, TeamMember, Task, Message, AuditEntry $(, $table)*],
                mutators: [
                    create_team,
                    join_team,
                    add_member,
                    add_task,
                    complete_task,
                    send,
                    remove_member,
                    audit,
                    move_task,
                    squat,
                    delete_team,
                    shrug
                    $(, $mutator)*
                ],
                sync_rules: $rules,
            }
        };
    }

    /// The app without organisations, of `table_rules`: what SQLite serves.
    pub(crate) fn table_app() -> engine::App {
        teams_app!(table_rules, [], [])
    }

    /// The whole app, organisations held through raw SQL included.
    pub(crate) fn app() -> engine::App {
        teams_app!(rules, [OrgMember, Project], [join_org, add_project])
    }
}

/// A server of the test app on a real port (on SQLite without organisations, whose raw
/// membership SQL is Postgres').
async fn server(db: &TestDb) -> TestServer {
    let store = db.store(engine::storage::StoreLimits::default());
    let app = match backend() {
        Backend::Postgres => app::app(),
        Backend::Sqlite => app::table_app(),
    };
    TestServer::start(db, move |b| b.app(app).storage(store)).await
}

#[tokio::test]
async fn nobody_joins_a_team_on_their_own() {
    let db = TestDb::new().await;
    let server = server(&db).await;
    applied(&push(&server, "alice", 1, "create_team", json!({"id": "skunkworks", "name": "S"})).await);
    let task = json!({"id": "t1", "team_id": "skunkworks", "assignee": "alice", "title": "confidential"});
    applied(&push(&server, "alice", 2, "add_task", task).await);

    // The naive join: the membership table lies in no bucket, so no row "enters" anything.
    let detail = forbidden(&push(&server, "mallory", 1, "join_team", json!({"team_id": "skunkworks"})).await, &[]);
    assert!(detail.contains("team_members") && detail.contains("`team`"), "{detail}");
    assert_eq!(count(&db, "SELECT count(*) FROM team_members WHERE user_id = 'mallory'").await, 0);
    let rows = pulled(&server, "mallory").await;
    assert!(!has(&rows, "tasks", "t1") && !has(&rows, "teams", "skunkworks"), "{rows:?}");
    let result = push(&server, "mallory", 2, "complete_task", json!({"id": "t1"})).await;
    assert_eq!(result["status"], "rejected", "{result}");
    assert_eq!(count(&db, "SELECT count(*) FROM tasks WHERE done").await, 0);

    // Nor by a friend who is not in it either: a grant of a bucket the writer does not hold.
    let grant = json!({"team_id": "skunkworks", "user_id": "mallory", "role": "member"});
    forbidden(&push(&server, "trudy", 1, "add_member", grant).await, &["skunkworks"]);
    assert_eq!(count(&db, "SELECT count(*) FROM team_members WHERE user_id = 'mallory'").await, 0);

    // A member may bring someone in, but not as more than they are; a viewer writes no task.
    let viewer = json!({"team_id": "skunkworks", "user_id": "victor", "role": "viewer"});
    applied(&push(&server, "alice", 3, "add_member", viewer).await);
    let promote = json!({"team_id": "skunkworks", "user_id": "victor", "role": "lead"});
    forbidden(&push(&server, "victor", 1, "add_member", promote).await, &[]);
    let task = json!({"id": "t2", "team_id": "skunkworks", "assignee": "victor", "title": "x"});
    let detail = forbidden(&push(&server, "victor", 2, "add_task", task).await, &[]);
    assert!(detail.contains("tasks") && detail.contains("`team`"), "{detail}");
    assert!(has(&pulled(&server, "victor").await, "tasks", "t1"), "a viewer reads");

    // Creating a new team stays possible: its bucket had no rows.
    applied(&push(&server, "mallory", 3, "create_team", json!({"id": "own-team", "name": "M"})).await);
    assert!(has(&pulled(&server, "mallory").await, "teams", "own-team"));
}

#[tokio::test]
async fn a_raw_memberships_tables_are_written_by_server_code_only() {
    if postgres_only("raw membership SQL is Postgres'") {
        return;
    }
    let db = TestDb::new().await;
    let server = server(&db).await;
    // Whom a row of `org_members` grants cannot be told from raw SQL: no client writes one, for
    // itself or anyone else, in a new organisation or an existing one.
    let detail = forbidden(&push(&server, "alice", 1, "join_org", json!({"org": "acme", "project": "p1"})).await, &[]);
    assert!(detail.contains("org_members") && detail.contains("`org`") && detail.contains("server code"), "{detail}");
    assert_eq!(count(&db, "SELECT count(*) FROM org_members").await, 0);
    // Server code puts alice in; she writes the organisation's projects, mallory does not.
    sqlx::query("INSERT INTO org_members (org, user_id) VALUES ('acme', 'alice')").execute(&db.pool).await.unwrap();
    applied(&push(&server, "alice", 2, "add_project", json!({"id": "p1", "org": "acme", "title": "Plan"})).await);
    assert!(has(&pulled(&server, "alice").await, "projects", "p1"));
    forbidden(&push(&server, "mallory", 1, "join_org", json!({"org": "acme"})).await, &[]);
    let stranger = json!({"id": "p2", "org": "acme", "title": "Mine"});
    forbidden(&push(&server, "mallory", 2, "add_project", stranger).await, &[]);
    assert!(!has(&pulled(&server, "mallory").await, "projects", "p1"));
}

/// A raw membership query that reads an app table its `reads(...)` does not name is refused
/// when the server starts: clients could write that table unchecked.
#[tokio::test]
async fn a_raw_membership_reading_an_undeclared_table_does_not_start() {
    if postgres_only("raw membership SQL is Postgres'") {
        return;
    }
    let db = TestDb::new().await;
    let app = app::undeclared_app();
    let error = engine::Server::builder()
        .app(app)
        .storage(db.store(engine::storage::StoreLimits::default()))
        .auth(engine::auth::BearerTokenAuth::new(crate::support::server::SECRET))
        .build()
        .await
        .expect_err("the server refuses the app");
    let message = error.to_string();
    assert!(message.contains("`org`") && message.contains("org_members") && message.contains("reads("), "{message}");
}

#[tokio::test]
async fn rows_enter_other_actors_buckets_only_where_the_rules_accept_them() {
    let db = TestDb::new().await;
    let server = server(&db).await;
    applied(&push(&server, "alice", 1, "create_team", json!({"id": "core", "name": "C"})).await);
    let bob = json!({"team_id": "core", "user_id": "bob", "role": "member"});
    applied(&push(&server, "alice", 2, "add_member", bob).await);

    // Assigning a task of a team alice holds to her teammate: it enters bob's `assigned` bucket.
    let task = json!({"id": "t1", "team_id": "core", "assignee": "bob", "title": "review"});
    applied(&push(&server, "alice", 3, "add_task", task).await);
    assert!(has(&pulled(&server, "bob").await, "tasks", "t1"));
    applied(&push(&server, "bob", 1, "complete_task", json!({"id": "t1"})).await);

    // A task of a team alice does not hold, assigned to carol, enters no bucket of alice's.
    let stranger = json!({"id": "t2", "team_id": "elsewhere", "assignee": "carol", "title": "spam"});
    let detail = forbidden(&push(&server, "alice", 4, "add_task", stranger).await, &["carol"]);
    assert!(detail.contains("tasks"), "{detail}");
    assert!(!has(&pulled(&server, "carol").await, "tasks", "t2"));

    // A message into another user's inbox, from the sender's own outbox.
    let hello = json!({"id": "m1", "from": "alice", "to": "bob", "body": "hi"});
    applied(&push(&server, "alice", 5, "send", hello).await);
    assert!(has(&pulled(&server, "bob").await, "messages", "m1"));
    // Forged as sent by someone else, it lies in no bucket of the writer's: refused.
    let forged = json!({"id": "m2", "from": "carol", "to": "bob", "body": "hi"});
    forbidden(&push(&server, "mallory", 1, "send", forged).await, &[]);
    assert!(!has(&pulled(&server, "bob").await, "messages", "m2"));
}

/// Records the fields of every event while it is the thread's subscriber (the tests run on a
/// current-thread runtime, so the server's tasks run on the test's thread).
#[derive(Clone, Default)]
struct Log {
    events: Arc<Mutex<Vec<String>>>,
}

struct Fields<'a>(&'a mut String);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.push_str(&format!("{}={value:?} ", field.name()));
    }
}

impl Subscriber for Log {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        let mut text = String::new();
        event.record(&mut Fields(&mut text));
        self.events.lock().unwrap().push(text);
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

#[tokio::test]
async fn a_refusal_names_the_table_and_rule_and_the_log_keeps_the_bucket() {
    let db = TestDb::new().await;
    let log = Log::default();
    let _subscriber = crate::support::logs::scoped(log.clone());
    let server = server(&db).await;
    applied(&push(&server, "alice", 1, "create_team", json!({"id": "core", "name": "C"})).await);
    applied(
        &push(
            &server,
            "alice",
            2,
            "add_task",
            json!({"id": "t1", "team_id": "core", "assignee": "alice", "title": "x"}),
        )
        .await,
    );
    // A row mallory cannot read is not found, and nothing of it is named.
    let result = push(&server, "mallory", 1, "complete_task", json!({"id": "t1"})).await;
    assert_eq!(result["status"], "rejected", "{result}");
    let detail = result["error"]["detail"].as_str().unwrap();
    assert!(!detail.contains("core") && !detail.contains("alice"), "{detail}");
    // A refusal: the table and the rule, not the bucket key; the log has the bucket.
    let stranger = json!({"id": "t2", "team_id": "elsewhere", "assignee": "carol", "title": "spam"});
    let detail = forbidden(&push(&server, "alice", 3, "add_task", stranger).await, &["assigned/", "team/"]);
    assert!(detail.contains("`tasks`") && detail.contains("`assigned`"), "{detail}");
    let events = log.events.lock().unwrap().clone();
    assert!(
        events.iter().any(|e| e.contains("write refused") && e.contains("bucket=assigned/carol")),
        "the log keeps the bucket: {events:?}"
    );
}

/// Issue: rows in no bucket were writable by anyone, and memberships no rule selected could be
/// removed by strangers. Now the membership lies in the bucket it grants, and only the rule's
/// `write(TeamMember: …)` (leads) or `leave` (one's own row) removes it.
#[tokio::test]
async fn only_a_lead_or_the_member_removes_a_membership() {
    let db = TestDb::new().await;
    let server = server(&db).await;
    applied(&push(&server, "alice", 1, "create_team", json!({"id": "red", "name": "R"})).await);
    applied(
        &push(&server, "alice", 2, "add_member", json!({"team_id": "red", "user_id": "bob", "role": "member"})).await,
    );
    applied(
        &push(&server, "alice", 3, "add_member", json!({"team_id": "red", "user_id": "carol", "role": "member"})).await,
    );
    applied(&push(&server, "dave", 1, "create_team", json!({"id": "blue", "name": "B"})).await);

    // A stranger removes nobody, the lead of another team included: the rows are not found.
    let stranger = push(&server, "dave", 2, "remove_member", json!({"team_id": "red", "user_id": "bob"})).await;
    let missing = push(&server, "dave", 3, "remove_member", json!({"team_id": "red", "user_id": "nobody"})).await;
    assert_eq!(stranger["status"], missing["status"], "as if the membership did not exist: {stranger} {missing}");
    push(&server, "dave", 4, "remove_member", json!({"team_id": "red", "user_id": "alice"})).await;
    assert_eq!(count(&db, "SELECT count(*) FROM team_members WHERE team_id = 'red'").await, 3);
    // A plain member removes no one else, and adds no outsider.
    let detail =
        forbidden(&push(&server, "bob", 1, "remove_member", json!({"team_id": "red", "user_id": "carol"})).await, &[]);
    assert!(
        detail.contains("`team`") && detail.contains("write(team_members"),
        "names the rule and its permission: {detail}"
    );
    forbidden(
        &push(&server, "bob", 2, "add_member", json!({"team_id": "red", "user_id": "eve", "role": "member"})).await,
        &[],
    );
    assert_eq!(count(&db, "SELECT count(*) FROM team_members WHERE team_id = 'red'").await, 3);

    // A member leaves on their own; a lead removes a member.
    applied(&push(&server, "carol", 1, "remove_member", json!({"team_id": "red", "user_id": "carol"})).await);
    applied(&push(&server, "alice", 4, "remove_member", json!({"team_id": "red", "user_id": "bob"})).await);
    assert_eq!(count(&db, "SELECT count(*) FROM team_members WHERE team_id = 'red'").await, 1);
    assert!(!has(&pulled(&server, "carol").await, "teams", "red"), "who left reads the team no more");
}

/// Issue: `accept` did not check who receives the row. A teammate may be assigned a team's task;
/// an outsider may not, whoever assigns it.
#[tokio::test]
async fn a_task_is_assigned_only_to_a_teammate() {
    let db = TestDb::new().await;
    let server = server(&db).await;
    applied(&push(&server, "alice", 1, "create_team", json!({"id": "red", "name": "R"})).await);
    applied(
        &push(&server, "alice", 2, "add_member", json!({"team_id": "red", "user_id": "bob", "role": "member"})).await,
    );
    let task = |id: &str, to: &str| json!({"id": id, "team_id": "red", "assignee": to, "title": "team secret"});
    applied(&push(&server, "bob", 1, "add_task", task("t1", "alice")).await);
    // An outsider receives no team task, from a member or a lead.
    forbidden(&push(&server, "bob", 2, "add_task", task("t2", "mallory")).await, &["mallory"]);
    forbidden(&push(&server, "alice", 3, "add_task", task("t3", "mallory")).await, &["mallory"]);
    assert!(!has(&pulled(&server, "mallory").await, "tasks", "t2"));
    assert_eq!(count(&db, "SELECT count(*) FROM tasks").await, 1);
    // Nor does a stranger put a task of a team it is not in into anyone's list.
    forbidden(
        &push(
            &server,
            "mallory",
            1,
            "add_task",
            json!({"id": "t4", "team_id": "red", "assignee": "bob", "title": "phishing"}),
        )
        .await,
        &[],
    );
    assert!(has(&pulled(&server, "alice").await, "tasks", "t1"));
}

/// Issue: joining a team id nobody used made the joiner its first member, refused its real
/// creator later, and told whether the id was taken. A bucket is created by its first data row.
#[tokio::test]
async fn nobody_squats_a_team_before_it_exists() {
    let db = TestDb::new().await;
    let server = server(&db).await;
    applied(&push(&server, "alice", 1, "create_team", json!({"id": "taken", "name": "T"})).await);
    let taken = forbidden(&push(&server, "mallory", 1, "join_team", json!({"team_id": "taken"})).await, &[]);
    let free = forbidden(&push(&server, "mallory", 2, "join_team", json!({"team_id": "gamma"})).await, &[]);
    assert_eq!(taken, free, "the same answer whether or not the team exists");
    assert_eq!(count(&db, "SELECT count(*) FROM team_members WHERE user_id = 'mallory'").await, 0);
    applied(&push(&server, "bob", 1, "create_team", json!({"id": "gamma", "name": "G"})).await);
    assert!(has(&pulled(&server, "bob").await, "teams", "gamma"));
}

/// A row lying in no bucket and a server-only table are not written by client mutations, and a
/// refusal sticks even when the mutator swallows it.
#[tokio::test]
async fn rows_beyond_every_rule_are_written_by_server_code_only() {
    let db = TestDb::new().await;
    let server = server(&db).await;
    applied(&push(&server, "alice", 1, "create_team", json!({"id": "red", "name": "R"})).await);
    let detail = forbidden(&push(&server, "alice", 2, "audit", json!({"id": "a1", "team_id": "red"})).await, &[]);
    assert!(detail.contains("audit_entries") && detail.contains("server code"), "{detail}");
    assert_eq!(count(&db, "SELECT count(*) FROM audit_entries").await, 0);

    let task = json!({"id": "t1", "team_id": "red", "assignee": "alice", "title": "fine"});
    applied(&push(&server, "alice", 3, "add_task", task).await);
    let viewer = json!({"team_id": "red", "user_id": "victor", "role": "viewer"});
    applied(&push(&server, "alice", 4, "add_member", viewer).await);
    // A viewer sees the task, may not write it, and cannot get `applied` by ignoring the refusal.
    forbidden(&push(&server, "victor", 1, "shrug", json!({"task_id": "t1"})).await, &[]);
    assert_eq!(count(&db, "SELECT count(*) FROM tasks WHERE title = 'defaced'").await, 0);
}

/// Taking a row out of a bucket writes there: a viewer of a team, assigned one of its tasks
/// (which its own `assigned` bucket lets it write), does not move the task out of the team.
#[tokio::test]
async fn a_row_leaves_a_bucket_only_where_its_writer_may_write() {
    let db = TestDb::new().await;
    let server = server(&db).await;
    applied(&push(&server, "alice", 1, "create_team", json!({"id": "red", "name": "R"})).await);
    applied(
        &push(&server, "alice", 2, "add_member", json!({"team_id": "red", "user_id": "victor", "role": "viewer"}))
            .await,
    );
    let task = json!({"id": "t1", "team_id": "red", "assignee": "victor", "title": "red secret"});
    applied(&push(&server, "alice", 3, "add_task", task).await);
    applied(&push(&server, "victor", 1, "create_team", json!({"id": "mine", "name": "M"})).await);
    let detail = forbidden(&push(&server, "victor", 2, "move_task", json!({"id": "t1", "team_id": "mine"})).await, &[]);
    assert!(detail.contains("`team`") && detail.contains("write(tasks"), "names the rule it leaves: {detail}");
    assert_eq!(count(&db, "SELECT count(*) FROM tasks WHERE team_id = 'red'").await, 1);
    // The team's lead moves it; the assignee, now of the team it went to, still has it.
    applied(&push(&server, "alice", 4, "create_team", json!({"id": "blue", "name": "B"})).await);
    applied(
        &push(&server, "alice", 5, "add_member", json!({"team_id": "blue", "user_id": "victor", "role": "viewer"}))
            .await,
    );
    applied(&push(&server, "alice", 6, "move_task", json!({"id": "t1", "team_id": "blue"})).await);
    assert!(has(&pulled(&server, "victor").await, "tasks", "t1"));
}

/// Issue item 5: a team is its `teams` row (`anchor(Team::id == bucket.team_id)`). Starting
/// work in a team id with some other row and one's own membership does not take the id: the
/// answer is the one a join of an existing team gets, and the team's creator creates it later.
/// A team whose row is gone takes no new members.
#[tokio::test]
async fn a_membership_needs_its_buckets_anchor() {
    let db = TestDb::new().await;
    let server = server(&db).await;
    applied(&push(&server, "alice", 1, "create_team", json!({"id": "red", "name": "R"})).await);
    let free = forbidden(&push(&server, "mallory", 1, "squat", json!({"team_id": "gamma"})).await, &[]);
    let taken = forbidden(&push(&server, "mallory", 2, "squat", json!({"team_id": "red"})).await, &[]);
    assert_eq!(free, taken, "the same answer whether or not the team exists");
    assert_eq!(count(&db, "SELECT count(*) FROM tasks").await, 0);
    applied(&push(&server, "bob", 1, "create_team", json!({"id": "gamma", "name": "G"})).await);
    assert!(has(&pulled(&server, "bob").await, "teams", "gamma"));

    applied(&push(&server, "alice", 2, "delete_team", json!({"team_id": "red"})).await);
    let member = json!({"team_id": "red", "user_id": "carol", "role": "member"});
    forbidden(&push(&server, "alice", 3, "add_member", member).await, &["carol"]);
    assert_eq!(count(&db, "SELECT count(*) FROM team_members WHERE team_id = 'red'").await, 1);
}

/// Issue 37, finding 14: a raw membership rule made every write signal every socket to recompute
/// its buckets ("everyone"). Now only a write to a table the raw query reads does (server
/// code's); a write elsewhere signals only those a membership table's change concerns.
#[tokio::test]
async fn a_raw_membership_does_not_make_every_write_signal_everyone() {
    use engine::storage::{PostgresStorage, Storage};

    if postgres_only("a raw membership rule is raw SQL, which SQLite refuses to serve") {
        return;
    }
    let db = TestDb::new().await;
    let storage = PostgresStorage::new(db.pg().clone(), std::sync::Arc::new(app::app()));
    storage.provision().await.unwrap();
    let alice = engine::Actor::new("alice", "alice");
    let mut id = 0;
    let mut signals = async |name: &str, args: serde_json::Value| {
        id += 1;
        let request: engine::wire::PushRequest = serde_json::from_value(json!({
            "clientId": crate::support::actors::device("alice").1,
            "mutations": [{"mutationId": id, "clientMutationId": uuid::Uuid::new_v4(), "name": name, "args": args}],
        }))
        .unwrap();
        let pushed = storage.push(&alice, &request).await.unwrap();
        assert_eq!(pushed.response.results[0].status, engine::wire::MutationStatus::Applied, "{:?}", pushed.response);
        pushed.membership_changes
    };
    signals("create_team", json!({"id": "red", "name": "R"})).await;
    let task = json!({"id": "t1", "team_id": "red", "assignee": "alice", "title": "no one's buckets"});
    assert_eq!(signals("add_task", task).await, std::collections::BTreeSet::new());
    let member = json!({"team_id": "red", "user_id": "bob", "role": "member"});
    assert_eq!(signals("add_member", member).await, std::collections::BTreeSet::from(["user_id=bob".to_owned()]));
}

/// A squad whose membership compares a column with a custom claim (`actor.claims.tag`), with
/// `leave`, and each user's roster of the squads it is listed in, which it may not write.
pub(crate) mod squads {
    use engine::{MutatorCtx, Outcome, Result};

    /// A user listed in a squad, a member of it where `tag` is the member's claim.
    #[engine::table]
    pub(crate) struct SquadMember {
        #[engine(primary_key)]
        pub squad: String,
        #[engine(primary_key)]
        pub user_id: String,
        pub tag: Option<String>,
    }

    #[engine::sync_rules]
    pub(crate) mod rules {
        use super::SquadMember;

        /// A squad, for the actors whose `tag` claim a row of it holds.
        #[bucket(
            membership(SquadMember::tag == actor.claims.tag),
            data(SquadMember::squad == bucket.squad),
            write(SquadMember),
            leave,
        )]
        pub(crate) struct Squad {
            #[param(SquadMember::squad)]
            pub squad: String,
        }

        /// The squads the actor is listed in: read only.
        #[bucket(data(SquadMember::user_id == bucket.user_id))]
        pub(crate) struct Roster {
            #[param(actor.user_id)]
            pub user_id: String,
        }
    }

    #[engine::args]
    pub(crate) struct Unlist {
        pub squad: String,
    }

    /// Delete the actor's listing in a squad.
    #[engine::mutator]
    pub(crate) async fn unlist(ctx: &mut MutatorCtx<'_>, args: Unlist) -> Result<Outcome> {
        let key = (args.squad, ctx.actor().user_id.clone());
        ctx.delete::<SquadMember>(&key).await?;
        Ok(Outcome::new())
    }

    pub(crate) fn app() -> engine::App {
        engine::app! { tables: [SquadMember], mutators: [unlist], sync_rules: rules }
    }
}

/// A membership row with no tag is no one's, not that of an actor without the `tag` claim: such
/// an actor may not delete it as leaving the squad (`leave`), where nothing else lets it.
#[tokio::test]
async fn a_membership_row_without_the_claims_value_is_no_ones_to_leave() {
    let db = TestDb::new().await;
    let server = TestServer::start(&db, |b| b.app(squads::app())).await;
    sqlx::query("INSERT INTO squad_members (squad, user_id, tag) VALUES ('s', 'mallory', NULL)")
        .execute(&db.pool)
        .await
        .unwrap();
    forbidden(&push(&server, "mallory", 1, "unlist", json!({"squad": "s"})).await, &[]);
    let kept: i64 = sqlx::query_scalar("SELECT count(*) FROM squad_members").fetch_one(&db.pool).await.unwrap();
    assert_eq!(kept, 1);
}
