//! Write rules that compare the row written with the actor, over real HTTP, with an app built
//! for it: comments on a shared board, which every member writes as itself
//! (`row.author_id == actor.user_id`), and memberships the board's owner manages, all but its own
//! (`row.user_id != actor.user_id`), so that it makes no other owner either. A hostile member
//! edits, deletes and re-authors another's comment, and writes one in another's name; each is
//! refused `forbidden`, on the row before the write and after it, and the honest writes around
//! them pass.

use serde_json::json;

use crate::support::actors::{applied, count, forbidden, has, pulled, push};
use crate::support::{TestDb, TestServer};

pub(crate) mod app {
    use engine::{MutatorCtx, Outcome, Result};

    /// A board.
    #[engine::table]
    pub(crate) struct Board {
        #[engine(primary_key)]
        pub id: String,
        pub name: String,
    }

    /// Who is on which board, and as what (`owner` or `member`).
    #[engine::table]
    pub(crate) struct BoardMember {
        #[engine(primary_key)]
        pub board_id: String,
        #[engine(primary_key)]
        pub user_id: String,
        pub role: String,
    }

    /// A comment on a board, by its author.
    #[engine::table]
    pub(crate) struct Comment {
        #[engine(primary_key)]
        pub id: String,
        pub board_id: String,
        pub author_id: String,
        pub body: String,
    }

    #[engine::sync_rules]
    pub(crate) mod rules {
        use super::{Board, BoardMember, Comment};

        /// A board, its members and its comments. Every member writes its own comments; the
        /// owner changes the board and every membership but its own.
        #[bucket(
            name = "board",
            membership(BoardMember::user_id == actor.user_id),
            data(
                Board::id == bucket.board_id,
                BoardMember::board_id == bucket.board_id,
                Comment::board_id == bucket.board_id,
            ),
            write(
                Board: BoardMember::role == "owner",
                BoardMember: BoardMember::role == "owner" && row.user_id != actor.user_id,
                Comment: row.author_id == actor.user_id,
            ),
        )]
        pub(crate) struct Shared {
            #[param(BoardMember::board_id)]
            pub board_id: String,
        }
    }

    #[engine::args]
    pub(crate) struct BoardId {
        pub id: String,
    }

    /// Create a board owned by the actor.
    #[engine::mutator]
    pub(crate) async fn create_board(ctx: &mut MutatorCtx<'_>, args: BoardId) -> Result<Outcome> {
        let user_id = ctx.actor().user_id.clone();
        ctx.insert(&Board { id: args.id.clone(), name: "b".into() }).await?;
        ctx.insert(&BoardMember { board_id: args.id, user_id, role: "owner".into() }).await?;
        Ok(Outcome::new())
    }

    #[engine::args]
    pub(crate) struct MemberRole {
        pub board_id: String,
        pub user_id: String,
        pub role: String,
    }

    /// Put a user on a board, or change its role there.
    #[engine::mutator]
    pub(crate) async fn set_member(ctx: &mut MutatorCtx<'_>, args: MemberRole) -> Result<Outcome> {
        let key = (args.board_id.clone(), args.user_id.clone());
        if !ctx.update::<BoardMember>(&key, [BoardMember::role.set(args.role.clone())]).await? {
            ctx.insert(&BoardMember { board_id: args.board_id, user_id: args.user_id, role: args.role }).await?;
        }
        Ok(Outcome::new())
    }

    /// A comment, with the author its writer claims.
    #[engine::args]
    pub(crate) struct Write {
        pub id: String,
        #[serde(default)]
        pub board_id: String,
        #[serde(default)]
        pub author_id: String,
        #[serde(default)]
        pub body: String,
    }

    /// Write a new comment, in the name the arguments give: no mutator check, the rules decide.
    #[engine::mutator]
    pub(crate) async fn comment(ctx: &mut MutatorCtx<'_>, args: Write) -> Result<Outcome> {
        let Write { id, board_id, author_id, body } = args;
        ctx.insert(&Comment { id, board_id, author_id, body }).await?;
        Ok(Outcome::new())
    }

    /// Change a comment's text.
    #[engine::mutator]
    pub(crate) async fn edit(ctx: &mut MutatorCtx<'_>, args: Write) -> Result<Outcome> {
        if !ctx.update::<Comment>(&args.id, [Comment::body.set(args.body)]).await? {
            return Err(engine::Error::mutator_failed("no such comment"));
        }
        Ok(Outcome::new())
    }

    /// Change a comment's author.
    #[engine::mutator]
    pub(crate) async fn reauthor(ctx: &mut MutatorCtx<'_>, args: Write) -> Result<Outcome> {
        if !ctx.update::<Comment>(&args.id, [Comment::author_id.set(args.author_id)]).await? {
            return Err(engine::Error::mutator_failed("no such comment"));
        }
        Ok(Outcome::new())
    }

    /// Delete a comment.
    #[engine::mutator]
    pub(crate) async fn delete(ctx: &mut MutatorCtx<'_>, args: Write) -> Result<Outcome> {
        if !ctx.delete::<Comment>(&args.id).await? {
            return Err(engine::Error::mutator_failed("no such comment"));
        }
        Ok(Outcome::new())
    }

    pub(crate) fn app() -> engine::App {
        engine::app! {
            tables: [Board, BoardMember, Comment],
            mutators: [create_board, set_member, comment, edit, reauthor, delete],
            sync_rules: rules,
        }
    }
}

