//! The soak: notes clients write through a fault-injecting proxy to three server instances on
//! one database, which are SIGKILLed and restarted at random, for as long as asked; then the
//! faults stop and it checks that nothing was lost, nothing applied twice, no outbox stuck, and
//! every replica equals a fresh pull. `cargo run --release -p engine-bench -- soak --minutes 10`;
//! the figures of a run are in RELIABILITY.md.

mod instances;
mod proxy;
pub(crate) mod rng;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use engine::client::{BearerToken, Client, Reconnect, StoreLocation};
use example_notes::mutators::{
    AcceptList, AddNote, CreateList, NoteId, ShareList, ShareRole, UnshareList, UpdateNote, accept_list, add_note,
    create_list, delete_note, share_list, unshare_list, update_note,
};
use example_notes::{List, ListMember, Note};

use crate::db::{BenchDb, SECRET};
use instances::Instance;
pub(crate) use instances::serve;
use proxy::FaultProxy;
use rng::Rng;

/// What a soak run does.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Settings {
    pub(crate) minutes: f64,
    pub(crate) users: usize,
    pub(crate) devices: usize,
    pub(crate) instances: usize,
    /// The share of answers cut or slowed, and of connections refused, answered 503 or duplicated.
    pub(crate) fault_rate: f64,
    pub(crate) seed: u64,
}

fn user(n: usize) -> String {
    format!("user-{n}")
}

fn list_of(n: usize) -> String {
    format!("list-{n}")
}

fn token(name: &str) -> String {
    engine::auth::issue_bearer_token(name, name, SECRET, Duration::from_secs(24 * 3600)).expect("a token")
}

async fn client(url: &str, name: &str, background: bool) -> Client {
    Client::builder(url)
        .app(example_notes::app())
        .auth(BearerToken::new(token(name)))
        .store(StoreLocation::Memory)
        .pull_interval(Duration::from_secs(2))
        .reconnect(Reconnect::default().backoff(Duration::from_millis(200), Duration::from_secs(5)))
        .background(background)
        .build()
        .await
        .expect("the client builds")
}

/// One device of a user: its client and how many mutations it queued.
struct Device {
    user: usize,
    /// The user's first device, which shares and unshares the user's list.
    first: bool,
    client: Client,
    queued: u64,
}

/// What a device does until `until`: accept the invitations it has, add, edit and delete notes
/// in the lists it holds; the owner's first device also shares its list with the next user and
/// takes it back.
async fn work(mut device: Device, users: usize, seed: u64, until: Instant) -> Device {
    let mut rng = Rng::new(seed);
    let (me, mine) = (user(device.user), list_of(device.user));
    let neighbour = user((device.user + 1) % users);
    while Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(20 + rng.below(100))).await;
        // A share is an invitation: the neighbour's list reaches this user once accepted.
        let members = device.client.collection::<ListMember>().all().await.expect("members");
        if let Some(invitation) = members.iter().find(|m| m.user_id == me && !m.accepted) {
            let args = AcceptList { list_id: invitation.list_id.clone() };
            device.queued += u64::from(device.client.mutate::<accept_list>(args).await.is_ok());
            continue;
        }
        let lists = device.client.collection::<List>().all().await.expect("lists");
        let notes = device.client.collection::<Note>().all().await.expect("notes");
        let draw = rng.below(100);
        let queued = if draw < 45 && !lists.is_empty() {
            let list = &lists[rng.below(lists.len() as u64) as usize];
            let args = AddNote { id: None, list_id: list.id.clone(), title: format!("note {}", rng.next()) };
            device.client.mutate::<add_note>(args).await.is_ok()
        } else if draw < 75 && !notes.is_empty() {
            let note = &notes[rng.below(notes.len() as u64) as usize];
            let args = UpdateNote {
                id: note.id.clone(),
                title: Some(format!("edited {}", rng.next())),
                done: Some(rng.chance(0.5)),
                position: None,
            };
            device.client.mutate::<update_note>(args).await.is_ok()
        } else if draw < 82 && !notes.is_empty() {
            let note = &notes[rng.below(notes.len() as u64) as usize];
            device.client.mutate::<delete_note>(NoteId { id: note.id.clone() }).await.is_ok()
        } else if draw < 86 && device.first && lists.iter().any(|l| l.id == mine) {
            let members = device.client.collection::<ListMember>().all().await.expect("members");
            let shared = members.iter().any(|m| m.list_id == mine && m.user_id == neighbour);
            match shared {
                true => {
                    let args = UnshareList { list_id: mine.clone(), user_id: neighbour.clone() };
                    device.client.mutate::<unshare_list>(args).await.is_ok()
                }
                false => {
                    let args = ShareList { list_id: mine.clone(), user_id: neighbour.clone(), role: ShareRole::Editor };
                    device.client.mutate::<share_list>(args).await.is_ok()
                }
            }
        } else {
            false
        };
        device.queued += u64::from(queued);
    }
    device
}

