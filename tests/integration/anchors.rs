//! Anchored buckets fed through `accept(open(...))`, over real HTTP, with an app built for it: a
//! helpdesk whose teams are anchored by their `teams` row and take tickets from any customer.
//! A ticket enters a team only while the team's row is there: not before its creator creates it
//! (the rows waiting there would keep the creator out), and not after its row is deleted.

use serde_json::json;

use crate::support::actors::{applied, count, forbidden, has, pulled, push};
use crate::support::{TestDb, TestServer};

pub(crate) mod app {
    use engine::{MutatorCtx, Outcome, Result};

    // The teams and memberships of the authorization attacks' app: a `lead` writes its team.
    pub(crate) use crate::authorization::app::{Team, TeamMember};

    /// A ticket a customer opened with a team.
    #[engine::table]
    pub(crate) struct Ticket {
        #[engine(primary_key)]
        pub id: String,
        pub team_id: String,
        pub customer_id: String,
        pub subject: String,
    }

    #[engine::sync_rules]
    pub(crate) mod rules {
        use super::{Team, TeamMember, Ticket};

        /// A team's desk: the team, its members and its tickets, which any customer opens.
        #[bucket(
            name = "desk",
            membership(TeamMember::user_id == actor.user_id),
            data(Team::id == bucket.team_id, TeamMember::team_id == bucket.team_id, Ticket::team_id == bucket.team_id),
            write(Team: TeamMember::role == "lead", TeamMember: TeamMember::role == "lead", Ticket),
            accept(open(Customer)),
            anchor(Team::id == bucket.team_id),
        )]
        pub(crate) struct Desk {
            #[param(TeamMember::team_id)]
            pub team_id: String,
        }

        /// A customer's own tickets, in whichever team.
        #[bucket(data(Ticket::customer_id == bucket.user_id), write(Ticket), accept(open(Desk)))]
        pub(crate) struct Customer {
            #[param(actor.user_id)]
            pub user_id: String,
        }
    }

    #[engine::args]
    pub(crate) struct CreateTeam {
        pub id: String,
        /// A first ticket of the creator's own, written with the team.
        #[serde(default)]
        pub ticket: Option<String>,
    }

    /// Create a team led by the actor, and its first ticket when given.
    #[engine::mutator]
    pub(crate) async fn create_team(ctx: &mut MutatorCtx<'_>, args: CreateTeam) -> Result<Outcome> {
        let user_id = ctx.actor().user_id.clone();
        ctx.insert(&Team { id: args.id.clone(), name: "t".into() }).await?;
        ctx.insert(&TeamMember { team_id: args.id.clone(), user_id: user_id.clone(), role: "lead".into() }).await?;
        if let Some(id) = args.ticket {
            ctx.insert(&Ticket { id, team_id: args.id, customer_id: user_id, subject: "first".into() }).await?;
        }
        Ok(Outcome::new())
    }

    #[engine::args]
    pub(crate) struct OpenTicket {
        pub id: String,
        pub team_id: String,
    }

    /// Open a ticket with a team, as its customer.
    #[engine::mutator]
    pub(crate) async fn open_ticket(ctx: &mut MutatorCtx<'_>, args: OpenTicket) -> Result<Outcome> {
        let customer_id = ctx.actor().user_id.clone();
        ctx.insert(&Ticket { id: args.id, team_id: args.team_id, customer_id, subject: "help".into() }).await?;
        Ok(Outcome::new())
    }

    /// Move a ticket to another team, as its customer.
    #[engine::mutator]
    pub(crate) async fn move_ticket(ctx: &mut MutatorCtx<'_>, args: OpenTicket) -> Result<Outcome> {
        if !ctx.update::<Ticket>(&args.id, [Ticket::team_id.set(args.team_id)]).await? {
            return Err(engine::Error::mutator_failed("no such ticket"));
        }
        Ok(Outcome::new())
    }

    #[engine::args]
    pub(crate) struct TeamId {
        pub team_id: String,
    }

    /// Delete a team's row (its members and tickets stay).
    #[engine::mutator]
    pub(crate) async fn delete_team(ctx: &mut MutatorCtx<'_>, args: TeamId) -> Result<Outcome> {
        ctx.delete::<Team>(&args.team_id).await?;
        Ok(Outcome::new())
    }

    pub(crate) fn app() -> engine::App {
        engine::app! {
            tables: [Team, TeamMember, Ticket],
            mutators: [create_team, open_ticket, move_ticket, delete_team],
            sync_rules: rules,
        }
    }
}

async fn server(db: &TestDb) -> TestServer {
    let store = db.store(engine::storage::StoreLimits::default());
    TestServer::start(db, move |b| b.app(app::app()).storage(store)).await
}

/// A customer's ticket opened with a team id nobody has created took the id: the team's bucket
/// had rows, so its creator's `teams` row was refused, for good. A ticket waits for its team.
#[tokio::test]
async fn nobody_seeds_a_team_before_it_exists() {
    let db = TestDb::new().await;
    let server = server(&db).await;
    let seed = json!({"id": "k1", "team_id": "future"});
    let detail = forbidden(&push(&server, "eve", 1, "open_ticket", seed).await, &[]);
    assert!(detail.contains("`tickets`") && detail.contains("`desk`"), "{detail}");
    assert_eq!(count(&db, "SELECT count(*) FROM tickets").await, 0);

    // The team's creator creates it, with a first ticket of her own; then customers open theirs.
    applied(&push(&server, "alice", 1, "create_team", json!({"id": "future", "ticket": "k0"})).await);
    applied(&push(&server, "eve", 2, "open_ticket", json!({"id": "k1", "team_id": "future"})).await);
    let rows = pulled(&server, "alice").await;
    assert!(has(&rows, "teams", "future") && has(&rows, "tickets", "k0") && has(&rows, "tickets", "k1"), "{rows:?}");
    assert!(has(&pulled(&server, "eve").await, "tickets", "k1"));

    // Nor does a ticket moved there take a team id before its creator does.
    let moved = forbidden(&push(&server, "eve", 3, "move_ticket", json!({"id": "k1", "team_id": "later"})).await, &[]);
    assert!(moved.contains("`desk`"), "{moved}");
    assert_eq!(count(&db, "SELECT count(*) FROM tickets WHERE team_id = 'later'").await, 0);
    applied(&push(&server, "bob", 1, "create_team", json!({"id": "later"})).await);
    applied(&push(&server, "eve", 4, "move_ticket", json!({"id": "k1", "team_id": "later"})).await);
}

/// A team whose row is deleted takes no more tickets, with the words a team never created gets.
#[tokio::test]
async fn a_team_whose_row_is_gone_takes_no_tickets() {
    let db = TestDb::new().await;
    let server = server(&db).await;
    applied(&push(&server, "alice", 1, "create_team", json!({"id": "red"})).await);
    applied(&push(&server, "eve", 1, "open_ticket", json!({"id": "k1", "team_id": "red"})).await);
    applied(&push(&server, "alice", 2, "delete_team", json!({"team_id": "red"})).await);
    let gone = forbidden(&push(&server, "eve", 2, "open_ticket", json!({"id": "k2", "team_id": "red"})).await, &[]);
    let never = forbidden(&push(&server, "eve", 3, "open_ticket", json!({"id": "k3", "team_id": "blue"})).await, &[]);
    assert_eq!(gone, never);
    assert_eq!(count(&db, "SELECT count(*) FROM tickets").await, 1);
}
