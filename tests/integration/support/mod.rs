//! What every integration test shares: a fresh database per test on the run's backend, and the
//! notes app.

pub(crate) mod actors;
pub(crate) mod balancer;
pub(crate) mod client;
pub(crate) mod db;
pub(crate) mod logs;
pub(crate) mod nats;
pub(crate) mod no_upgrade;
pub(crate) mod notes;
pub(crate) mod partition;
pub(crate) mod process;
pub(crate) mod proxy;
pub(crate) mod pulls;
pub(crate) mod s3;
pub(crate) mod server;
pub(crate) mod ws;

pub(crate) use db::{Backend, TestDb, ago, backend, postgres_only};
pub(crate) use logs::Logs;
pub(crate) use server::TestServer;
