//! Rows that `accept(open(...))` lets into a stranger's bucket, over real HTTP, with an inbox
//! app: anyone sends messages from their own outbox into anyone's inbox. An inbox keeps at most
//! `StoreLimits::accepted_rows` messages from one outbox: past it a send is refused `forbidden`,
//! however many are sent at once, until one of them is deleted; other senders, other
//! recipients and the inbox's own holder are not bounded by it.

use serde_json::{Value, json};

use crate::support::actors::{applied, forbidden, push};
use crate::support::{TestDb, TestServer};

pub(crate) mod app {
    use engine::{MutatorCtx, Outcome, Result};

    /// A message from one user to another.
    #[engine::table]
    pub(crate) struct Message {
        #[engine(primary_key)]
        pub id: String,
        pub sender: String,
        pub recipient: String,
        pub body: String,
    }

    #[engine::sync_rules]
    pub(crate) mod rules {
        use super::Message;

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

    #[engine::args]
    pub(crate) struct Send {
        pub id: String,
        pub to: String,
    }

    /// Send a message from the actor.
    #[engine::mutator]
    pub(crate) async fn send(ctx: &mut MutatorCtx<'_>, args: Send) -> Result<Outcome> {
        let sender = ctx.actor().user_id.clone();
        ctx.insert(&Message { id: args.id, sender, recipient: args.to, body: "hi".into() }).await?;
        Ok(Outcome::new())
    }

    #[engine::args]
    pub(crate) struct Edit {
        pub id: String,
        #[serde(default)]
        pub body: Option<String>,
        #[serde(default)]
        pub to: Option<String>,
    }

    /// Change a message's body, or send it to someone else instead, whichever is given.
    #[engine::mutator]
    pub(crate) async fn edit(ctx: &mut MutatorCtx<'_>, args: Edit) -> Result<Outcome> {
        let mut changes = Vec::new();
        changes.extend(args.body.map(|body| Message::body.set(body)));
        changes.extend(args.to.map(|to| Message::recipient.set(to)));
        ctx.update::<Message>(&args.id, changes).await?;
        Ok(Outcome::new())
    }

    #[engine::args]
    pub(crate) struct MessageId {
        pub id: String,
    }

    /// Delete a message.
    #[engine::mutator]
    pub(crate) async fn unsend(ctx: &mut MutatorCtx<'_>, args: MessageId) -> Result<Outcome> {
        ctx.delete::<Message>(&args.id).await?;
        Ok(Outcome::new())
    }

    pub(crate) fn app() -> engine::App {
        engine::app! {
            tables: [Message],
            mutators: [send, edit, unsend],
            sync_rules: rules,
        }
    }
}

/// A server of the inbox app keeping at most `bound` messages from one outbox in one inbox, with
/// no bound on one actor's requests in progress at once.
async fn server(db: &TestDb, bound: usize) -> TestServer {
    let store = db.store(engine::storage::StoreLimits::default().accepted_rows(bound));
    let limits = engine::limits::Limits::default().rate(0, 0).concurrent_per_actor(0);
    TestServer::start(db, move |b| b.app(app::app()).storage(store).limits(limits)).await
}

/// Send message `id` from `from` to `to`, as `from`'s mutation `n`.
async fn send(server: &TestServer, from: &str, n: u64, id: &str, to: &str) -> Value {
    push(server, from, n, "send", json!({"id": id, "to": to})).await
}

/// How many messages from `from` to `to` are stored.
async fn stored(db: &TestDb, from: &str, to: &str) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM messages WHERE sender = $1 AND recipient = $2")
        .bind(from)
        .bind(to)
        .fetch_one(&db.pool)
        .await
        .unwrap()
}

