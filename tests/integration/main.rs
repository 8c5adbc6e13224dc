//! Integration tests of engine, one binary: each module is one area. Tests that need Postgres
//! get a fresh database each (`support::TestDb`).

mod support;

mod accepted;
mod accounts;
mod anchors;
mod authorization;
mod authors;
mod blobs;
mod client;
mod contract;
mod crdt;
mod edge;
mod evolution;
mod examples;
mod hostile;
mod introspect;
mod invitations;
mod jobs;
mod keys;
mod layers;
mod memberships;
mod migrate;
mod model;
mod mount;
mod open;
mod operations;
mod overload;
mod poll;
mod provision;
mod pull;
mod push;
mod references;
mod restart;
mod server;
mod sqlite;
mod stream;
mod teams;
mod visibility;
