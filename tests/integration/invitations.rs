//! Memberships that are invitations (`invite(...)`), over real HTTP, with an app built for it:
//! boards whose memberships grant nothing until their member accepts them. A pending invitation
//! gives its invitee no rows, no pings and no write permission; accepting grants the board;
//! the invitee changes nothing of its membership but the acceptance; declining and leaving
//! delete it; and invitations from strangers, however many, leave the invitee's sync as it was.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::actors::{applied, device, forbidden, has, pulled, push};
use crate::support::{TestDb, TestServer};

pub(crate) mod app {
    use engine::{MutatorCtx, Outcome, Result};

    /// A board, whose memberships are invitations.
    #[engine::table]
    pub(crate) struct Board {
        #[engine(primary_key)]
        pub id: String,
        pub title: String,
    }

    /// Who is on which board, as what (`owner`, `editor`, `viewer`), and whether they accepted.
    #[engine::table]
    pub(crate) struct BoardMember {
        #[engine(primary_key)]
        pub board_id: String,
        #[engine(primary_key)]
        pub user_id: String,
        pub role: String,
        pub accepted: bool,
    }

    /// A card on a board.
    #[engine::table]
    pub(crate) struct Card {
        #[engine(primary_key)]
        pub id: String,
        pub board_id: String,
        pub title: String,
    }

    #[engine::sync_rules]
    pub(crate) mod rules {
        use super::{Board, BoardMember, Card};

        /// The actor's own memberships, accepted or not: where its invitations show. The owner
        /// of a board puts an invitation here.
        #[bucket(data(BoardMember::user_id == bucket.user_id), accept(open(Boards)))]
        pub(crate) struct Invitations {
            #[param(actor.user_id)]
            pub user_id: String,
        }

        /// The boards the actor accepted, with their cards and members.
        #[bucket(
            membership(BoardMember::user_id == actor.user_id),
            data(Board::id == bucket.board_id, Card::board_id == bucket.board_id, BoardMember::board_id == bucket.board_id),
            write(
                Card: BoardMember::role == "owner" || BoardMember::role == "editor",
                Board: BoardMember::role == "owner",
                BoardMember: BoardMember::role == "owner",
            ),
            leave,
            invite(BoardMember::accepted),
            anchor(Board::id == bucket.board_id),
        )]
        pub(crate) struct Boards {
            #[param(BoardMember::board_id)]
            pub board_id: String,
        }
    }

    #[engine::args]
    pub(crate) struct CreateBoard {
        pub id: String,
    }

    /// Create a board, with the actor's own accepted membership.
    #[engine::mutator]
    pub(crate) async fn create_board(ctx: &mut MutatorCtx<'_>, args: CreateBoard) -> Result<Outcome> {
        let user_id = ctx.actor().user_id.clone();
        ctx.insert(&Board { id: args.id.clone(), title: "b".into() }).await?;
        ctx.insert(&BoardMember { board_id: args.id, user_id, role: "owner".into(), accepted: true }).await?;
        Ok(Outcome::new())
    }

    #[engine::args]
    pub(crate) struct Invite {
        pub board_id: String,
        pub user_id: String,
        pub role: String,
        /// Whether to write the membership accepted already: as naive as a mutator can be.
        #[serde(default)]
        pub accepted: bool,
    }

    /// Invite a user onto a board.
    #[engine::mutator]
    pub(crate) async fn invite(ctx: &mut MutatorCtx<'_>, args: Invite) -> Result<Outcome> {
        let member =
            BoardMember { board_id: args.board_id, user_id: args.user_id, role: args.role, accepted: args.accepted };
        ctx.insert(&member).await?;
        Ok(Outcome::new())
    }

    #[engine::args]
    pub(crate) struct SetMember {
        pub board_id: String,
        pub user_id: String,
        #[serde(default)]
        pub role: Option<String>,
        #[serde(default)]
        pub accepted: Option<bool>,
    }

    /// Change a membership's columns, whichever are given: as naive as a mutator can be.
    #[engine::mutator]
    pub(crate) async fn set_member(ctx: &mut MutatorCtx<'_>, args: SetMember) -> Result<Outcome> {
        let key = (args.board_id, args.user_id);
        let mut changes = Vec::new();
        if let Some(role) = args.role {
            changes.push(BoardMember::role.set(role));
        }
        if let Some(accepted) = args.accepted {
            changes.push(BoardMember::accepted.set(accepted));
        }
        if !ctx.update::<BoardMember>(&key, changes).await? {
            return Err(engine::Error::mutator_failed("no such membership"));
        }
        Ok(Outcome::new())
    }

    #[engine::args]
    pub(crate) struct BoardId {
        pub board_id: String,
    }

    /// Accept the actor's own invitation onto a board.
    #[engine::mutator]
    pub(crate) async fn accept(ctx: &mut MutatorCtx<'_>, args: BoardId) -> Result<Outcome> {
        let key = (args.board_id, ctx.actor().user_id.clone());
        if !ctx.update::<BoardMember>(&key, [BoardMember::accepted.set(true)]).await? {
            return Err(engine::Error::mutator_failed("no such invitation"));
        }
        Ok(Outcome::new())
    }

    /// Delete the actor's own membership of a board: declining, or leaving.
    #[engine::mutator]
    pub(crate) async fn leave(ctx: &mut MutatorCtx<'_>, args: BoardId) -> Result<Outcome> {
        let key = (args.board_id, ctx.actor().user_id.clone());
        ctx.delete::<BoardMember>(&key).await?;
        Ok(Outcome::new())
    }

    #[engine::args]
    pub(crate) struct AddCard {
        pub id: String,
        pub board_id: String,
    }

    /// Add a card to a board.
    #[engine::mutator]
    pub(crate) async fn add_card(ctx: &mut MutatorCtx<'_>, args: AddCard) -> Result<Outcome> {
        ctx.insert(&Card { id: args.id, board_id: args.board_id, title: "c".into() }).await?;
        Ok(Outcome::new())
    }

    pub(crate) fn app() -> engine::App {
        engine::app! {
            tables: [Board, BoardMember, Card],
            mutators: [create_board, invite, set_member, accept, leave, add_card],
            sync_rules: rules,
        }
    }
}

