//! The task board of `examples/teams`, attacked over real HTTP by hostile members and strangers:
//! every attack the first newcomer's task board suffered, each refused by the rules alone (the
//! app's mutators check nothing). A hostile member cannot read, write, join, leave for another,
//! or learn of anything outside their teams.

use serde_json::{Value, json};

use crate::support::actors::{applied, count, device, forbidden, has, pulled, push};
use crate::support::{TestDb, TestServer};

async fn server(db: &TestDb) -> TestServer {
    let store = db.store(engine::storage::StoreLimits::default());
    TestServer::start(db, move |b| b.app(example_teams::app()).storage(store)).await
}

/// The ids the board's mutations were given (`serverId`): team `red` owned by alice, with
/// `admin` ann, `member` bob, `viewer` victor, project `p1` and task `t1` assigned to bob; team
/// `blue` owned by mallory, the attacker, with project `p9`.
struct Board {
    red: String,
    p1: String,
    t1: String,
    p9: String,
}

/// The id the applied mutation `result` gave its new row.
fn created(result: &Value) -> String {
    applied(result);
    result["serverId"].as_str().expect("the new row's id").to_owned()
}

async fn board(server: &TestServer) -> Board {
    let red = created(&push(server, "alice", 1, "create_team", json!({"name": "Red"})).await);
    for (i, (user, role)) in [("ann", "admin"), ("bob", "member"), ("victor", "viewer")].into_iter().enumerate() {
        let member = json!({"team_id": red, "user_id": user, "role": role});
        applied(&push(server, "alice", 2 + i as u64, "add_member", member).await);
    }
    let p1 = created(&push(server, "alice", 5, "add_project", json!({"team_id": red, "name": "Launch"})).await);
    let task = json!({"project_id": p1, "title": "red secret", "assignee": "bob"});
    let t1 = created(&push(server, "alice", 6, "add_task", task).await);
    let blue = created(&push(server, "mallory", 1, "create_team", json!({"name": "Blue"})).await);
    let p9 = created(&push(server, "mallory", 2, "add_project", json!({"team_id": blue, "name": "Mine"})).await);
    Board { red, p1, t1, p9 }
}

fn mutator_failed(result: &Value) -> String {
    assert_eq!(result["status"], "rejected", "{result}");
    assert_eq!(result["error"]["code"], "mutator_failed", "{result}");
    result["error"]["detail"].as_str().unwrap().to_owned()
}

/// One pull of `user`'s device from `cursor`: the response.
async fn pull_from(server: &TestServer, user: &str, cursor: Option<&str>) -> Value {
    server.settle().await;
    let mut body = json!({"clientId": device(user).1});
    if let Some(cursor) = cursor {
        body["cursor"] = cursor.into();
    }
    let response = server.post("/sync/pull", Some(user), body.to_string()).await;
    assert_eq!(response.status(), reqwest::StatusCode::OK);
    let page: Value = response.json().await.unwrap();
    assert_eq!(page["hasMore"], false, "small enough for one page");
    page
}

/// Issue item 1: memberships of a team a stranger cannot read are not hers to remove, and a
/// member adds nobody. A stranger's attempt reads exactly like one on a member who does not
/// exist.
#[tokio::test]
async fn a_stranger_or_member_changes_no_one_elses_membership() {
    let db = TestDb::new().await;
    let server = server(&db).await;
    let b = board(&server).await;
    let bob = mutator_failed(
        &push(&server, "mallory", 3, "remove_member", json!({"team_id": b.red, "user_id": "bob"})).await,
    );
    let ghost = mutator_failed(
        &push(&server, "mallory", 4, "remove_member", json!({"team_id": b.red, "user_id": "ghost"})).await,
    );
    assert_eq!(bob, ghost, "as if the membership did not exist");
    mutator_failed(&push(&server, "mallory", 5, "remove_member", json!({"team_id": b.red, "user_id": "alice"})).await);
    let outsider = json!({"team_id": b.red, "user_id": "mallory", "role": "owner"});
    let detail = forbidden(&push(&server, "bob", 1, "add_member", outsider).await, &[]);
    assert!(detail.contains("`team`") && detail.contains("write(team_members"), "names rule and permission: {detail}");
    forbidden(&push(&server, "bob", 2, "remove_member", json!({"team_id": b.red, "user_id": "victor"})).await, &[]);
    assert_eq!(count(&db, &format!("SELECT count(*) FROM team_members WHERE team_id = '{}'", b.red)).await, 4);
}

