//! Integration tests of engine, one binary: each module is one area.

mod contract;
mod model;