/// A server of the test app on a real port, serving at most `bound` buckets to one actor.
async fn server(db: &TestDb, bound: usize) -> TestServer {
    let store = db.store(engine::storage::StoreLimits::default().buckets_per_actor(bound));
    TestServer::start(db, move |b| b.app(app::app()).storage(store)).await
}

/// Alice's board `b` with card `c1`, and Bob invited onto it as `role`.
async fn invited(server: &TestServer, role: &str) {
    applied(&push(server, "alice", 1, "create_board", json!({"id": "b"})).await);
    applied(&push(server, "alice", 2, "add_card", json!({"id": "c1", "board_id": "b"})).await);
    applied(&push(server, "alice", 3, "invite", json!({"board_id": "b", "user_id": "bob", "role": role})).await);
}

/// Whether `rows` hold `user`'s membership of board `board`, and whether it is accepted.
fn membership(rows: &[(String, Value)], board: &str, user: &str) -> Option<bool> {
    rows.iter()
        .find(|(t, row)| t == "board_members" && row["board_id"] == board && row["user_id"] == user)
        .map(|(_, row)| row["accepted"] == true)
}

#[tokio::test]
async fn an_invitation_grants_nothing_until_its_member_accepts_it() {
    let db = TestDb::new().await;
    let server = server(&db, 10_000).await;
    invited(&server, "editor").await;

    // Bob sees his invitation, and nothing of the board.
    let rows = pulled(&server, "bob").await;
    assert_eq!(membership(&rows, "b", "bob"), Some(false), "the invitee reads its invitation");
    assert!(!has(&rows, "boards", "b") && !has(&rows, "cards", "c1"), "a pending invitation gives no rows: {rows:?}");
    // Nor may he write there.
    forbidden(&push(&server, "bob", 1, "add_card", json!({"id": "c2", "board_id": "b"})).await, &[]);

    // Accepting grants the board, its rows and the role's writes.
    applied(&push(&server, "bob", 2, "accept", json!({"board_id": "b"})).await);
    let rows = pulled(&server, "bob").await;
    assert_eq!(membership(&rows, "b", "bob"), Some(true));
    assert!(has(&rows, "boards", "b") && has(&rows, "cards", "c1"), "{rows:?}");
    applied(&push(&server, "bob", 3, "add_card", json!({"id": "c2", "board_id": "b"})).await);
    assert!(has(&pulled(&server, "alice").await, "cards", "c2"));
}

