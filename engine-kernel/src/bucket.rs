//! Buckets: the unit of sync. A bucket key names one instance of a sync rule by the rule's name
//! and its parameter values, in one canonical encoding (`docs/protocol.md#bucket-keys`,
//! `docs/design.md` §2), so no two rules and no two parameter sets can ever share a key.
//!
//! Encoding: `<rule>/<param>/<param>…`, parameters in declaration order, each the parameter's
//! text form with every byte outside `A-Z a-z 0-9 - . _ ~` written `%XX` (uppercase hex). A key
//! parses only if it is in this canonical form.

use std::fmt;
use std::sync::Arc;

use crate::column::ColumnType;
use crate::error::Error;

/// A bucket key such as `own/alice` or `shared/0192…`. Cloning one is cheap: every row of a pull
/// carries the keys of its buckets.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BucketKey(Arc<str>);

impl BucketKey {
    /// The key of rule `rule` with parameters `params` (their text forms, in order).
    pub fn new<S: AsRef<str>>(rule: &str, params: &[S]) -> Self {
        let mut key = String::with_capacity(rule.len() + params.len() * 16);
        key.push_str(rule);
        for param in params {
            key.push('/');
            percent_encode(param.as_ref(), &mut key);
        }
        BucketKey(key.into())
    }

    /// Parse a key, accepting only its canonical encoding.
    ///
    /// # Errors
    /// If the rule name is not an identifier, or a parameter is not canonically percent-encoded.
    pub fn parse(s: &str) -> Result<Self, Error> {
        let mut parts = s.split('/');
        let rule = parts.next().unwrap_or_default();
        if !is_rule_name(rule) {
            return Err(Error::validation(format!("bucket key {s:?} does not start with a rule name")));
        }
        // A part of unreserved bytes only is canonical as it is: most keys, checked without
        // decoding and encoding again.
        for part in parts.filter(|part| !part.bytes().all(is_unreserved)) {
            let decoded = percent_decode(part)
                .ok_or_else(|| Error::validation(format!("bucket key {s:?} is not canonically encoded")))?;
            let mut again = String::new();
            percent_encode(&decoded, &mut again);
            if again != part {
                return Err(Error::validation(format!("bucket key {s:?} is not canonically encoded")));
            }
        }
        Ok(BucketKey(s.into()))
    }

    /// The name of the rule the bucket belongs to.
    pub fn rule(&self) -> &str {
        self.0.split('/').next().unwrap_or_default()
    }

    /// The parameters' text forms, in order.
    pub fn params(&self) -> Vec<String> {
        self.0.split('/').skip(1).map(|p| percent_decode(p).unwrap_or_default()).collect()
    }

    /// The key as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for BucketKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl AsRef<str> for BucketKey {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl std::str::FromStr for BucketKey {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        BucketKey::parse(s)
    }
}

impl serde::Serialize for BucketKey {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

impl<'de> serde::Deserialize<'de> for BucketKey {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        BucketKey::parse(&s).map_err(serde::de::Error::custom)
    }
}

/// The canonical form of a bucket key as a regular expression: exactly the keys
/// [`BucketKey::parse`] accepts. A parameter's byte is written as itself when it is unreserved
/// (`A-Z a-z 0-9 - . _ ~`) and as `%XX` (uppercase hex) otherwise, and the bytes spell UTF-8.
const CANONICAL_KEY: &str = concat!(
    "^[A-Za-z_][A-Za-z0-9_]*(/(",
    "[A-Za-z0-9._~-]",
    // An ASCII byte that is not unreserved.
    "|%([01][0-9A-F]|2[0-9A-CF]|3[A-F]|40|5[B-E]|60|7[B-DF])",
    // Two, three and four bytes of UTF-8, without overlong forms or surrogates.
    "|%(C[2-9A-F]|D[0-9A-F])%[89AB][0-9A-F]",
    "|%E0%[AB][0-9A-F]%[89AB][0-9A-F]|%E[1-9A-CEF](%[89AB][0-9A-F]){2}|%ED%[89][0-9A-F]%[89AB][0-9A-F]",
    "|%F0%[9AB][0-9A-F](%[89AB][0-9A-F]){2}|%F[1-3](%[89AB][0-9A-F]){3}|%F4%8[0-9A-F](%[89AB][0-9A-F]){2}",
    ")*)*$"
);

