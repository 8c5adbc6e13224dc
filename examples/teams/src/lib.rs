//! The task board: teams with roles, projects, tasks assigned to teammates and comments,
//! written with sync rules only. No mutator checks who may do what: the rules say it, and the
//! engine enforces them on every write.
//!
//! - Tables: [`Team`], [`TeamMember`], [`Project`], [`Task`], [`Comment`].
//! - Sync rules ([`rules`]): `team` (every team the actor is in, with everything in it) and
//!   `assigned` (the tasks assigned to the actor, held `while(TeamBoard)`: a member removed from
//!   a team loses its tasks in the same pull as the team).
//! - Roles: `owner` (everything), `admin` (members, projects, tasks and comments, but never the
//!   owner's membership nor an owner's role), `member` (tasks, and comments of its own:
//!   `row.author == actor.user_id`), `viewer` (reads).
//!   Anyone leaves a team on their own (`leave`).
//! - Mutators ([`mutators`]): `create_team`, `add_member`, `set_role`, `remove_member`,
//!   `leave_team`, `add_project`, `add_task`, `assign`, `complete_task`, `comment`,
//!   `edit_comment`, `delete_comment`.

pub mod mutators;

/// A team.
#[engine::table]
#[derive(Debug, Clone, PartialEq)]
pub struct Team {
    #[engine(primary_key)]
    pub id: String,
    pub name: String,
}

/// A user's membership of a team, and its role: `owner`, `admin`, `member` or `viewer`.
#[engine::table]
#[derive(Debug, Clone, PartialEq)]
pub struct TeamMember {
    #[engine(primary_key)]
    pub team_id: String,
    #[engine(primary_key)]
    pub user_id: String,
    pub role: String,
}

/// A project of a team.
#[engine::table]
#[derive(Debug, Clone, PartialEq)]
pub struct Project {
    #[engine(primary_key)]
    pub id: String,
    pub team_id: String,
    pub name: String,
}

/// A task of a team's project, assigned to one of the team or to nobody.
#[engine::table]
#[derive(Debug, Clone, PartialEq)]
pub struct Task {
    #[engine(primary_key)]
    pub id: String,
    pub team_id: String,
    pub project_id: String,
    pub assignee: Option<String>,
    pub title: String,
    pub done: bool,
}

/// A comment on a task.
#[engine::table]
#[derive(Debug, Clone, PartialEq)]
pub struct Comment {
    #[engine(primary_key)]
    pub id: String,
    pub team_id: String,
    pub task_id: String,
    pub author: String,
    pub body: String,
}

/// Who reads and writes what.
#[engine::sync_rules]
pub mod rules {
    use super::{Comment, Project, Task, Team, TeamMember};

    /// Every team the actor is in, with its members, projects, tasks and comments. Owners write
    /// everything; admins everything but the owner's membership and the owner role; members
    /// tasks and their own comments; viewers read. Anyone may leave. A team is its `teams` row: nobody is
    /// a member of a team that has none.
    #[bucket(
        name = "team",
        membership(TeamMember::user_id == actor.user_id),
        data(
            Team::id == bucket.team_id,
            TeamMember::team_id == bucket.team_id,
            Project::team_id == bucket.team_id,
            Task::team_id == bucket.team_id,
            Comment::team_id == bucket.team_id,
        ),
        write(
            Team: TeamMember::role == "owner",
            TeamMember: TeamMember::role == "owner" || (TeamMember::role == "admin" && row.role != "owner"),
            Project: TeamMember::role == "owner" || TeamMember::role == "admin",
            Task: TeamMember::role == "owner" || TeamMember::role == "admin" || TeamMember::role == "member",
            Comment: TeamMember::role == "owner"
                || TeamMember::role == "admin"
                || (TeamMember::role == "member" && row.author == actor.user_id),
        ),
        leave,
        anchor(Team::id == bucket.team_id),
    )]
    #[derive(Debug)]
    pub struct TeamBoard {
        #[param(TeamMember::team_id)]
        pub team_id: String,
    }

    /// The tasks assigned to the actor, one bucket per team, for as long as the actor is on
    /// the team. A teammate who may write the team's tasks assigns one; nobody else can.
    #[bucket(
        name = "assigned",
        data(Task::assignee == bucket.user_id && Task::team_id == bucket.team_id),
        accept(TeamBoard),
        while(TeamBoard),
    )]
    #[derive(Debug)]
    pub struct Assigned {
        #[param(actor.user_id)]
        pub user_id: String,
        #[param(TeamMember::team_id)]
        pub team_id: String,
    }
}

/// The app: its tables, mutators and rules.
pub fn app() -> engine::App {
    use mutators::*;
    engine::app! {
        tables: [Team, TeamMember, Project, Task, Comment],
        mutators: [
            create_team,
            add_member,
            set_role,
            remove_member,
            leave_team,
            add_project,
            add_task,
            assign,
            complete_task,
            comment,
            edit_comment,
            delete_comment,
        ],
        sync_rules: rules,
    }
}
