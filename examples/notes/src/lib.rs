//! The notes app: lists owned by one user and shared with others, and notes with collaborative
//! bodies and an image each. It is the quickstart and the app every test of the engine runs
//! against.
//!
//! - Tables: [`List`], [`ListMember`], [`Note`].
//! - Sync rules ([`rules`]): `invitations` (the actor's memberships it has not accepted yet),
//!   `memberships` (those it has accepted, with their lists' titles: the index of the lists it
//!   holds), `own` (the lists the actor owns and their memberships) and `shared` (every list the actor
//!   is an accepted member of, with its notes and members). A share is an invitation: the list
//!   reaches its member once the member accepts it (`accept_list`). Notes lie only
//!   in their list's bucket, so a member removed from a list stops receiving its notes. The
//!   roles are the engine's to enforce: `owner` and `editor` members may write notes, only the
//!   owner may change the list or its memberships (share, unshare, archive), a `viewer` reads.
//!   Any member but the owner may leave a list (`leave`).
//! - Mutators ([`mutators`]): `create_list`, `rename_list`, `share_list`, `accept_list`,
//!   `unshare_list`, `leave_list`, `add_note`, `update_note`, `edit_note_body`, `set_note_image`, `move_note`,
//!   `delete_note`, `purge_note`.
//! - Blobs ([`blobs`]): a note's image is a blob (`docs/protocol.md#blobs`), which whoever can
//!   read the note may download; a member removed from the list loses it with the note.
//! - Background jobs ([`jobs`]): `list_shared`, enqueued by `share_list` for a new member.

pub mod jobs;
pub mod mutators;

use engine::{BlobKey, CrdtText, Timestamp};

/// A list of notes, owned by one user.
#[engine::table]
#[derive(Debug, Clone, PartialEq)]
pub struct List {
    #[engine(primary_key)]
    pub id: String,
    /// The owner id of the user who created the list.
    #[engine(owner)]
    pub owner_id: String,
    pub title: String,
    pub archived: bool,
}

/// A user's membership of a list: the owner's own (role `owner`) and every share.
#[engine::table]
#[derive(Debug, Clone, PartialEq)]
pub struct ListMember {
    #[engine(primary_key)]
    pub list_id: String,
    #[engine(primary_key)]
    pub user_id: String,
    /// The owner id of the list's owner.
    #[engine(owner)]
    pub owner_id: String,
    /// `owner`, `editor` or `viewer`.
    pub role: String,
    /// Whether the member accepted the share: a share is an invitation, which grants the list
    /// once its member accepts it (`accept_list`). The owner's own membership is accepted.
    pub accepted: bool,
    /// The user id of who shared the list (the owner's own, for the owner's membership).
    pub invited_by: String,
    /// The list's title: what an invitee reads of the list before it accepts, and what a
    /// member's index of its lists shows (`memberships`). Set when the list is shared, and kept
    /// the list's by `rename_list`.
    pub title: String,
}

/// A note in a list; its body is collaborative text.
#[engine::table(merge = "field")]
#[derive(Debug, Clone, PartialEq)]
pub struct Note {
    #[engine(primary_key)]
    pub id: String,
    /// The owner id of the user who added the note.
    #[engine(owner)]
    pub owner_id: String,
    pub list_id: String,
    pub title: String,
    pub done: bool,
    /// Sort order within the list, ascending.
    pub position: i64,
    pub body: CrdtText,
    /// An image attached to the note: the key of its bytes, which are uploaded apart.
    pub image: Option<BlobKey>,
    #[engine(soft_delete)]
    pub deleted_at: Option<Timestamp>,
}

/// Who sees what.
#[engine::sync_rules]
pub mod rules {
    use super::{List, ListMember, Note};