#[tokio::test]
async fn an_invitee_changes_nothing_of_its_membership_but_the_acceptance() {
    let db = TestDb::new().await;
    let server = server(&db, 10_000).await;
    invited(&server, "viewer").await;
    let set = |role: Option<&str>, accepted: Option<bool>| json!({"board_id": "b", "user_id": "bob", "role": role, "accepted": accepted});
    // Not its role, not with the acceptance, not before it.
    forbidden(&push(&server, "bob", 1, "set_member", set(Some("owner"), None)).await, &[]);
    forbidden(&push(&server, "bob", 2, "set_member", set(Some("owner"), Some(true))).await, &[]);
    // Nobody accepts another's invitation.
    let carol = push(&server, "carol", 1, "set_member", set(None, Some(true))).await;
    assert_eq!(carol["status"], "rejected", "{carol}");
    let rows = pulled(&server, "bob").await;
    assert_eq!(membership(&rows, "b", "bob"), Some(false), "still pending");
    assert!(!has(&rows, "boards", "b"));

    applied(&push(&server, "bob", 3, "set_member", set(None, Some(true))).await);
    // Accepted, a viewer neither raises its role nor writes cards.
    forbidden(&push(&server, "bob", 4, "set_member", set(Some("owner"), None)).await, &[]);
    forbidden(&push(&server, "bob", 5, "add_card", json!({"id": "c2", "board_id": "b"})).await, &[]);
    let rows = pulled(&server, "alice").await;
    let bob = rows.iter().find(|(t, row)| t == "board_members" && row["user_id"] == "bob").unwrap();
    assert_eq!((bob.1["role"].as_str(), bob.1["accepted"].as_bool()), (Some("viewer"), Some(true)));
}

#[tokio::test]
async fn only_its_member_accepts_an_invitation() {
    let db = TestDb::new().await;
    let server = server(&db, 10_000).await;
    invited(&server, "viewer").await;
    let accepts = "accepts another member's invitation to a bucket of rule `boards`";
    // The owner, who may write every membership of the board, accepts for no one: not Bob's
    // invitation, not a membership written accepted from the start.
    let set = json!({"board_id": "b", "user_id": "bob", "accepted": true});
    assert!(forbidden(&push(&server, "alice", 4, "set_member", set).await, &[]).contains(accepts));
    let carol = json!({"board_id": "b", "user_id": "carol", "role": "editor", "accepted": true});
    assert!(forbidden(&push(&server, "alice", 5, "invite", carol).await, &[]).contains(accepts));
    assert_eq!(membership(&pulled(&server, "bob").await, "b", "bob"), Some(false), "still pending");
    assert_eq!(membership(&pulled(&server, "carol").await, "b", "carol"), None);
    assert!(!has(&pulled(&server, "carol").await, "boards", "b"), "carol holds nothing of the board");

    // Once Bob has accepted, the owner changes his role and the acceptance stays.
    applied(&push(&server, "bob", 1, "accept", json!({"board_id": "b"})).await);
    applied(
        &push(&server, "alice", 6, "set_member", json!({"board_id": "b", "user_id": "bob", "role": "editor"})).await,
    );
    assert_eq!(membership(&pulled(&server, "bob").await, "b", "bob"), Some(true));
}

#[tokio::test]
async fn an_invitee_declines_and_a_member_leaves() {
    let db = TestDb::new().await;
    let server = server(&db, 10_000).await;
    invited(&server, "editor").await;
    // Declining deletes the invitation.
    applied(&push(&server, "bob", 1, "leave", json!({"board_id": "b"})).await);
    assert_eq!(membership(&pulled(&server, "bob").await, "b", "bob"), None);
    assert_eq!(membership(&pulled(&server, "alice").await, "b", "bob"), None, "the owner sees it gone");

    // Invited again, accepted, then left: the board goes with the membership.
    applied(&push(&server, "alice", 4, "invite", json!({"board_id": "b", "user_id": "bob", "role": "editor"})).await);
    applied(&push(&server, "bob", 2, "accept", json!({"board_id": "b"})).await);
    assert!(has(&pulled(&server, "bob").await, "cards", "c1"));
    applied(&push(&server, "bob", 3, "leave", json!({"board_id": "b"})).await);
    let rows = pulled(&server, "bob").await;
    assert!(!has(&rows, "boards", "b") && !has(&rows, "cards", "c1") && membership(&rows, "b", "bob").is_none());
}

#[tokio::test]
async fn a_pending_invitation_brings_no_pings() {
    use crate::support::ws::{Auth, Ws};
    let db = TestDb::new().await;
    let server = server(&db, 10_000).await;
    invited(&server, "editor").await;
    applied(&push(&server, "bob", 1, "create_board", json!({"id": "own"})).await);
    server.settle().await;
    let token = TestServer::token("bob");
    let mut socket = Ws::connect(server.addr, Auth::Header(&token)).await.unwrap();
    // The socket has read Bob's buckets once it sends his own board's presence.
    while socket.expect("presence_state", Duration::from_secs(5)).await["bucket"] != "boards/own" {}

    // A card on the board Bob is only invited to, then one on his own: only the second pings.
    applied(&push(&server, "alice", 4, "add_card", json!({"id": "c2", "board_id": "b"})).await);
    applied(&push(&server, "bob", 2, "add_card", json!({"id": "mine", "board_id": "own"})).await);
    loop {
        let ping = socket.expect("ping", Duration::from_secs(5)).await;
        assert_ne!(ping["bucket"], "boards/b", "a pending invitation pinged: {ping}");
        if ping["bucket"] == "boards/own" {
            break;
        }
    }
}