async fn server(db: &TestDb) -> TestServer {
    let store = db.store(engine::storage::StoreLimits::default());
    TestServer::start(db, move |b| b.app(app::app()).storage(store)).await
}

/// A board of alice's with bob and mallory on it, and a comment of bob's, `c1`.
async fn board(server: &TestServer) {
    applied(&push(server, "alice", 1, "create_board", json!({"id": "b"})).await);
    for (i, user) in [(2, "bob"), (3, "mallory")] {
        let member = json!({"board_id": "b", "user_id": user, "role": "member"});
        applied(&push(server, "alice", i, "set_member", member).await);
    }
    let comment = json!({"id": "c1", "board_id": "b", "author_id": "bob", "body": "hello"});
    applied(&push(server, "bob", 1, "comment", comment).await);
}

#[tokio::test]
async fn a_member_writes_only_its_own_comments() {
    let db = TestDb::new().await;
    let server = server(&db).await;
    board(&server).await;
    let bobs = "SELECT count(*) FROM comments WHERE id = 'c1' AND author_id = 'bob' AND body = 'hello'";

    // Mallory edits, deletes and re-authors bob's comment: the row before the write is bob's.
    for (id, name, args) in [
        (1, "edit", json!({"id": "c1", "body": "defaced"})),
        (2, "delete", json!({"id": "c1"})),
        (3, "reauthor", json!({"id": "c1", "author_id": "mallory"})),
    ] {
        let detail = forbidden(&push(&server, "mallory", id, name, args).await, &[]);
        assert!(detail.contains("`comments`") && detail.contains("`board`"), "{name}: {detail}");
        assert_eq!(count(&db, bobs).await, 1, "{name}");
    }

    // Nor does she write in bob's name, or hand her own comment to him: the row after is his.
    let forged = json!({"id": "c2", "board_id": "b", "author_id": "bob", "body": "I quit"});
    forbidden(&push(&server, "mallory", 4, "comment", forged).await, &[]);
    assert_eq!(count(&db, "SELECT count(*) FROM comments WHERE id = 'c2'").await, 0);
    let own = json!({"id": "c3", "board_id": "b", "author_id": "mallory", "body": "mine"});
    applied(&push(&server, "mallory", 5, "comment", own).await);
    forbidden(&push(&server, "mallory", 6, "reauthor", json!({"id": "c3", "author_id": "bob"})).await, &[]);
    assert_eq!(count(&db, "SELECT count(*) FROM comments WHERE id = 'c3' AND author_id = 'mallory'").await, 1);
    applied(&push(&server, "mallory", 7, "edit", json!({"id": "c3", "body": "mine, edited"})).await);

    // Bob edits and deletes his own; everyone reads every comment.
    applied(&push(&server, "bob", 2, "edit", json!({"id": "c1", "body": "hello, edited"})).await);
    let rows = pulled(&server, "mallory").await;
    assert!(has(&rows, "comments", "c1") && has(&rows, "comments", "c3"), "{rows:?}");
    applied(&push(&server, "bob", 3, "delete", json!({"id": "c1"})).await);
    assert_eq!(count(&db, "SELECT count(*) FROM comments").await, 1);
}

#[tokio::test]
async fn the_owner_changes_every_membership_but_its_own() {
    let db = TestDb::new().await;
    let server = server(&db).await;
    board(&server).await;
    let demote = json!({"board_id": "b", "user_id": "alice", "role": "member"});
    forbidden(&push(&server, "alice", 4, "set_member", demote).await, &[]);
    assert_eq!(count(&db, "SELECT count(*) FROM board_members WHERE role = 'owner'").await, 1);
    // A member changes no membership, not even its own.
    let promote = json!({"board_id": "b", "user_id": "mallory", "role": "owner"});
    forbidden(&push(&server, "mallory", 1, "set_member", promote).await, &[]);
    // Nor does the owner make another owner: an owner changes every membership but its own, so
    // bob as owner could change alice's, which alice's own permission keeps from her.
    let promote = json!({"board_id": "b", "user_id": "bob", "role": "owner"});
    let detail = forbidden(&push(&server, "alice", 5, "set_member", promote).await, &[]);
    assert!(detail.contains("`board_members`"), "{detail}");
    assert_eq!(count(&db, "SELECT count(*) FROM board_members WHERE role = 'owner'").await, 1);
    // She still changes the others' memberships as she likes.
    let member = json!({"board_id": "b", "user_id": "bob", "role": "reader"});
    applied(&push(&server, "alice", 6, "set_member", member).await);
}