/// Issue item 2: a task goes to a teammate only, whoever assigns it; a stranger reaches no
/// team's task to assign, and learns nothing of it.
#[tokio::test]
async fn a_task_goes_to_a_teammate_only() {
    let db = TestDb::new().await;
    let server = server(&db).await;
    let b = board(&server).await;
    for (user, id) in [("bob", 1), ("alice", 7), ("ann", 1)] {
        let to_outsider = json!({"task_id": b.t1, "assignee": "mallory"});
        forbidden(&push(&server, user, id, "assign", to_outsider).await, &["mallory"]);
    }
    let new = json!({"project_id": b.p1, "title": "red secret", "assignee": "eve"});
    forbidden(&push(&server, "alice", 8, "add_task", new).await, &["eve"]);
    assert!(!has(&pulled(&server, "mallory").await, "tasks", &b.t1));
    assert!(!has(&pulled(&server, "eve").await, "tasks", "t2"));
    // A stranger's task into someone's list: the project is not found, as a missing one is not.
    let phishing = json!({"project_id": b.p1, "title": "phishing", "assignee": "bob"});
    let found = mutator_failed(&push(&server, "mallory", 3, "add_task", phishing).await);
    let missing = json!({"project_id": "nope", "title": "phishing", "assignee": "bob"});
    assert_eq!(found, mutator_failed(&push(&server, "mallory", 4, "add_task", missing).await));
    let steal = json!({"task_id": b.t1, "assignee": "mallory"});
    let missing = json!({"task_id": "nope", "assignee": "mallory"});
    assert_eq!(
        mutator_failed(&push(&server, "mallory", 5, "assign", steal).await),
        mutator_failed(&push(&server, "mallory", 6, "assign", missing).await)
    );
    // A viewer assigns nothing; a member reassigns to a teammate, and unassigns.
    forbidden(&push(&server, "victor", 1, "assign", json!({"task_id": b.t1, "assignee": "victor"})).await, &[]);
    applied(&push(&server, "bob", 2, "assign", json!({"task_id": b.t1, "assignee": "ann"})).await);
    applied(&push(&server, "ann", 2, "assign", json!({"task_id": b.t1, "assignee": null})).await);
    assert_eq!(count(&db, "SELECT count(*) FROM tasks WHERE assignee IS NULL").await, 1);
}

/// Issue item 3: tasks assigned to a member leave their replica in the same pull as the team
/// when the member is removed, with no mutator unassigning them; and the member writes them no
/// more.
#[tokio::test]
async fn a_removed_member_loses_their_assigned_tasks_with_the_team() {
    let db = TestDb::new().await;
    let server = server(&db).await;
    let b = board(&server).await;
    let first = pull_from(&server, "bob", None).await;
    let assigned: Vec<&Value> =
        first["changes"].as_array().unwrap().iter().filter(|c| c["row"]["id"] == b.t1.as_str()).collect();
    assert_eq!(assigned.len(), 1, "{first}");
    let buckets = assigned[0]["buckets"].as_array().unwrap();
    assert!(
        buckets.iter().any(|b| b.as_str().unwrap().starts_with("assigned/")),
        "in bob's assigned bucket: {buckets:?}"
    );

    applied(&push(&server, "alice", 7, "remove_member", json!({"team_id": b.red, "user_id": "bob"})).await);
    let next = pull_from(&server, "bob", first["cursor"].as_str()).await;
    let removed: Vec<&str> = next["removedBuckets"].as_array().unwrap().iter().map(|b| b.as_str().unwrap()).collect();
    assert!(removed.iter().any(|b| b.starts_with("team/")), "the team left: {next}");
    assert!(removed.iter().any(|b| b.starts_with("assigned/")), "and the tasks assigned through it: {next}");
    assert!(!has(&pulled(&server, "bob").await, "tasks", &b.t1));
    // Not found, as for anyone outside the team.
    mutator_failed(&push(&server, "bob", 1, "complete_task", json!({"task_id": b.t1})).await);
    assert_eq!(count(&db, "SELECT count(*) FROM tasks WHERE done").await, 0);
}