#[tokio::test]
async fn invitations_from_strangers_past_the_bound_leave_the_invitees_sync_as_it_was() {
    let db = TestDb::new().await;
    // Bob holds his invitations bucket and his one board: 2 of at most 3.
    let server = server(&db, 3).await;
    applied(&push(&server, "bob", 1, "create_board", json!({"id": "own"})).await);
    applied(&push(&server, "bob", 2, "add_card", json!({"id": "mine", "board_id": "own"})).await);
    for i in 0..6 {
        let stranger = format!("stranger{i}");
        let board = format!("spam{i}");
        applied(&push(&server, &stranger, 1, "create_board", json!({"id": board})).await);
        let invite = json!({"board_id": board, "user_id": "bob", "role": "owner"});
        applied(&push(&server, &stranger, 2, "invite", invite).await);
    }
    server.settle().await;
    let body = json!({"clientId": device("bob").1});
    let response = server.post("/sync/pull", Some("bob"), body.to_string()).await;
    assert_eq!(response.status(), StatusCode::OK);
    let page: Value = response.json().await.unwrap();
    assert!(page.get("bounded").is_none(), "invitations hold nothing: {page}");
    let rows = pulled(&server, "bob").await;
    assert!(has(&rows, "cards", "mine"));
    assert_eq!(rows.iter().filter(|(_, row)| row["accepted"] == false).count(), 6, "six invitations to answer");
    assert!(!has(&rows, "boards", "spam0"), "{rows:?}");
}

#[tokio::test]
async fn invitations_past_the_cap_are_refused_until_the_invitee_answers_some() {
    let db = TestDb::new().await;
    let limits = engine::storage::StoreLimits::default().pending_invitations(2);
    let store = db.store(limits);
    let server = TestServer::start(&db, move |b| b.app(app::app()).storage(store)).await;
    let invite = |board: &str| json!({"board_id": board, "user_id": "bob", "role": "editor"});
    for (i, stranger) in ["s0", "s1", "s2"].into_iter().enumerate() {
        applied(&push(&server, stranger, 1, "create_board", json!({"id": stranger})).await);
        let result = push(&server, stranger, 2, "invite", invite(stranger)).await;
        if i < 2 {
            applied(&result);
        } else {
            let detail = forbidden(&result, &[]);
            assert!(detail.contains("2 pending invitations of `boards`"), "{detail}");
        }
    }
    // Declining one makes room; an accepted membership is no longer pending.
    applied(&push(&server, "bob", 1, "leave", json!({"board_id": "s0"})).await);
    applied(&push(&server, "s2", 3, "invite", invite("s2")).await);
    applied(&push(&server, "bob", 2, "accept", json!({"board_id": "s1"})).await);
    applied(&push(&server, "s0", 3, "invite", invite("s0")).await);
    applied(&push(&server, "s0", 4, "create_board", json!({"id": "s0b"})).await);
    forbidden(&push(&server, "s0", 5, "invite", invite("s0b")).await, &[]);
}

/// Invitations sent at once by many strangers are counted one after another: none of them sees
/// the member's count before another's invitation is in it, so the cap holds under concurrency.
#[tokio::test]
async fn invitations_sent_at_once_never_pass_the_cap() {
    let db = TestDb::new().await;
    let limits = engine::storage::StoreLimits::default().pending_invitations(3);
    let store = db.store(limits);
    let server = TestServer::start(&db, move |b| b.app(app::app()).storage(store)).await;
    let strangers: Vec<String> = (0..16).map(|i| format!("t{i}")).collect();
    for stranger in &strangers {
        applied(&push(&server, stranger, 1, "create_board", json!({"id": stranger})).await);
    }
    let invites = strangers.iter().map(|stranger| {
        push(&server, stranger, 2, "invite", json!({"board_id": stranger, "user_id": "bob", "role": "editor"}))
    });
    let results = futures_util::future::join_all(invites).await;
    let sent = results.iter().filter(|result| result["status"] == "applied").count();
    assert_eq!(sent, 3, "as many invitations as the cap: {results:?}");
    for refused in results.iter().filter(|result| result["status"] != "applied") {
        forbidden(refused, &[]);
    }
    let stored: i64 = sqlx::query_scalar("SELECT count(*) FROM board_members WHERE user_id = 'bob' AND NOT accepted")
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert_eq!(stored, 3, "as many pending invitations stored as the cap");
}
