//! A signal as the text adapters carry between instances: small JSON with one-letter keys. A
//! Postgres notification payload is limited to 8000 bytes, and presence metas are limited well
//! below that by the stream; a NATS message takes the same text.

use std::collections::BTreeMap;

use engine_kernel::BucketKey;
use serde_json::{Map, Value, json};

use super::{PresenceState, Signal};

/// `signal` as a payload; `None` for [`Signal::Resync`], which concerns one instance and never
/// travels.
pub(crate) fn encode(signal: &Signal) -> Option<Value> {
    Some(match signal {
        Signal::Ping { bucket, xid } => json!({"k": "p", "b": bucket, "x": xid.to_string()}),
        Signal::Membership(claim) => json!({"k": "m", "c": claim}),
        Signal::Presence { bucket, joins, leaves } => json!({"k": "d", "b": bucket, "j": joins, "l": leaves}),
        Signal::Resync => return None,
    })
}

/// The signal of `payload`; `None` for anything [`encode`] does not make.
pub(crate) fn decode(payload: &str) -> Option<Signal> {
    let value: Value = serde_json::from_str(payload).ok()?;
    let bucket = || value.get("b").and_then(Value::as_str).and_then(|b| BucketKey::parse(b).ok());
    let state = |field: &str| -> PresenceState {
        value
            .get(field)
            .and_then(|v| serde_json::from_value::<BTreeMap<String, Vec<Map<String, Value>>>>(v.clone()).ok())
            .unwrap_or_default()
    };
    match value.get("k")?.as_str()? {
        "p" => Some(Signal::Ping { bucket: bucket()?, xid: value.get("x")?.as_str()?.parse().ok()? }),
        "m" => Some(Signal::Membership(value.get("c")?.as_str()?.to_owned())),
        "d" => Some(Signal::Presence { bucket: bucket()?, joins: state("j"), leaves: state("l") }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::realtime::add_meta;

    #[test]
    fn signals_survive_a_payload() {
        let mut joins = PresenceState::new();
        add_meta(&mut joins, "alice", json!({"presenceRef": "r1", "cursor": 3}).as_object().unwrap().clone());
        for signal in [
            Signal::Ping { bucket: BucketKey::new("own", &["a b"]), xid: 42 },
            Signal::Membership("user_id=carol".into()),
            Signal::Presence { bucket: BucketKey::new("shared", &["l1"]), joins, leaves: PresenceState::new() },
        ] {
            let payload = encode(&signal).unwrap().to_string();
            assert_eq!(decode(&payload), Some(signal));
        }
        assert_eq!(encode(&Signal::Resync), None);
        assert_eq!(decode("not json"), None);
        assert_eq!(decode(r#"{"k":"p","b":"own/a b","x":"1"}"#), None, "a non-canonical key is dropped");
    }
}
