//! The shared vocabulary of `engine`, free of I/O, used by the server and the client alike.
//!
//! - [`table`](mod@table), [`column`](mod@column) and [`value`]: what `#[engine::table]` declares, and
//!   column values typed by their SQL type; [`handle`]: typed column handles (`Note::title`).
//! - [`rules`] and [`bucket`]: what `#[engine::sync_rules]` declares, and bucket keys.
//! - [`mutator`]: what `#[engine::mutator]` declares, and the context a mutator runs in.
//! - [`app`]: tables, mutators and rules bundled into one [`App`].
//! - [`wire`] and [`contract`](mod@contract): the protocol's messages and its OpenAPI contract.
//! - [`blob`]: blob keys, the column type of files stored beside the rows.
//! - [`hlc`], [`crdt`], [`actor`], [`error`]: clocks, collaborative columns, who acts, what fails.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod actor;
pub mod app;
pub mod blob;
pub mod bucket;
pub mod column;
pub mod contract;
pub mod crdt;
pub mod error;
pub mod handle;
pub mod hlc;
pub mod mutator;
pub mod rules;
pub mod table;
pub mod value;
pub mod wire;

#[doc(hidden)]
pub mod macro_support;

pub use actor::Actor;
pub use app::{App, AppBuilder, TableDef};
pub use blob::BlobKey;
pub use bucket::{Bucket, BucketKey, ParamValue};
pub use column::{ColumnMeta, ColumnType, SqlType, Timestamp};
pub use contract::contract;
pub use crdt::{CrdtMap, CrdtText, CrdtUpdate};
pub use error::{Error, ErrorCode, Result};
pub use handle::{Assignment, Column, Filter};
pub use hlc::{Hlc, HlcClock};
pub use mutator::{BoxFuture, JobRequest, Mutator, MutatorArgs, MutatorCtx, MutatorDef, MutatorTx, Outcome};
pub use rules::SyncRules;
pub use table::{MergePolicy, Row, Table, TableMeta};
pub use value::ColumnValue;
