//! The notes app's mutators. Each is one business operation in one transaction; the server runs
//! it authoritatively, the client optimistically. Write authorization comes from the sync rules:
//! a mutator cannot put a row where its actor cannot read, nor write what the actor's role in the
//! list does not allow (`write(...)` of the `shared` rule), whatever it tries.

use engine::{BlobKey, CrdtText, CrdtUpdate, Error, MutatorCtx, Outcome, Result};

use crate::{List, ListMember, Note};

/// The id the client proposed, or a fresh one when it proposed none (absent or empty); the
/// outcome reports the id as `serverId`, and a fresh one also in the reconciliation.
fn resolve_id(ctx: &mut MutatorCtx<'_>, proposed: Option<String>) -> (String, Outcome) {
    match proposed.filter(|id| !id.is_empty()) {
        Some(id) => (id.clone(), Outcome::new().server_id(id)),
        None => {
            let id = ctx.new_id();
            (id.clone(), Outcome::new().server_id(id.clone()).reconcile("", id))
        }
    }
}

/// A role a list can be shared with.
#[engine::args]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum ShareRole {
    /// May edit the list's notes.
    Editor,
    /// May read the list.
    Viewer,
}

impl ShareRole {
    fn as_str(self) -> &'static str {
        match self {
            ShareRole::Editor => "editor",
            ShareRole::Viewer => "viewer",
        }
    }
}

/// The role of the list owner's own membership.
pub const OWNER_ROLE: &str = "owner";

/// Arguments of `create_list`.
#[engine::args]
#[derive(Debug, Clone)]
pub struct CreateList {
    /// The list's id; a fresh one is chosen when absent or empty.
    #[serde(default)]
    pub id: Option<String>,
    pub title: String,
}

/// Create a list owned by the actor, with the owner's membership.
#[engine::mutator]
pub async fn create_list(ctx: &mut MutatorCtx<'_>, args: CreateList) -> Result<Outcome> {
    let (id, outcome) = resolve_id(ctx, args.id);
    let owner_id = ctx.actor().owner_id.clone();
    let user_id = ctx.actor().user_id.clone();
    let list = List { id: id.clone(), owner_id: owner_id.clone(), title: args.title.clone(), archived: false };
    ctx.insert(&list).await?;
    let member = ListMember {
        list_id: id,
        user_id: user_id.clone(),
        owner_id,
        role: OWNER_ROLE.to_owned(),
        accepted: true,
        invited_by: user_id,
        title: args.title,
    };
    ctx.insert(&member).await?;
    Ok(outcome)
}

/// The list `list_id`, if the actor owns it.
async fn owned_list(ctx: &mut MutatorCtx<'_>, list_id: &String, verb: &str) -> Result<List> {
    let list = ctx.get::<List>(list_id).await?.ok_or_else(|| Error::mutator_failed(format!("no list `{list_id}`")))?;
    if list.owner_id != ctx.actor().owner_id {
        return Err(Error::forbidden(format!("only the list's owner may {verb} it")));
    }
    Ok(list)
}

/// Arguments of `rename_list`.
#[engine::args]
#[derive(Debug, Clone)]
pub struct RenameList {
    pub id: String,
    pub title: String,
}

/// Rename a list, and its memberships' copy of the title its members' index shows. Only the
/// list's owner may.
#[engine::mutator]
pub async fn rename_list(ctx: &mut MutatorCtx<'_>, args: RenameList) -> Result<Outcome> {
    owned_list(ctx, &args.id, "rename").await?;
    ctx.update::<List>(&args.id, [List::title.set(args.title.clone())]).await?;
    for member in ctx.select(ListMember::list_id.eq(args.id.clone())).await? {
        let key = (member.list_id, member.user_id);
        ctx.update::<ListMember>(&key, [ListMember::title.set(args.title.clone())]).await?;
    }
    Ok(Outcome::new().server_id(args.id))
}

/// Arguments of `share_list`.
#[engine::args]
#[derive(Debug, Clone)]
pub struct ShareList {
    pub list_id: String,
    /// The user to share with.
    pub user_id: String,
    pub role: ShareRole,
}

