//! What every integration test shares: a fresh Postgres database per test, and the notes app.

pub(crate) mod db;

pub(crate) use db::TestDb;
