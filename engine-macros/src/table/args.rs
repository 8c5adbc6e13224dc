//! The arguments of `#[engine::table(...)]` and the `#[engine(...)]` attributes of its fields.

use darling::util::{Flag, SpannedValue};
use darling::{FromField, FromMeta};
use proc_macro2::TokenStream;

/// `#[engine::table(name = "…", merge = "lww" | "field" | "crdt")]`.
#[derive(Debug, Default, FromMeta)]
pub(crate) struct TableArgs {
    /// The SQL table name.
    pub(crate) name: Option<SpannedValue<String>>,
    /// The merge policy.
    pub(crate) merge: Option<SpannedValue<String>>,
}

impl TableArgs {
    pub(crate) fn parse(args: TokenStream) -> darling::Result<Self> {
        let items = darling::ast::NestedMeta::parse_meta_list(args)?;
        TableArgs::from_list(&items)
    }
}

/// `#[engine(primary_key, owner, soft_delete, rename = "…")]` on a field.
#[derive(Debug, FromField)]
#[darling(attributes(engine))]
pub(crate) struct FieldArgs {
    pub(crate) ident: Option<syn::Ident>,
    pub(crate) ty: syn::Type,
    /// Part of the primary key.
    pub(crate) primary_key: Flag,
    /// The owner column.
    pub(crate) owner: Flag,
    /// The soft-delete column.
    pub(crate) soft_delete: Flag,
    /// The SQL column name, when it differs from the field's.
    pub(crate) rename: Option<SpannedValue<String>>,
}