/// Share a list with a user, or change their role. Only the list's owner may. A new share is
/// an invitation: the list reaches the user once they accept it (`accept_list`).
#[engine::mutator]
pub async fn share_list(ctx: &mut MutatorCtx<'_>, args: ShareList) -> Result<Outcome> {
    let list = owned_list(ctx, &args.list_id, "share").await?;
    let key = (args.list_id.clone(), args.user_id.clone());
    match ctx.get::<ListMember>(&key).await? {
        Some(member) if member.role == OWNER_ROLE => {
            return Err(Error::mutator_failed("the owner's membership cannot change"));
        }
        Some(_) => {
            ctx.update::<ListMember>(&key, [ListMember::role.set(args.role.as_str())]).await?;
        }
        None => {
            let shared = crate::jobs::ListShared {
                list_id: args.list_id.clone(),
                user_id: args.user_id.clone(),
                shared_by: ctx.actor().user_id.clone(),
            };
            let member = ListMember {
                list_id: args.list_id.clone(),
                user_id: args.user_id,
                owner_id: list.owner_id,
                role: args.role.as_str().to_owned(),
                accepted: false,
                invited_by: ctx.actor().user_id.clone(),
                title: list.title,
            };
            ctx.insert(&member).await?;
            // The new member hears of it once the share commits (a background job).
            ctx.enqueue(crate::jobs::LIST_SHARED, &shared).await?;
        }
    }
    Ok(Outcome::new().server_id(args.list_id))
}

/// Arguments of `accept_list`.
#[engine::args]
#[derive(Debug, Clone)]
pub struct AcceptList {
    pub list_id: String,
}

/// Accept the actor's invitation to a list: the list, its notes and its members reach the actor
/// from then on. Declining is `leave_list`.
#[engine::mutator]
pub async fn accept_list(ctx: &mut MutatorCtx<'_>, args: AcceptList) -> Result<Outcome> {
    let key = (args.list_id.clone(), ctx.actor().user_id.clone());
    match ctx.get::<ListMember>(&key).await? {
        // Accepting twice (a retry from another device) changes nothing.
        Some(member) if member.accepted => {}
        Some(_) => {
            ctx.update::<ListMember>(&key, [ListMember::accepted.set(true)]).await?;
        }
        None => return Err(Error::mutator_failed("you are not invited to the list")),
    }
    Ok(Outcome::new().server_id(args.list_id))
}

/// Arguments of `unshare_list`.
#[engine::args]
#[derive(Debug, Clone)]
pub struct UnshareList {
    pub list_id: String,
    pub user_id: String,
}

/// Take a user's membership of a list away. Only the list's owner may.
#[engine::mutator]
pub async fn unshare_list(ctx: &mut MutatorCtx<'_>, args: UnshareList) -> Result<Outcome> {
    owned_list(ctx, &args.list_id, "unshare").await?;
    let key = (args.list_id.clone(), args.user_id);
    match ctx.get::<ListMember>(&key).await? {
        Some(member) if member.role == OWNER_ROLE => {
            Err(Error::mutator_failed("the owner's membership cannot be removed"))
        }
        Some(_) => {
            ctx.delete::<ListMember>(&key).await?;
            Ok(Outcome::new().server_id(args.list_id))
        }
        None => Err(Error::mutator_failed("that user is not a member of the list")),
    }
}

/// Arguments of `leave_list`.
#[engine::args]
#[derive(Debug, Clone)]
pub struct LeaveList {
    pub list_id: String,
}

/// Take the actor's own membership of a list away: leaving it or, before accepting, declining
/// the invitation. The owner may not: a list always has its owner's membership (the rules'
/// `leave` would let the owner delete it, this mutator does not).
#[engine::mutator]
pub async fn leave_list(ctx: &mut MutatorCtx<'_>, args: LeaveList) -> Result<Outcome> {
    let key = (args.list_id.clone(), ctx.actor().user_id.clone());
    match ctx.get::<ListMember>(&key).await? {
        Some(member) if member.role == OWNER_ROLE => {
            Err(Error::mutator_failed("the owner cannot leave their own list"))
        }
        Some(_) => {
            ctx.delete::<ListMember>(&key).await?;
            Ok(Outcome::new().server_id(args.list_id))
        }
        None => Err(Error::mutator_failed("you are not a member of the list")),
    }
}

/// Arguments of `add_note`.
#[engine::args]
#[derive(Debug, Clone)]
pub struct AddNote {
    /// The note's id; a fresh one is chosen when absent or empty.
    #[serde(default)]
    pub id: Option<String>,
    pub list_id: String,
    pub title: String,
}

