//! The contract as `GET /engine/contract` serves it: the app's contract, whose `servers` names
//! the path prefix the routes are reached under when that is not the root, so that tools reading
//! the document find the routes of an engine mounted in a host app.

use std::collections::BTreeMap;
use std::sync::Mutex;

use axum::body::Bytes;
use engine_kernel::App;
use serde_json::{Value, json};

use crate::error::{Error, Result};

/// The served contract, serialized once per prefix it is served under.
pub(crate) struct ServedContract {
    document: Value,
    /// The document at the root: without `servers`, whose default is `/`.
    at_root: Bytes,
    /// The prefix set on the builder, which wins over the one the router is nested under.
    mount_prefix: Option<String>,
    /// The document for each prefix served so far: there is one per place the host app nests
    /// the router, so this stays small.
    under_prefix: Mutex<BTreeMap<String, Bytes>>,
}

impl ServedContract {
    /// The contract of `app`, served under `mount_prefix` when given.
    pub(crate) fn new(app: &App, mount_prefix: Option<String>) -> Result<Self> {
        let document = engine_kernel::contract(app);
        let at_root = serde_json::to_vec(&document)
            .map_err(|e| Error::internal_from("the contract does not serialize", e))?
            .into();
        let mount_prefix = mount_prefix.map(|prefix| match prefix.starts_with('/') || prefix.contains("://") {
            true => prefix,
            false => format!("/{prefix}"),
        });
        Ok(ServedContract { document, at_root, mount_prefix, under_prefix: Mutex::new(BTreeMap::new()) })
    }

    /// The document for a request that reached the router nested under `nested` (axum's
    /// `NestedPath`; `None` at the root). A nesting path with captures (`/{tenant}/sync`) names
    /// no one prefix, so it is served without `servers` unless the builder set one.
    pub(crate) fn bytes(&self, nested: Option<&str>) -> Bytes {
        let prefix = match &self.mount_prefix {
            Some(prefix) => prefix.as_str(),
            None => nested.filter(|path| !path.contains('{')).unwrap_or_default(),
        };
        let prefix = prefix.trim_end_matches('/');
        if prefix.is_empty() {
            return self.at_root.clone();
        }
        let mut served = self.under_prefix.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        served
            .entry(prefix.to_owned())
            .or_insert_with(|| {
                let mut document = self.document.clone();
                document["servers"] = json!([{ "url": prefix }]);
                serde_json::to_vec(&document).expect("a JSON value serializes").into()
            })
            .clone()
    }
}