/// Run the soak and print its figures; exits non-zero when a check fails.
pub(crate) async fn run(settings: Settings) {
    let started = Instant::now();
    let db = BenchDb::new(4).await;
    db.storage(example_notes::app()).await;
    let mut instances = Vec::new();
    for _ in 0..settings.instances {
        instances.push(Instance::start(&db.url).await);
    }
    let proxy = FaultProxy::start(instances.iter().map(|i| i.addr).collect(), settings.fault_rate, settings.seed).await;
    let url = format!("http://{}", proxy.addr);
    println!(
        "soak: {} users × {} devices, {} instances, fault rate {:.0}%, seed {}, {} min",
        settings.users,
        settings.devices,
        settings.instances,
        settings.fault_rate * 100.0,
        settings.seed,
        settings.minutes
    );

    // Each user's list, shared with the next user as an editor.
    let mut devices = Vec::new();
    for n in 0..settings.users {
        for d in 0..settings.devices {
            devices.push(Device { user: n, first: d == 0, client: client(&url, &user(n), true).await, queued: 0 });
        }
    }
    for device in devices.iter_mut().step_by(settings.devices) {
        let (mine, next) = (list_of(device.user), user((device.user + 1) % settings.users));
        let create = CreateList { id: Some(mine.clone()), title: format!("{}'s", user(device.user)) };
        device.client.mutate::<create_list>(create).await.expect("queued");
        let share = ShareList { list_id: mine, user_id: next, role: ShareRole::Editor };
        device.client.mutate::<share_list>(share).await.expect("queued");
        device.queued += 2;
    }

    // The work, and instances killed and restarted meanwhile.
    let until = Instant::now() + Duration::from_secs_f64(settings.minutes * 60.0);
    let workers: Vec<_> = devices
        .into_iter()
        .enumerate()
        .map(|(i, device)| tokio::spawn(work(device, settings.users, settings.seed ^ (i as u64 + 1), until)))
        .collect();
    let mut rng = Rng::new(settings.seed ^ 0xdead_beef);
    let mut kills = 0;
    // Kills every 5 to 15 s (sooner in a short run), none in the last 20 s (or third).
    let work = Duration::from_secs_f64(settings.minutes * 60.0);
    let calm = (work / 3).min(Duration::from_secs(20));
    while Instant::now() + calm < until {
        tokio::time::sleep(Duration::from_millis(5_000 + rng.below(10_000)).min(calm)).await;
        let victim = rng.below(instances.len() as u64) as usize;
        instances[victim].kill().await;
        kills += 1;
        tokio::time::sleep(Duration::from_millis(500 + rng.below(2_500))).await;
        instances[victim].restart().await;
    }
    let mut devices = Vec::new();
    for worker in workers {
        devices.push(worker.await.expect("a device's work"));
    }
    let worked = started.elapsed();

    // Calm: no more faults; every outbox must drain.
    proxy.heal();
    let mut stuck = 0;
    for device in &devices {
        let deadline = Instant::now() + Duration::from_secs(180);
        while device.client.status().pending > 0 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        if device.client.status().pending > 0 {
            stuck += 1;
            println!("stuck: a device of {} has {} pending", user(device.user), device.client.status().pending);
        }
    }

    // Lost: a queued mutation without its record; a gap in a client's sequence.
    let mut lost = 0;
    let mut quarantined: BTreeMap<String, u64> = BTreeMap::new();
    let mut examples: BTreeMap<String, String> = BTreeMap::new();
    for device in &devices {
        let (recorded, last): (i64, Option<i64>) = sqlx::query_as(
            "SELECT count(*), max(mutation_id) FROM _engine_mutations WHERE user_id = $1 AND client_id = $2",
        )
        .bind(user(device.user))
        .bind(device.client.client_id())
        .fetch_one(&db.pool)
        .await
        .expect("the records");
        let queued = device.queued as i64;
        lost += (queued - recorded).max(0) + (queued - last.unwrap_or(0)).max(0);
        for entry in device.client.quarantined().await.expect("the quarantine") {
            *quarantined.entry(format!("{} {}", entry.error.code, entry.name)).or_default() += 1;
            examples.entry(format!("{} {}", entry.error.code, entry.name)).or_insert(entry.error.detail.clone());
        }
    }
    // Doubled: a mutation recorded twice, or a note for which no one applied `add_note` once.
    let (twice, applied_adds, notes): (i64, i64, i64) = sqlx::query_as(
        "SELECT (SELECT count(*) FROM (SELECT 1 FROM _engine_mutations GROUP BY user_id, client_id, client_mutation_id
                                       HAVING count(*) > 1) AS d),
                (SELECT count(*) FROM _engine_mutations WHERE name = 'add_note' AND status = 'applied'),
                (SELECT count(*) FROM notes)",
    )
    .fetch_one(&db.pool)
    .await
    .expect("the counts");
    let doubled = twice + (notes - applied_adds).max(0);
    lost += (applied_adds - notes).max(0);
    let (applied, rejected): (i64, i64) = sqlx::query_as(
        "SELECT count(*) FILTER (WHERE status = 'applied'), count(*) FILTER (WHERE status = 'rejected') FROM _engine_mutations",
    )
    .fetch_one(&db.pool)
    .await
    .expect("the counts");

    // Every device's replica equals a fresh pull of its user.
    let mut diverged = 0;
    for n in 0..settings.users {
        let fresh = client(&url, &user(n), false).await;
        fresh.pull().await.expect("a fresh pull");
        let truth = (sorted_notes(&fresh).await, sorted_lists(&fresh).await);
        for device in devices.iter().filter(|d| d.user == n) {
            let deadline = Instant::now() + Duration::from_secs(60);
            while (sorted_notes(&device.client).await, sorted_lists(&device.client).await) != truth
                && Instant::now() < deadline
            {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            let replica = (sorted_notes(&device.client).await, sorted_lists(&device.client).await);
            if replica != truth {
                diverged += 1;
                println!("diverged: a device of {} (client {})", user(n), device.client.client_id());
                describe_difference(&replica.0, &truth.0, |n| &n.id);
                describe_difference(&replica.1, &truth.1, |l| &l.id);
            }
        }
    }

    let queued: u64 = devices.iter().map(|d| d.queued).sum();
    println!();
    println!("| figure | value |");
    println!("|---|---:|");
    println!("| duration of the work | {:.1} min |", worked.as_secs_f64() / 60.0);
    println!("| devices (clients) | {} |", devices.len());
    println!("| mutations queued | {queued} |");
    println!("| applied / rejected | {applied} / {rejected} |");
    for (fault, n) in proxy.tally.counts() {
        println!("| faults injected: {fault:?} | {n} |");
    }
    println!("| instances SIGKILLed and restarted | {kills} |");
    println!("| quarantined, by code and mutator | {quarantined:?} |");
    for (what, detail) in &examples {
        println!("| quarantined {what}, e.g. | {detail} |");
    }
    println!("| outboxes stuck | {stuck} |");
    println!("| lost | {lost} |");
    println!("| doubled | {doubled} |");
    println!("| replicas unlike a fresh pull | {diverged} |");
    for device in devices {
        device.client.close();
    }
    for instance in &mut instances {
        instance.kill().await;
    }
    db.drop_database().await;
    if stuck + diverged > 0 || lost > 0 || doubled > 0 {
        eprintln!("soak: FAILED");
        std::process::exit(1);
    }
    println!("soak: passed");
}