    /// The actor's pending invitations: its memberships not yet accepted, with the list's title
    /// and who shared it. The owner of a list puts an invitation here through `Shared`'s owner
    /// role; accepting moves it to the list's `Shared` bucket. Accepted memberships are not
    /// here, so writes to the actor's lists do not ping it.
    #[bucket(
        data(ListMember::user_id == bucket.user_id && ListMember::accepted == false),
        accept(open(Shared)),
    )]
    #[derive(Debug, Clone, PartialEq, Eq, Hash)]
    pub struct Invitations {
        #[param(actor.user_id)]
        pub user_id: String,
    }

    /// The actor's accepted memberships, each with its list's title: with `Own`, the index of
    /// every list the actor holds, which a client can sync without the lists' `Shared` buckets
    /// and their notes. Nothing is written through it: the owner of a list writes its
    /// memberships through `Shared`'s owner role (keeping their title the list's, `rename_list`),
    /// which is what lets them in here; a member cannot change its own role or title.
    #[bucket(
        data(ListMember::user_id == bucket.user_id && ListMember::accepted == true),
        accept(open(Shared)),
    )]
    #[derive(Debug, Clone, PartialEq, Eq, Hash)]
    pub struct Memberships {
        #[param(actor.user_id)]
        pub user_id: String,
    }

    /// The lists the actor owns and the memberships of its lists. The owner writes its lists
    /// here; memberships only through `Shared`'s owner role.
    #[bucket(data(List::owner_id == bucket.owner_id, ListMember::owner_id == bucket.owner_id), write(List))]
    #[derive(Debug, Clone, PartialEq, Eq, Hash)]
    pub struct Own {
        #[param(actor.owner_id)]
        pub owner_id: String,
    }

    /// Every list the actor is a member of: the list, its notes and its members. Owners and
    /// editors write notes; only the owner changes the list and its memberships. A member may
    /// delete its own membership and nothing else of it (`leave`): it cannot raise its own role.
    /// A share is an invitation (`invite`): it grants nothing (no rows, pings or writes, no part
    /// of the bucket bound) until its member accepts it, the one change of its membership the
    /// member may make; deleting it declines. A list is its `lists` row: nobody is shared a list
    /// that has none.
    #[bucket(
        membership(ListMember::user_id == actor.user_id),
        data(
            List::id == bucket.list_id,
            Note::list_id == bucket.list_id,
            ListMember::list_id == bucket.list_id,
        ),
        write(
            Note: ListMember::role == "owner" || ListMember::role == "editor",
            List: ListMember::role == "owner",
            ListMember: ListMember::role == "owner",
        ),
        leave,
        invite(ListMember::accepted),
        anchor(List::id == bucket.list_id),
    )]
    #[derive(Debug, Clone, PartialEq, Eq, Hash)]
    pub struct Shared {
        #[param(ListMember::list_id)]
        pub list_id: String,
    }
}

/// The store bounds the notes app serves with: each table's rows bounded to what the app
/// writes in them (a list's title, a membership, a note's title and collaborative body), not the
/// engine's 1 MiB. A member's rows reach every other member of the list, whose first sync would
/// otherwise carry whatever one member wrote (20 notes of 1 MB titles were 20 MB for each).
/// `accepted_rows` keeps the engine's default: what `accept(open(Shared))` lets into a user's
/// `Invitations` and `Memberships` from one list is that user's one membership row of it, and a
/// pending one is bounded by `pending_invitations` instead.
#[cfg(feature = "server")]
pub fn store_limits() -> engine::server::storage::StoreLimits {
    engine::server::storage::StoreLimits::default()
        .table_row_bytes("lists", 4 * 1024)
        .table_row_bytes("list_members", 2 * 1024)
        .table_row_bytes("notes", 64 * 1024)
        .pending_invitations(PENDING_INVITATIONS)
}

/// The most shares one user has not yet accepted or declined: past it, sharing another list with
/// them is refused, so strangers cannot fill a user's invitations without bound.
pub const PENDING_INVITATIONS: usize = 50;

/// The presence the notes app serves with: a connection silent for 6 s leaves, not after the
/// engine's 30 s, so a member whose network is gone leaves the others' "here" list within
/// seconds. A live client need not heartbeat faster for it: the server pings a socket silent for
/// 2 s, and a WebSocket answers that by itself (`docs/protocol.md#presence`).
#[cfg(feature = "server")]
pub fn presence() -> engine::server::PresenceSettings {
    let mut presence = engine::server::PresenceSettings::default();
    presence.heartbeat_timeout = std::time::Duration::from_secs(6);
    presence
}

/// The blobs the notes app serves with: files in `dir` behind URLs signed with `secret`, of at
/// most 10 MiB each (an image attached to a note, not the engine's 64 MiB).
#[cfg(feature = "server")]
pub fn blobs(dir: impl Into<std::path::PathBuf>, secret: impl AsRef<[u8]>) -> engine::blob::Blobs {
    engine::blob::Blobs::new(engine::blob::local_fs(dir, secret)).max_size(BLOB_MAX_SIZE)
}

/// The largest image the notes app takes, in bytes.
pub const BLOB_MAX_SIZE: u64 = 10 << 20;

/// The notes app.
pub fn app() -> engine::App {
    use mutators::*;
    engine::app! {
        tables: [List, ListMember, Note],
        mutators: [
            create_list,
            rename_list,
            share_list,
            accept_list,
            unshare_list,
            leave_list,
            add_note,
            update_note,
            edit_note_body,
            set_note_image,
            move_note,
            delete_note,
            purge_note,
        ],
        sync_rules: rules,
    }
}