#[tokio::test]
async fn messages_past_the_bound_are_refused_until_one_is_deleted() {
    let db = TestDb::new().await;
    let server = server(&db, 3).await;
    for (n, id) in (1..).zip(["m1", "m2", "m3"]) {
        applied(&send(&server, "alice", n, id, "bob").await);
    }
    let detail = forbidden(&send(&server, "alice", 4, "m4", "bob").await, &[]);
    for words in ["rule `inbox`", "keeps 3 rows of `messages`", "rule `outbox`", "deleted"] {
        assert!(detail.contains(words), "the refusal says {words}: {detail}");
    }
    // A message readdressed to bob enters his inbox as a new one does.
    applied(&send(&server, "alice", 5, "m5", "carol").await);
    forbidden(&push(&server, "alice", 6, "edit", json!({"id": "m5", "to": "bob"})).await, &[]);
    // A message that stays in bob's inbox is not a new one there.
    applied(&push(&server, "alice", 7, "edit", json!({"id": "m1", "body": "hello"})).await);
    // Deleting one makes room for one.
    applied(&push(&server, "alice", 8, "unsend", json!({"id": "m2"})).await);
    applied(&push(&server, "alice", 9, "edit", json!({"id": "m5", "to": "bob"})).await);
    forbidden(&send(&server, "alice", 10, "m6", "bob").await, &[]);
    assert_eq!(stored(&db, "alice", "bob").await, 3);
}

#[tokio::test]
async fn the_bound_is_per_outbox_and_inbox_and_spares_the_holder() {
    let db = TestDb::new().await;
    let server = server(&db, 2).await;
    for (n, id) in (1..).zip(["a1", "a2"]) {
        applied(&send(&server, "alice", n, id, "bob").await);
    }
    forbidden(&send(&server, "alice", 3, "a3", "bob").await, &[]);
    // Another sender to bob, and alice to another recipient, each have room of their own.
    for (n, id) in (1..).zip(["c1", "c2"]) {
        applied(&send(&server, "carol", n, id, "bob").await);
    }
    for (n, id) in (4..).zip(["a4", "a5"]) {
        applied(&send(&server, "alice", n, id, "dave").await);
    }
    // Bob writes his own inbox as he likes: notes to himself are his, not a stranger's.
    for n in 1..=4 {
        applied(&send(&server, "bob", n, &format!("b{n}"), "bob").await);
    }
    assert_eq!(stored(&db, "alice", "bob").await, 2);
    assert_eq!(stored(&db, "carol", "bob").await, 2);
    assert_eq!(stored(&db, "bob", "bob").await, 4);
}

/// Messages sent at once from one outbox to one inbox are counted one after another: none of
/// them sees the inbox's count before another's message is in it, so the bound holds under
/// concurrency. Each comes from a device of its own, so that none waits for another's push.
#[tokio::test]
async fn messages_sent_at_once_never_pass_the_bound() {
    let db = TestDb::new().await;
    let server = server(&db, 3).await;
    let sends = (0..16_u64).map(|i| {
        let body = json!({"clientId": format!("0192f0e0-0000-7000-8000-{:012x}", 0xa000 + i), "mutations": [{
            "mutationId": 1,
            "clientMutationId": format!("0192f0e1-0001-7000-8000-{:012x}", 0xa000 + i),
            "name": "send",
            "args": {"id": format!("m{i}"), "to": "bob"},
        }]});
        let server = &server;
        async move {
            let response = server.post("/sync/push", Some("alice"), body.to_string()).await;
            let status = response.status();
            let body: Value = response.json().await.unwrap();
            assert_eq!(status, reqwest::StatusCode::OK, "{body}");
            body["results"][0].clone()
        }
    });
    let results = futures_util::future::join_all(sends).await;
    let sent = results.iter().filter(|result| result["status"] == "applied").count();
    assert_eq!(sent, 3, "as many messages as the bound: {results:?}");
    for refused in results.iter().filter(|result| result["status"] != "applied") {
        forbidden(refused, &[]);
    }
    assert_eq!(stored(&db, "alice", "bob").await, 3, "as many messages stored as the bound");
}