async fn sorted_notes(client: &Client) -> Vec<Note> {
    let mut notes = client.collection::<Note>().all().await.expect("notes");
    notes.sort_by(|a, b| a.id.cmp(&b.id));
    notes
}

async fn sorted_lists(client: &Client) -> Vec<List> {
    let mut lists = client.collection::<List>().all().await.expect("lists");
    lists.sort_by(|a, b| a.id.cmp(&b.id));
    lists
}

/// Print how a replica's rows differ from a fresh pull's: rows only in one, rows unlike.
fn describe_difference<T: std::fmt::Debug + PartialEq>(replica: &[T], fresh: &[T], key: impl Fn(&T) -> &String) {
    let by_key =
        |rows: &[T]| -> BTreeMap<String, usize> { rows.iter().enumerate().map(|(i, r)| (key(r).clone(), i)).collect() };
    let (mine, theirs) = (by_key(replica), by_key(fresh));
    for (id, i) in &mine {
        match theirs.get(id) {
            None => println!("  only in the replica: {:?}", replica[*i]),
            Some(j) if replica[*i] != fresh[*j] => {
                println!("  unlike:\n    replica {:?}\n    fresh   {:?}", replica[*i], fresh[*j])
            }
            Some(_) => {}
        }
    }
    for (id, j) in &theirs {
        if !mine.contains_key(id) {
            println!("  only in the fresh pull: {:?}", fresh[*j]);
        }
    }
}
