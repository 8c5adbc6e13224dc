//! The app's background jobs: `share_list` enqueues `list_shared` when it invites a member, to
//! run once the share commits. A real app would send a mail or a push notification here; the
//! quickstart logs it.

/// The name of the job that tells a user a list was shared with them.
pub const LIST_SHARED: &str = "list_shared";

/// The payload of [`LIST_SHARED`]: JSON like a mutator's arguments, so `#[engine::args]` derives
/// its serde traits.
#[engine::args]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListShared {
    /// The list shared.
    pub list_id: String,
    /// The member invited.
    pub user_id: String,
    /// Who shared it.
    pub shared_by: String,
}

/// The handlers of the app's jobs, for `Server::builder().jobs(…)`.
#[cfg(feature = "server")]
pub fn jobs() -> engine::server::Jobs {
    engine::server::Jobs::new().job(LIST_SHARED, |ctx: engine::server::JobCtx, shared: ListShared| async move {
        // The ids come from a client: fields, quoted, so a newline in one cannot forge a line.
        tracing::info!(
            job = ctx.id(),
            shared_by = ?shared.shared_by,
            list_id = ?shared.list_id,
            user_id = ?shared.user_id,
            "a list was shared: telling its new member"
        );
        Ok(())
    })
}