impl schemars::JsonSchema for BucketKey {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "BucketKey".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "pattern": CANONICAL_KEY,
            "description": "<rule>/<param>/…, parameters percent-encoded (canonical, uppercase hex)"
        })
    }
}

/// Whether `name` can name a sync rule: an ASCII identifier.
pub fn is_rule_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    matches!(bytes.next(), Some(b) if b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// A byte a parameter's encoding writes as itself.
fn is_unreserved(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~')
}

fn percent_encode(text: &str, out: &mut String) {
    for byte in text.bytes() {
        if is_unreserved(byte) {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
}

fn percent_decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = text.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// A type a bucket parameter can have, and its text form inside a bucket key.
#[diagnostic::on_unimplemented(
    message = "a bucket parameter cannot be a `{Self}`",
    label = "not a parameter type",
    note = "bucket parameters are `String`, `i16`, `i32`, `i64`, `uuid::Uuid` or `bool`"
)]
pub trait ParamValue: ColumnType + Clone + PartialEq {
    /// The text form inside a bucket key.
    fn to_param(&self) -> String;
    /// The value of a text form, if it is one.
    fn from_param(text: &str) -> Option<Self>;
}

impl ParamValue for String {
    fn to_param(&self) -> String {
        self.clone()
    }
    fn from_param(text: &str) -> Option<Self> {
        Some(text.to_owned())
    }
}

macro_rules! parsed_param {
    ($($ty:ty),*) => {$(
        impl ParamValue for $ty {
            fn to_param(&self) -> String {
                self.to_string()
            }
            fn from_param(text: &str) -> Option<Self> {
                let value: $ty = text.parse().ok()?;
                // Only the canonical text form names the bucket.
                (value.to_param() == text).then_some(value)
            }
        }
    )*};
}
parsed_param!(i16, i32, i64, bool, uuid::Uuid);

/// A column type a sync rule may compare with a bucket parameter of type `P` (or fill `P`
/// from, for a membership column): the parameter's own type, or `Option` of it, whose null
/// rows belong to no bucket.
#[diagnostic::on_unimplemented(
    message = "a column of type `{Self}` cannot be compared with a bucket parameter of type `{P}`",
    label = "this column is a `{Self}`",
    note = "declare the bucket parameter with the column's type"
)]
pub trait ParamComparable<P> {}
impl<P: ParamValue> ParamComparable<P> for P {}
impl<P: ParamValue> ParamComparable<P> for Option<P> {}

/// A column type a sync rule may compare with a constant of type `L` (`List::archived ==
/// false`): text, booleans and integers, nullable or not.
#[diagnostic::on_unimplemented(
    message = "a column of type `{Self}` cannot be compared with a constant of type `{L}`",
    label = "this column is a `{Self}`"
)]
pub trait ConstComparable<L> {}
impl ConstComparable<&'static str> for String {}
impl ConstComparable<&'static str> for Option<String> {}
impl ConstComparable<bool> for bool {}
impl ConstComparable<bool> for Option<bool> {}
impl ConstComparable<i16> for i16 {}
impl ConstComparable<i16> for Option<i16> {}
impl ConstComparable<i32> for i32 {}
impl ConstComparable<i32> for Option<i32> {}
impl ConstComparable<i64> for i64 {}
impl ConstComparable<i64> for Option<i64> {}

/// The type of the column a member accepts an invitation through (`invite(Member::accepted)`):
/// a `bool`, false while the invitation is pending.
#[diagnostic::on_unimplemented(
    message = "a member accepts an invitation by setting a `bool` column to true, and this column is a `{Self}`",
    label = "this column is a `{Self}`",
    note = "declare the column `bool` (false while the invitation is pending)"
)]
pub trait InvitationColumn {}
impl InvitationColumn for bool {}

