//! The task board's mutators. None checks a role or a membership: the sync rules do, on every
//! write, and a write they refuse fails the mutation as `forbidden`. Every new row's id is the
//! mutation's own (`MutatorCtx::new_id`, the same on the client and the server), reported as
//! `serverId`: no client picks an id, so no insert tells whether someone else's id exists.

use engine::{MutatorCtx, Outcome, Result};

use crate::{Comment, Project, Task, Team, TeamMember};

/// A new team.
#[engine::args]
#[derive(Debug)]
pub struct CreateTeam {
    pub name: String,
}

/// Create a team owned by the actor; its id is the outcome's `serverId`.
#[engine::mutator]
pub async fn create_team(ctx: &mut MutatorCtx<'_>, args: CreateTeam) -> Result<Outcome> {
    let (id, user_id) = (ctx.new_id(), ctx.actor().user_id.clone());
    ctx.insert(&Team { id: id.clone(), name: args.name }).await?;
    ctx.insert(&TeamMember { team_id: id.clone(), user_id, role: "owner".into() }).await?;
    Ok(Outcome::new().server_id(id))
}

/// A user of a team, with a role.
#[engine::args]
#[derive(Debug)]
pub struct MemberRole {
    pub team_id: String,
    pub user_id: String,
    pub role: String,
}

/// Put a user into a team with a role.
#[engine::mutator]
pub async fn add_member(ctx: &mut MutatorCtx<'_>, args: MemberRole) -> Result<Outcome> {
    ctx.insert(&TeamMember { team_id: args.team_id, user_id: args.user_id, role: args.role }).await?;
    Ok(Outcome::new())
}

/// Change a member's role.
#[engine::mutator]
pub async fn set_role(ctx: &mut MutatorCtx<'_>, args: MemberRole) -> Result<Outcome> {
    let found = ctx.update::<TeamMember>(&(args.team_id, args.user_id), [TeamMember::role.set(args.role)]).await?;
    if !found {
        return Err(engine::Error::mutator_failed("no such member"));
    }
    Ok(Outcome::new())
}

/// A user of a team.
#[engine::args]
#[derive(Debug)]
pub struct Member {
    pub team_id: String,
    pub user_id: String,
}

/// Take a user out of a team.
#[engine::mutator]
pub async fn remove_member(ctx: &mut MutatorCtx<'_>, args: Member) -> Result<Outcome> {
    if !ctx.delete::<TeamMember>(&(args.team_id, args.user_id)).await? {
        return Err(engine::Error::mutator_failed("no such member"));
    }
    Ok(Outcome::new())
}

/// A team.
#[engine::args]
#[derive(Debug)]
pub struct TeamId {
    pub team_id: String,
}

/// Leave a team.
#[engine::mutator]
pub async fn leave_team(ctx: &mut MutatorCtx<'_>, args: TeamId) -> Result<Outcome> {
    let user_id = ctx.actor().user_id.clone();
    if !ctx.delete::<TeamMember>(&(args.team_id, user_id)).await? {
        return Err(engine::Error::mutator_failed("not in this team"));
    }
    Ok(Outcome::new())
}

/// A new project.
#[engine::args]
#[derive(Debug)]
pub struct AddProject {
    pub team_id: String,
    pub name: String,
}

/// Add a project to a team; its id is the outcome's `serverId`.
#[engine::mutator]
pub async fn add_project(ctx: &mut MutatorCtx<'_>, args: AddProject) -> Result<Outcome> {
    let id = ctx.new_id();
    ctx.insert(&Project { id: id.clone(), team_id: args.team_id, name: args.name }).await?;
    Ok(Outcome::new().server_id(id))
}

/// A new task.
#[engine::args]
#[derive(Debug)]
pub struct AddTask {
    pub project_id: String,
    pub title: String,
    /// Its assignee, if any.
    #[serde(default)]
    pub assignee: Option<String>,
}

/// Add a task to a project, its team the project's; its id is the outcome's `serverId`.
#[engine::mutator]
pub async fn add_task(ctx: &mut MutatorCtx<'_>, args: AddTask) -> Result<Outcome> {
    let Some(project) = ctx.get::<Project>(&args.project_id).await? else {
        return Err(engine::Error::mutator_failed("no such project"));
    };
    let id = ctx.new_id();
    let task = Task {
        id: id.clone(),
        team_id: project.team_id,
        project_id: project.id,
        assignee: args.assignee,
        title: args.title,
        done: false,
    };
    ctx.insert(&task).await?;
    Ok(Outcome::new().server_id(id))
}

/// A task and who it goes to.
#[engine::args]
#[derive(Debug)]
pub struct Assign {
    pub task_id: String,
    /// The assignee, or nobody.
    pub assignee: Option<String>,
}

/// Assign a task, or unassign it.
#[engine::mutator]
pub async fn assign(ctx: &mut MutatorCtx<'_>, args: Assign) -> Result<Outcome> {
    if !ctx.update::<Task>(&args.task_id, [Task::assignee.set(args.assignee)]).await? {
        return Err(engine::Error::mutator_failed("no such task"));
    }
    Ok(Outcome::new())
}

/// A task.
#[engine::args]
#[derive(Debug)]
pub struct TaskId {
    pub task_id: String,
}

/// Mark a task done.
#[engine::mutator]
pub async fn complete_task(ctx: &mut MutatorCtx<'_>, args: TaskId) -> Result<Outcome> {
    if !ctx.update::<Task>(&args.task_id, [Task::done.set(true)]).await? {
        return Err(engine::Error::mutator_failed("no such task"));
    }
    Ok(Outcome::new())
}

/// A comment on a task.
#[engine::args]
#[derive(Debug)]
pub struct AddComment {
    pub task_id: String,
    pub body: String,
}

/// Comment on a task, as the actor; the comment's id is the outcome's `serverId`.
#[engine::mutator]
pub async fn comment(ctx: &mut MutatorCtx<'_>, args: AddComment) -> Result<Outcome> {
    let Some(task) = ctx.get::<Task>(&args.task_id).await? else {
        return Err(engine::Error::mutator_failed("no such task"));
    };
    let (id, author) = (ctx.new_id(), ctx.actor().user_id.clone());
    let comment = Comment { id: id.clone(), team_id: task.team_id, task_id: task.id, author, body: args.body };
    ctx.insert(&comment).await?;
    Ok(Outcome::new().server_id(id))
}

/// A comment's new text.
#[engine::args]
#[derive(Debug)]
pub struct EditComment {
    pub comment_id: String,
    pub body: String,
}

/// Change a comment's text: its author, or an admin or owner, may.
#[engine::mutator]
pub async fn edit_comment(ctx: &mut MutatorCtx<'_>, args: EditComment) -> Result<Outcome> {
    if !ctx.update::<Comment>(&args.comment_id, [Comment::body.set(args.body)]).await? {
        return Err(engine::Error::mutator_failed("no such comment"));
    }
    Ok(Outcome::new())
}

/// A comment.
#[engine::args]
#[derive(Debug)]
pub struct CommentId {
    pub comment_id: String,
}

/// Delete a comment: its author, or an admin or owner, may.
#[engine::mutator]
pub async fn delete_comment(ctx: &mut MutatorCtx<'_>, args: CommentId) -> Result<Outcome> {
    if !ctx.delete::<Comment>(&args.comment_id).await? {
        return Err(engine::Error::mutator_failed("no such comment"));
    }
    Ok(Outcome::new())
}
