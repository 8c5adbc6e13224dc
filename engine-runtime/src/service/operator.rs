//! What an operator reads: `/engine/stats` (the store's counts, the open sockets and the merge
//! gate's use) and `/engine/metrics` (Prometheus' text format), each for admins only.

use std::sync::Arc;

use engine_kernel::Actor;
use serde_json::{Value, json};

use crate::error::{Error, Result};
use crate::limits::FairShare;
use crate::metrics::Prometheus;
use crate::storage::Storage;
use crate::stream::hub::Hub;

/// Decides whether an actor may read `/engine/stats`.
pub(crate) type AdminCriterion = Arc<dyn Fn(&Actor) -> bool + Send + Sync>;

/// The operator's view of one server.
pub(crate) struct Operator {
    pub(crate) admin: AdminCriterion,
    pub(crate) storage: Arc<dyn Storage>,
    pub(crate) hub: Arc<Hub>,
    /// The Prometheus exposition, when the server serves `/engine/metrics`.
    pub(crate) prometheus: Option<Prometheus>,
    /// The merge gate, whose use the stats tell.
    pub(crate) merges: Option<Arc<FairShare>>,
    /// The store's places, whose use the stats tell.
    pub(crate) places: Option<Arc<FairShare>>,
}

impl Operator {
    /// The store's counts and the open sockets.
    pub(crate) async fn stats(&self, actor: &Actor) -> Result<Value> {
        if !(self.admin)(actor) {
            return Err(Error::Forbidden("statistics are for admins".into()));
        }
        let stats = self.storage.stats().await?;
        let mut body = json!(stats);
        body["sockets"] = self.hub.sockets().into();
        if let Some(places) = &self.places {
            let (in_use, most_at_once, count) = places.use_of_places();
            body["places"] = json!({"inUse": in_use, "mostAtOnce": most_at_once, "count": count});
        }
        if let Some(merges) = &self.merges {
            let (running, most_at_once, places) = merges.use_of_places();
            body["largeMerges"] = json!({"running": running, "mostAtOnce": most_at_once, "places": places});
        }
        Ok(body)
    }

    /// The server's metrics in Prometheus' text format.
    pub(crate) async fn metrics(&self, actor: &Actor) -> Result<String> {
        if !(self.admin)(actor) {
            return Err(Error::Forbidden("metrics are for admins".into()));
        }
        let Some(prometheus) = &self.prometheus else {
            return Err(Error::NotFound("this server exports no metrics: build it with `.prometheus(true)`".into()));
        };
        let gauges = self.storage.gauges().await?;
        Ok(prometheus.render(&gauges, self.hub.sockets()))
    }
}
