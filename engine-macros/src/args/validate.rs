//! The rules an argument type must follow, one `check_*` per rule. Whether its fields are
//! themselves serializable is checked by the derives.

use crate::support::{Diagnostics, derived_among};

/// What the attribute goes on.
pub(crate) const WRONG_ITEM: &str =
    "`#[engine::args]` goes on a struct or an enum: the arguments of a mutator, or a type they hold";

pub(crate) fn validate(item: &syn::DeriveInput, errors: &mut Diagnostics) {
    check_struct_or_enum(item, errors);
    check_no_own_derives(item, errors);
}

/// Arguments travel as JSON, which serde maps to structs and enums; a union has no such form.
fn check_struct_or_enum(item: &syn::DeriveInput, errors: &mut Diagnostics) {
    if let syn::Data::Union(union) = &item.data {
        errors.spanned(&union.union_token, WRONG_ITEM);
    }
}

/// The attribute derives `Serialize`, `Deserialize` and `JsonSchema` itself, so the type must
/// not derive them too.
fn check_no_own_derives(item: &syn::DeriveInput, errors: &mut Diagnostics) {
    for path in derived_among(&item.attrs, &["Serialize", "Deserialize", "JsonSchema"]) {
        let name = path.segments.last().map(|s| s.ident.to_string()).unwrap_or_default();
        errors.spanned(&path, format!("`#[engine::args]` derives `{name}` itself: remove this derive"));
    }
}
