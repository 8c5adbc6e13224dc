//! The typed model of a table declaration, with the spans diagnostics point at.

use darling::FromField;
use proc_macro2::Span;
use syn::spanned::Spanned;

use super::args::{FieldArgs, TableArgs};
use crate::support::{Diagnostics, default_table_name, doc_text};

/// A table declaration.
pub(crate) struct Table {
    /// The struct, without the `#[engine(...)]` field attributes.
    pub(crate) item: syn::ItemStruct,
    /// The SQL table name and where it was written (or the struct's name).
    pub(crate) name: String,
    pub(crate) name_span: Span,
    /// The merge policy and where it was written.
    pub(crate) merge: Merge,
    /// The struct's doc comment.
    pub(crate) description: String,
    /// The columns, in declaration order.
    pub(crate) columns: Vec<Column>,
    /// Whether some field's `#[engine(...)]` could not be read (its column is missing).
    pub(crate) field_errors: bool,
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Merge {
    Lww,
    Field,
    Crdt,
}

/// A column: one named field.
pub(crate) struct Column {
    pub(crate) field: syn::Ident,
    pub(crate) ty: syn::Type,
    /// The SQL name and the span of whatever chose it (the `rename` value or the field).
    pub(crate) name: String,
    pub(crate) name_span: Span,
    pub(crate) primary_key: Option<Span>,
    pub(crate) owner: Option<Span>,
    pub(crate) soft_delete: Option<Span>,
    pub(crate) description: String,
}

impl Table {
    pub(crate) fn build(mut item: syn::ItemStruct, args: TableArgs, errors: &mut Diagnostics) -> Self {
        let (name, name_span) = match &args.name {
            Some(name) => (name.as_ref().clone(), name.span()),
            None => (default_table_name(&item.ident.to_string()), item.ident.span()),
        };
        let merge = match args.merge.as_ref().map(|m| (m.as_str(), m.span())) {
            None | Some(("lww", _)) => Merge::Lww,
            Some(("field", _)) => Merge::Field,
            Some(("crdt", _)) => Merge::Crdt,
            Some((other, span)) => {
                errors.at(
                    span,
                    format!(
                        "unknown merge policy `{other}`: write `merge = \"lww\"` (whole rows, the default), `merge = \"field\"` (per column) or `merge = \"crdt\"` (collaborative columns only)"
                    ),
                );
                Merge::Lww
            }
        };
        let mut columns = Vec::new();
        let mut field_errors = false;
        if let syn::Fields::Named(fields) = &mut item.fields {
            for field in &mut fields.named {
                match errors.handle(FieldArgs::from_field(field)) {
                    Some(args) => columns.push(Column::build(args, field)),
                    None => field_errors = true,
                }
                field.attrs.retain(|attr| !attr.path().is_ident("engine"));
            }
        } else {
            errors.spanned(
                &item.ident,
                "`#[engine::table]` goes on a struct with named fields, one per column: write `struct Name { field: Type, … }`",
            );
        }
        let description = doc_text(&item.attrs);
        Table { item, name, name_span, merge, description, columns, field_errors }
    }

    pub(crate) fn primary_key(&self) -> impl Iterator<Item = &Column> {
        self.columns.iter().filter(|c| c.primary_key.is_some())
    }
}

impl Column {
    fn build(args: FieldArgs, field: &syn::Field) -> Self {
        let ident = args.ident.expect("named fields have idents");
        let (name, name_span) = match &args.rename {
            Some(rename) => (rename.as_ref().clone(), rename.span()),
            None => (ident.to_string().trim_start_matches("r#").to_owned(), ident.span()),
        };
        let flag = |f: &darling::util::Flag| f.is_present().then(|| f.span());
        Column {
            name,
            name_span,
            primary_key: flag(&args.primary_key),
            owner: flag(&args.owner),
            soft_delete: flag(&args.soft_delete),
            description: doc_text(&field.attrs),
            ty: args.ty,
            field: ident,
        }
    }

    /// Whether the merge policy constrains this column's type (keys, the owner and the
    /// soft-delete column are bookkeeping, not data).
    pub(crate) fn is_data(&self) -> bool {
        self.primary_key.is_none() && self.owner.is_none() && self.soft_delete.is_none()
    }

    pub(crate) fn ty_span(&self) -> Span {
        self.ty.span()
    }
}