/// Add a note at the end of a list the actor can see.
#[engine::mutator]
pub async fn add_note(ctx: &mut MutatorCtx<'_>, args: AddNote) -> Result<Outcome> {
    // Only the list's being there matters: the server checks it with the note's insert.
    ctx.require::<List>(&args.list_id, Error::mutator_failed(format!("no list `{}`", args.list_id))).await?;
    let (id, outcome) = resolve_id(ctx, args.id);
    // Creation time orders new notes after older ones without reading the list.
    let position = i64::try_from(ctx.hlc().physical_ms()).unwrap_or(i64::MAX);
    let note = Note {
        id,
        owner_id: ctx.actor().owner_id.clone(),
        list_id: args.list_id,
        title: args.title,
        done: false,
        position,
        body: CrdtText::new(),
        image: None,
        deleted_at: None,
    };
    ctx.insert(&note).await?;
    Ok(outcome)
}

/// Arguments of `update_note`: the fields to change.
#[engine::args]
#[derive(Debug, Clone)]
pub struct UpdateNote {
    pub id: String,
    #[serde(default)]
    pub title: Option<String>,
    #[serde(default)]
    pub done: Option<bool>,
    #[serde(default)]
    pub position: Option<i64>,
}

/// Change a note's title, done flag or position.
#[engine::mutator]
pub async fn update_note(ctx: &mut MutatorCtx<'_>, args: UpdateNote) -> Result<Outcome> {
    let mut changes = Vec::new();
    if let Some(title) = args.title {
        changes.push(Note::title.set(title));
    }
    if let Some(done) = args.done {
        changes.push(Note::done.set(done));
    }
    if let Some(position) = args.position {
        changes.push(Note::position.set(position));
    }
    found(ctx.update::<Note>(&args.id, changes).await?, &args.id)
}

/// Arguments of `edit_note_body`.
#[engine::args]
#[derive(Debug, Clone)]
pub struct EditNoteBody {
    pub id: String,
    // What editing the body returns (`note.body.insert(0, "oat ")?`).
    /// Base64 of a yrs v1 update of the body's document (`engine::crdt::update_to_base64`).
    pub update: CrdtUpdate,
}

/// Merge an edit into a note's collaborative body.
#[engine::mutator]
pub async fn edit_note_body(ctx: &mut MutatorCtx<'_>, args: EditNoteBody) -> Result<Outcome> {
    found(ctx.update::<Note>(&args.id, [Note::body.set(args.update)]).await?, &args.id)
}

/// Arguments of `set_note_image`.
#[engine::args]
#[derive(Debug, Clone)]
pub struct SetNoteImage {
    pub id: String,
    /// The image's blob key (`keyForBlob` of its bytes); `null` takes the image away.
    pub image: Option<BlobKey>,
}

/// Attach an image to a note, or take it away. The row may reach the server before the bytes:
/// readers see the image once its writer's upload is done.
#[engine::mutator]
pub async fn set_note_image(ctx: &mut MutatorCtx<'_>, args: SetNoteImage) -> Result<Outcome> {
    found(ctx.update::<Note>(&args.id, [Note::image.set(args.image)]).await?, &args.id)
}

/// Arguments of `move_note`.
#[engine::args]
#[derive(Debug, Clone)]
pub struct MoveNote {
    pub id: String,
    /// The list to move the note to.
    pub list_id: String,
}

/// Move a note to another list the actor can see.
#[engine::mutator]
pub async fn move_note(ctx: &mut MutatorCtx<'_>, args: MoveNote) -> Result<Outcome> {
    ctx.require::<List>(&args.list_id, Error::mutator_failed(format!("no list `{}`", args.list_id))).await?;
    found(ctx.update::<Note>(&args.id, [Note::list_id.set(args.list_id)]).await?, &args.id)
}

/// Arguments of `delete_note` and `purge_note`.
#[engine::args]
#[derive(Debug, Clone)]
pub struct NoteId {
    pub id: String,
}

/// Delete a note (a soft delete: clients see a tombstone).
#[engine::mutator]
pub async fn delete_note(ctx: &mut MutatorCtx<'_>, args: NoteId) -> Result<Outcome> {
    found(ctx.delete::<Note>(&args.id).await?, &args.id)
}

/// Delete a note for good.
#[engine::mutator]
pub async fn purge_note(ctx: &mut MutatorCtx<'_>, args: NoteId) -> Result<Outcome> {
    found(ctx.purge::<Note>(&args.id).await?, &args.id)
}

fn found(exists: bool, id: &str) -> Result<Outcome> {
    if exists { Ok(Outcome::new().server_id(id)) } else { Err(Error::mutator_failed(format!("no note `{id}`"))) }
}