/// Issue item 4: anyone leaves a team on their own, and only on their own; nobody raises their
/// own role.
#[tokio::test]
async fn a_member_leaves_but_never_for_another_nor_raises_their_role() {
    let db = TestDb::new().await;
    let server = server(&db).await;
    let b = board(&server).await;
    forbidden(
        &push(&server, "victor", 1, "set_role", json!({"team_id": b.red, "user_id": "victor", "role": "owner"})).await,
        &[],
    );
    forbidden(
        &push(&server, "bob", 1, "set_role", json!({"team_id": b.red, "user_id": "bob", "role": "admin"})).await,
        &[],
    );
    forbidden(
        &push(&server, "ann", 1, "set_role", json!({"team_id": b.red, "user_id": "ann", "role": "owner"})).await,
        &[],
    );
    forbidden(&push(&server, "victor", 2, "remove_member", json!({"team_id": b.red, "user_id": "bob"})).await, &[]);
    applied(&push(&server, "victor", 3, "leave_team", json!({"team_id": b.red})).await);
    applied(&push(&server, "bob", 2, "leave_team", json!({"team_id": b.red})).await);
    let roles: Vec<(String, String)> =
        sqlx::query_as("SELECT user_id, role FROM team_members WHERE team_id = $1 ORDER BY user_id")
            .bind(&b.red)
            .fetch_all(&db.pool)
            .await
            .unwrap();
    assert_eq!(roles, [("alice".to_owned(), "owner".to_owned()), ("ann".to_owned(), "admin".to_owned())]);
    assert!(!has(&pulled(&server, "bob").await, "teams", &b.red));
}

/// Issue item 5: joining a team that does not exist is refused with the words a join of an
/// existing team gets; and since every team's id is its creating mutation's, nobody can wait for
/// a team at an id its creator will choose.
#[tokio::test]
async fn nobody_joins_a_team_before_it_exists() {
    let db = TestDb::new().await;
    let server = server(&db).await;
    let b = board(&server).await;
    let join = |team: &str| json!({"team_id": team, "user_id": "mallory", "role": "owner"});
    let taken = forbidden(&push(&server, "mallory", 3, "add_member", join(&b.red)).await, &[]);
    let free =
        forbidden(&push(&server, "mallory", 4, "add_member", join("0192f0e0-0000-7000-8000-000000000000")).await, &[]);
    assert_eq!(taken, free, "the same answer whether or not the team exists");
    let gamma = created(&push(&server, "alice", 7, "create_team", json!({"name": "Gamma"})).await);
    assert!(has(&pulled(&server, "alice").await, "teams", &gamma));
    assert!(!has(&pulled(&server, "mallory").await, "teams", &gamma));
}

/// Issue item 6: an admin manages members but never the owner: no demoting, removing or
/// creating an owner. The rule says so (`row.role != "owner"`), not the mutators.
#[tokio::test]
async fn an_admin_never_touches_the_owner() {
    let db = TestDb::new().await;
    let server = server(&db).await;
    let b = board(&server).await;
    let role = |user: &str, role: &str| json!({"team_id": b.red, "user_id": user, "role": role});
    let demote = forbidden(&push(&server, "ann", 1, "set_role", role("alice", "member")).await, &[]);
    assert!(demote.contains("only rows it names"), "says the rows' part of the rule: {demote}");
    forbidden(&push(&server, "ann", 2, "remove_member", json!({"team_id": b.red, "user_id": "alice"})).await, &[]);
    forbidden(&push(&server, "ann", 3, "set_role", role("bob", "owner")).await, &[]);
    forbidden(&push(&server, "ann", 4, "add_member", role("zed", "owner")).await, &[]);
    assert_eq!(count(&db, "SELECT count(*) FROM team_members WHERE role = 'owner'").await, 2);
    // Everything else is an admin's to do.
    applied(&push(&server, "ann", 5, "add_member", role("zed", "admin")).await);
    applied(&push(&server, "ann", 6, "set_role", role("bob", "admin")).await);
    applied(&push(&server, "zed", 1, "set_role", role("bob", "member")).await);
    applied(&push(&server, "ann", 7, "remove_member", json!({"team_id": b.red, "user_id": "victor"})).await);
    // The owner hands the team over.
    applied(&push(&server, "alice", 7, "set_role", role("ann", "owner")).await);
    applied(&push(&server, "ann", 8, "set_role", role("alice", "member")).await);
}