/// The same bound where the sending buckets are held through memberships: channels a user joins,
/// whose posts reach a recipient's inbox through `accept(open(Channel))`. A user holds several
/// channels, so a post can move from one to another while it stays in the inbox.
pub(crate) mod channels {
    use engine::{MutatorCtx, Outcome, Result};

    /// A channel.
    #[engine::table]
    pub(crate) struct Room {
        #[engine(primary_key)]
        pub id: String,
    }

    /// A user's membership of a channel.
    #[engine::table]
    pub(crate) struct ChannelMember {
        #[engine(primary_key)]
        pub channel_id: String,
        #[engine(primary_key)]
        pub user_id: String,
    }

    /// A post in a channel, addressed to one user.
    #[engine::table]
    pub(crate) struct Post {
        #[engine(primary_key)]
        pub id: String,
        pub channel_id: String,
        pub recipient: String,
    }

    #[engine::sync_rules]
    pub(crate) mod rules {
        use super::{ChannelMember, Post, Room};

        /// A channel and its posts, for its members, who write both.
        #[bucket(
            membership(ChannelMember::user_id == actor.user_id),
            data(
                Room::id == bucket.channel_id,
                ChannelMember::channel_id == bucket.channel_id,
                Post::channel_id == bucket.channel_id,
            ),
            write(Room, ChannelMember, Post),
        )]
        pub(crate) struct Channel {
            #[param(ChannelMember::channel_id)]
            pub channel_id: String,
        }

        /// The posts addressed to the actor, from any channel.
        #[bucket(data(Post::recipient == bucket.user_id), write(Post), accept(open(Channel)))]
        pub(crate) struct Inbox {
            #[param(actor.user_id)]
            pub user_id: String,
        }
    }

    #[engine::args]
    pub(crate) struct Join {
        pub channel_id: String,
    }

    /// Start channel `channel_id`, its first member the actor.
    #[engine::mutator]
    pub(crate) async fn join(ctx: &mut MutatorCtx<'_>, args: Join) -> Result<Outcome> {
        let user_id = ctx.actor().user_id.clone();
        ctx.insert(&Room { id: args.channel_id.clone() }).await?;
        ctx.insert(&ChannelMember { channel_id: args.channel_id, user_id }).await?;
        Ok(Outcome::new())
    }

    #[engine::args]
    pub(crate) struct PostTo {
        pub id: String,
        pub channel_id: String,
        pub to: String,
    }

    /// Post `id` in a channel, to a user.
    #[engine::mutator]
    pub(crate) async fn post(ctx: &mut MutatorCtx<'_>, args: PostTo) -> Result<Outcome> {
        ctx.insert(&Post { id: args.id, channel_id: args.channel_id, recipient: args.to }).await?;
        Ok(Outcome::new())
    }

    #[engine::args]
    pub(crate) struct Move {
        pub id: String,
        pub channel_id: String,
    }

    /// Move post `id` to another channel.
    #[engine::mutator]
    pub(crate) async fn move_post(ctx: &mut MutatorCtx<'_>, args: Move) -> Result<Outcome> {
        ctx.update::<Post>(&args.id, [Post::channel_id.set(args.channel_id)]).await?;
        Ok(Outcome::new())
    }

    pub(crate) fn app() -> engine::App {
        engine::app! {
            tables: [Room, ChannelMember, Post],
            mutators: [join, post, move_post],
            sync_rules: rules,
        }
    }
}