/// The type of a bucket parameter taken from `actor.user_id` or `actor.owner_id`: a `String`.
#[diagnostic::on_unimplemented(
    message = "`actor.user_id` and `actor.owner_id` are `String`s, so this bucket parameter cannot be a `{Self}`",
    label = "make this `String`"
)]
pub trait TextClaimParam {}
impl TextClaimParam for String {}

/// A column type a membership query may compare with `actor.user_id` or `actor.owner_id`.
#[diagnostic::on_unimplemented(
    message = "a column of type `{Self}` cannot be compared with `actor.user_id` or `actor.owner_id`, which are `String`s",
    label = "this column is a `{Self}`"
)]
pub trait TextClaimComparable {}
impl TextClaimComparable for String {}
impl TextClaimComparable for Option<String> {}

/// A typed bucket of a sync rule: the struct `#[engine::sync_rules]` generates for each bucket
/// definition, whose fields are the bucket's parameters.
pub trait Bucket {
    /// The rule's name, the first segment of its keys.
    const RULE: &'static str;
    /// The bucket's key.
    fn key(&self) -> BucketKey;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_namespaced_and_canonical() {
        let key = BucketKey::new("shared", &["a/b c%", "é"]);
        assert_eq!(key.as_str(), "shared/a%2Fb%20c%25/%C3%A9");
        assert_eq!(key.rule(), "shared");
        assert_eq!(key.params(), vec!["a/b c%".to_owned(), "é".to_owned()]);
        assert_eq!(BucketKey::parse(key.as_str()).unwrap(), key);
        assert_ne!(BucketKey::new("own", &["x"]), BucketKey::new("shared", &["x"]));
        assert_eq!(BucketKey::new("own", &[""]).as_str(), "own/");
    }

    #[test]
    fn only_the_canonical_form_parses() {
        for bad in ["", "/x", "1rule/x", "own/a%2fb", "own/a b", "own/%4", "own/%41", "own/é", "ow n/x"] {
            assert!(BucketKey::parse(bad).is_err(), "{bad:?} parsed");
        }
        assert!(BucketKey::parse("own/a.b_c~d-e").is_ok());
    }

    /// The parse without its shortcut for parts of unreserved bytes: every part decoded and
    /// encoded again.
    fn canonical_by_round_trip(s: &str) -> bool {
        let mut parts = s.split('/');
        is_rule_name(parts.next().unwrap_or_default())
            && parts.all(|part| {
                percent_decode(part).is_some_and(|decoded| {
                    let mut again = String::new();
                    percent_encode(&decoded, &mut again);
                    again == part
                })
            })
    }

    #[test]
    fn the_parse_accepts_what_a_round_trip_keeps() {
        let alphabet = ['a', 'Z', '%', '4', '1', 'F', 'f', '/', '~', ' ', 'é', 'C', '3', '9'];
        // Every tail of up to four characters of the alphabet.
        let mut tails = vec![String::new()];
        let mut last = tails.clone();
        for _ in 0..4 {
            last = last.iter().flat_map(|t| alphabet.iter().map(move |c| format!("{t}{c}"))).collect();
            tails.extend(last.iter().cloned());
        }
        assert_eq!(tails.len(), 1 + 14 + 14 * 14 + 14 * 14 * 14 + 14 * 14 * 14 * 14);
        for tail in &tails {
            let key = format!("own/{tail}");
            assert_eq!(BucketKey::parse(&key).is_ok(), canonical_by_round_trip(&key), "{key:?}");
        }
    }

    #[test]
    fn parameter_text_forms_round_trip_canonically() {
        assert_eq!(i64::from_param("-42"), Some(-42));
        assert_eq!(i64::from_param("+42"), None);
        assert_eq!(i64::from_param("042"), None);
        assert_eq!(bool::from_param("true"), Some(true));
        let id = uuid::Uuid::now_v7();
        assert_eq!(uuid::Uuid::from_param(&id.to_param()), Some(id));
        assert_eq!(uuid::Uuid::from_param(&id.to_param().to_uppercase()), None);
    }
}