/// Viewers read everything of their team and write nothing; a member comments as themselves.
#[tokio::test]
async fn a_viewer_reads_and_writes_nothing() {
    let db = TestDb::new().await;
    let server = server(&db).await;
    let b = board(&server).await;
    let rows = pulled(&server, "victor").await;
    assert!(has(&rows, "tasks", &b.t1) && has(&rows, "projects", &b.p1) && !has(&rows, "projects", &b.p9));
    forbidden(&push(&server, "victor", 1, "complete_task", json!({"task_id": b.t1})).await, &[]);
    forbidden(&push(&server, "victor", 2, "comment", json!({"task_id": b.t1, "body": "hi"})).await, &[]);
    forbidden(&push(&server, "victor", 3, "add_project", json!({"team_id": b.red, "name": "X"})).await, &[]);
    applied(&push(&server, "bob", 1, "comment", json!({"task_id": b.t1, "body": "on it"})).await);
    applied(&push(&server, "bob", 2, "complete_task", json!({"task_id": b.t1})).await);
    assert_eq!(count(&db, "SELECT count(*) FROM comments WHERE author = 'bob'").await, 1);
    // A member of one team writes nothing into another's, with a project id it guessed.
    let guessed = json!({"project_id": b.p1, "title": "x"});
    mutator_failed(&push(&server, "mallory", 3, "add_task", guessed).await);
    assert_eq!(count(&db, "SELECT count(*) FROM tasks").await, 1);
}

/// A member edits and deletes its own comments only; an admin any.
#[tokio::test]
async fn a_member_edits_only_its_own_comments() {
    let db = TestDb::new().await;
    let server = server(&db).await;
    let b = board(&server).await;
    applied(
        &push(&server, "alice", 7, "add_member", json!({"team_id": b.red, "user_id": "mel", "role": "member"})).await,
    );
    let c1 = created(&push(&server, "bob", 1, "comment", json!({"task_id": b.t1, "body": "on it"})).await);
    let edit = json!({"comment_id": c1, "body": "bob gives up"});
    let detail = forbidden(&push(&server, "mel", 1, "edit_comment", edit).await, &[]);
    assert!(detail.contains("`comments`") && detail.contains("`team`"), "{detail}");
    forbidden(&push(&server, "mel", 2, "delete_comment", json!({"comment_id": c1})).await, &[]);
    assert_eq!(count(&db, "SELECT count(*) FROM comments WHERE body = 'on it'").await, 1);
    applied(&push(&server, "bob", 2, "edit_comment", json!({"comment_id": c1, "body": "done"})).await);
    applied(&push(&server, "ann", 1, "delete_comment", json!({"comment_id": c1})).await);
    assert_eq!(count(&db, "SELECT count(*) FROM comments").await, 0);
}

/// Arguments are the JSON object the contract describes: an array was read by position, so
/// `create_team ["Red"]` created a team.
#[tokio::test]
async fn arguments_sent_as_an_array_are_refused() {
    let db = TestDb::new().await;
    let server = server(&db).await;
    let result = push(&server, "mallory", 1, "create_team", json!(["array team"])).await;
    assert_eq!(result["status"], "rejected", "{result}");
    assert_eq!(result["error"]["code"], "validation_failed", "{result}");
    assert!(result["error"]["detail"].as_str().unwrap().contains("object"), "{result}");
    assert_eq!(count(&db, "SELECT count(*) FROM teams").await, 0);
    applied(&push(&server, "mallory", 2, "create_team", json!({"name": "object team"})).await);
}