/// A post moved from one of the sender's channels to another while it stays in the recipient's
/// inbox is counted in the channel it enters, as a new post there is.
#[tokio::test]
async fn a_row_moved_to_another_source_is_counted_there() {
    let db = TestDb::new().await;
    let store = db.store(engine::storage::StoreLimits::default().accepted_rows(1));
    let server = TestServer::start(&db, move |b| b.app(channels::app()).storage(store)).await;
    let post = |n, id: &str, channel: &str| {
        push(&server, "alice", n, "post", json!({"id": id, "channel_id": channel, "to": "bob"}))
    };
    applied(&push(&server, "alice", 1, "join", json!({"channel_id": "c1"})).await);
    applied(&push(&server, "alice", 2, "join", json!({"channel_id": "c2"})).await);
    applied(&post(3, "p1", "c1").await);
    forbidden(&post(4, "p2", "c1").await, &[]);
    // The bound is per channel: c2 has room for one.
    applied(&post(5, "p2", "c2").await);
    // p1 moved into c2 would be a second post from c2 in bob's inbox.
    forbidden(&push(&server, "alice", 6, "move_post", json!({"id": "p1", "channel_id": "c2"})).await, &[]);
    let in_c2: i64 = sqlx::query_scalar("SELECT count(*) FROM posts WHERE channel_id = 'c2' AND recipient = 'bob'")
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert_eq!(in_c2, 1);
}

/// Rooms whose seats are invitations (`invite(Seat::accepted)`), and clubs: a seat lies in its
/// room, its club and its user's `mine` bucket, which takes rows from clubs and rooms (in that
/// order) that its writer does not hold (`accept(open(...))`). A seat of another kind than
/// `member` is no invitation.
pub(crate) mod seats {
    use engine::{MutatorCtx, Outcome, Result};

    /// A seat of a user in a room, in a club or neither.
    #[engine::table]
    pub(crate) struct Seat {
        #[engine(primary_key)]
        pub id: String,
        pub room: String,
        pub club: Option<String>,
        pub user_id: String,
        pub kind: String,
        pub accepted: bool,
    }

    /// A room, as its first member starts it.
    #[engine::table]
    pub(crate) struct Hall {
        #[engine(primary_key)]
        pub id: String,
    }

    /// A club, as its first member starts it.
    #[engine::table]
    pub(crate) struct Clubhouse {
        #[engine(primary_key)]
        pub id: String,
    }

    /// Who is in which club.
    #[engine::table]
    pub(crate) struct ClubMember {
        #[engine(primary_key)]
        pub club: String,
        #[engine(primary_key)]
        pub user_id: String,
    }

    #[engine::sync_rules]
    pub(crate) mod rules {
        use super::{ClubMember, Clubhouse, Hall, Seat};

        /// A room, for the members who accepted their seat in it.
        #[bucket(
            membership(Seat::user_id == actor.user_id && Seat::kind == "member"),
            data(Hall::id == bucket.room, Seat::room == bucket.room),
            write(Hall, Seat),
            invite(Seat::accepted),
        )]
        pub(crate) struct Room {
            #[param(Seat::room)]
            pub room: String,
        }

        /// A club, whose members write its seats.
        #[bucket(
            membership(ClubMember::user_id == actor.user_id),
            data(Clubhouse::id == bucket.club, ClubMember::club == bucket.club, Seat::club == bucket.club),
            write(Clubhouse, ClubMember, Seat),
        )]
        pub(crate) struct Club {
            #[param(ClubMember::club)]
            pub club: String,
        }

        /// The actor's seats and clubs, and seats from any club or room.
        #[bucket(
            data(Seat::user_id == bucket.user_id, ClubMember::user_id == bucket.user_id),
            write(Seat, ClubMember),
            accept(open(Club), open(Room)),
        )]
        pub(crate) struct Mine {
            #[param(actor.user_id)]
            pub user_id: String,
        }
    }

    #[engine::args]
    pub(crate) struct Place {
        pub id: String,
        pub room: String,
        #[serde(default)]
        pub club: Option<String>,
        pub user_id: String,
        pub kind: String,
        pub accepted: bool,
    }

    /// Write a seat as given.
    #[engine::mutator]
    pub(crate) async fn place(ctx: &mut MutatorCtx<'_>, args: Place) -> Result<Outcome> {
        let Place { id, room, club, user_id, kind, accepted } = args;
        ctx.insert(&Seat { id, room, club, user_id, kind, accepted }).await?;
        Ok(Outcome::new())
    }

    #[engine::args]
    pub(crate) struct Start {
        pub id: String,
    }

    /// Start room `id`, the actor its first member.
    #[engine::mutator]
    pub(crate) async fn start_room(ctx: &mut MutatorCtx<'_>, args: Start) -> Result<Outcome> {
        let user_id = ctx.actor().user_id.clone();
        ctx.insert(&Hall { id: args.id.clone() }).await?;
        let id = format!("{}-{user_id}", args.id);
        ctx.insert(&Seat { id, room: args.id, club: None, user_id, kind: "member".into(), accepted: true }).await?;
        Ok(Outcome::new())
    }

    /// Start club `id`, the actor its first member.
    #[engine::mutator]
    pub(crate) async fn start_club(ctx: &mut MutatorCtx<'_>, args: Start) -> Result<Outcome> {
        let user_id = ctx.actor().user_id.clone();
        ctx.insert(&Clubhouse { id: args.id.clone() }).await?;
        ctx.insert(&ClubMember { club: args.id, user_id }).await?;
        Ok(Outcome::new())
    }

    pub(crate) fn app() -> engine::App {
        engine::app! {
            tables: [Hall, Clubhouse, Seat, ClubMember],
            mutators: [place, start_room, start_club],
            sync_rules: rules,
        }
    }
}

/// A server of the seats app keeping at most `bound` seats from one room or club in one `mine`.
async fn seats_server(db: &TestDb, bound: usize) -> TestServer {
    let store = db.store(engine::storage::StoreLimits::default().accepted_rows(bound).pending_invitations(10));
    TestServer::start(db, move |b| b.app(seats::app()).storage(store)).await
}

/// Alice's seat `id` placed for `user` in room `room` (and club `club`), of `kind`, pending.
async fn place(server: &TestServer, n: u64, id: &str, room: &str, club: Option<&str>, kind: &str) -> Value {
    let seat = json!({"id": id, "room": room, "club": club, "user_id": "bob", "kind": kind, "accepted": false});
    push(server, "alice", n, "place", seat).await
}

/// Pending invitations into a room are bounded per member, not by the room's accepted rows:
/// they leave the room's room for other rows.
#[tokio::test]
async fn pending_invitations_take_no_room_from_accepted_rows() {
    let db = TestDb::new().await;
    let server = seats_server(&db, 2).await;
    applied(&push(&server, "alice", 1, "start_room", json!({"id": "r"})).await);
    applied(&place(&server, 2, "i1", "r", None, "member").await);
    applied(&place(&server, 3, "i2", "r", None, "member").await);
    applied(&place(&server, 4, "i3", "r", None, "member").await);
    // Guests' seats are no invitations: two fit.
    applied(&place(&server, 5, "g1", "r", None, "guest").await);
    applied(&place(&server, 6, "g2", "r", None, "guest").await);
    forbidden(&place(&server, 7, "g3", "r", None, "guest").await, &[]);
}

/// A pending invitation into a room is no invitation into a club: the club's seats in one
/// `mine` are bounded, invitations or not.
#[tokio::test]
async fn an_invitation_is_exempt_only_under_its_own_rule() {
    let db = TestDb::new().await;
    let server = seats_server(&db, 2).await;
    applied(&push(&server, "alice", 1, "start_club", json!({"id": "k"})).await);
    for (n, room) in [(2, "r1"), (3, "r2"), (4, "r3")] {
        applied(&push(&server, "alice", n, "start_room", json!({"id": room})).await);
    }
    applied(&place(&server, 5, "i1", "r1", Some("k"), "member").await);
    applied(&place(&server, 6, "i2", "r2", Some("k"), "member").await);
    forbidden(&place(&server, 7, "i3", "r3", Some("k"), "member").await, &[]);
    // Without the club, the invitation is the room's alone.
    applied(&place(&server, 8, "i3", "r3", None, "member").await);
}
