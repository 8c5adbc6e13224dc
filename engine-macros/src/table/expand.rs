//! The code `#[engine::table]` generates.

use proc_macro2::{Ident, Span, TokenStream};
use quote::{format_ident, quote, quote_spanned};

use super::model::{Column, Merge, Table};

/// The name of the constant holding column `index`'s codec.
fn codec(index: usize) -> Ident {
    format_ident!("__ENGINE_COLUMN_{}", index)
}

/// The full expansion of a valid table.
pub(crate) fn expand(table: &Table) -> TokenStream {
    let item = &table.item;
    let ident = &item.ident;
    let handles = column_handles(table);
    let name = &table.name;
    let struct_name = ident.to_string();
    let description = &table.description;
    let merge = match table.merge {
        Merge::Lww => quote!(Lww),
        Merge::Field => quote!(Field),
        Merge::Crdt => quote!(Crdt),
    };

    let codecs = table.columns.iter().enumerate().map(|(i, c)| {
        let (ty, codec) = (&c.ty, codec(i));
        quote_spanned!(c.ty_span()=> const #codec: __engine::ColumnCodec<#ty> = __engine::ColumnCodec::new();)
    });
    let column_metas = table.columns.iter().enumerate().map(|(i, c)| {
        let (column, field, doc, codec) = (&c.name, c.field.to_string(), &c.description, codec(i));
        quote!(__engine::column_meta(&#codec, #column, #field, #doc))
    });
    let primary_key = table.primary_key().map(|c| &c.name);
    let owner = option(table.columns.iter().find(|c| c.owner.is_some()).map(|c| &c.name));
    let soft_delete = option(table.columns.iter().find(|c| c.soft_delete.is_some()).map(|c| &c.name));

    let key: Vec<(usize, &Column)> =
        table.columns.iter().enumerate().filter(|(_, c)| c.primary_key.is_some()).collect();
    let (key_type, key_of_self, key_row) = if let [(i, only)] = key.as_slice() {
        let (ty, field, column, codec) = (&only.ty, &only.field, &only.name, codec(*i));
        (
            quote!(#ty),
            quote!(::core::clone::Clone::clone(&self.#field)),
            quote!(__engine::put_column(&mut row, #column, &#codec, key);),
        )
    } else {
        let types = key.iter().map(|(_, c)| &c.ty);
        let fields = key.iter().map(|(_, c)| &c.field);
        let puts = key.iter().enumerate().map(|(k, (i, c))| {
            let (index, column, codec) = (syn::Index::from(k), &c.name, codec(*i));
            quote!(__engine::put_column(&mut row, #column, &#codec, &key.#index);)
        });
        (quote!((#(#types,)*)), quote!((#(::core::clone::Clone::clone(&self.#fields),)*)), quote!(#(#puts)*))
    };

    let puts = table.columns.iter().enumerate().map(|(i, c)| {
        let (field, column, codec) = (&c.field, &c.name, codec(i));
        quote!(__engine::put_column(&mut row, #column, &#codec, &self.#field);)
    });
    let takes = table.columns.iter().enumerate().map(|(i, c)| {
        let (field, column, codec) = (&c.field, &c.name, codec(i));
        quote!(#field: __engine::take_column(&mut row, #name, #column, &#codec)?,)
    });
    let checks = role_checks(table);
    let merge_checks = merge_checks(table);

    quote! {
        #item
        #handles

        const _: () = {
            use ::engine::__private as __engine;

            #(#codecs)*
            #(#merge_checks)*

            impl __engine::Table for #ident {
                const META: &'static __engine::TableMeta = &__engine::TableMeta {
                    name: #name,
                    struct_name: #struct_name,
                    description: #description,
                    columns: &[#(#column_metas,)*],
                    primary_key: &[#(#primary_key,)*],
                    owner: #owner,
                    soft_delete: #soft_delete,
                    merge: __engine::MergePolicy::#merge,
                };
                type Key = #key_type;

                fn key(&self) -> Self::Key {
                    #key_of_self
                }

                fn key_row(key: &Self::Key) -> __engine::Row {
                    let mut row = __engine::Row::new();
                    #key_row
                    row
                }

                fn to_row(&self) -> __engine::Row {
                    let mut row = __engine::Row::new();
                    #(#puts)*
                    row
                }

                fn from_row(mut row: __engine::Row) -> __engine::Result<Self> {
                    ::core::result::Result::Ok(#ident { #(#takes)* })
                }
            }

            impl __engine::serde::Serialize for #ident {
                fn serialize<__S: __engine::serde::Serializer>(
                    &self,
                    serializer: __S,
                ) -> ::core::result::Result<__S::Ok, __S::Error> {
                    __engine::serialize_row(self, serializer)
                }
            }

            impl<'de> __engine::serde::Deserialize<'de> for #ident {
                fn deserialize<__D: __engine::serde::Deserializer<'de>>(
                    deserializer: __D,
                ) -> ::core::result::Result<Self, __D::Error> {
                    __engine::deserialize_row(deserializer)
                }
            }

            impl __engine::schemars::JsonSchema for #ident {
                fn schema_name() -> ::std::borrow::Cow<'static, str> {
                    ::std::borrow::Cow::Borrowed(#struct_name)
                }

                fn schema_id() -> ::std::borrow::Cow<'static, str> {
                    ::std::borrow::Cow::Borrowed(::core::concat!(::core::module_path!(), "::", #struct_name))
                }

                fn json_schema(_: &mut __engine::schemars::SchemaGenerator) -> __engine::schemars::Schema {
                    __engine::row_schema(<Self as __engine::Table>::META)
                }
            }

            // Named after the table, so an error names its checks `Note::primary_key`.
            #[allow(dead_code, non_snake_case)]
            fn #ident() {
                #(#checks)*
            }
        };
    }
}

/// What is emitted when the declaration has errors: the struct and (unless it is generic) its
/// column handles, so the rest of the crate does not drown the real error in "cannot find" noise.
pub(crate) fn fallback(table: &Table) -> TokenStream {
    let item = &table.item;
    if !table.item.generics.params.is_empty() {
        return quote!(#item);
    }
    let handles = column_handles(table);
    quote!(#item #handles)
}

/// `Note::title`: a typed handle per column.
fn column_handles(table: &Table) -> TokenStream {
    let ident = &table.item.ident;
    let vis = &table.item.vis;
    let table_name = &table.name;
    let handles = table.columns.iter().map(|c| {
        let table = table_name;
        let (field, ty, column) = (&c.field, &c.ty, &c.name);
        let doc = format!(" The column `{table}.{column}`.");
        quote! {
            #[doc = #doc]
            #vis const #field: ::engine::__private::Column<#ident, #ty> = ::engine::__private::Column::new(#table, #column);
        }
    });
    quote! {
        #[allow(non_upper_case_globals)]
        impl #ident {
            #(#handles)*
        }
    }
}

/// One check per role a column plays (key, owner, soft delete): a local function named after
/// the role, whose bound sits on the user's `#[engine(...)]` flag and fails on the column's type
/// when the type cannot play the role. The error names the role's trait and the flag, nothing
/// of the engine's internals.
fn role_checks(table: &Table) -> Vec<TokenStream> {
    let mut checks = Vec::new();
    for c in &table.columns {
        let ty = &c.ty;
        let roles = [
            ("primary_key", c.primary_key, "KeyColumn"),
            ("owner", c.owner, "OwnerColumn"),
            ("soft_delete", c.soft_delete, "SoftDeleteColumn"),
        ];
        for (role, flag, bound) in roles {
            let Some(flag) = flag else { continue };
            let role = Ident::new(role, Span::call_site());
            let bound = Ident::new(bound, flag);
            let bound = quote_spanned!(flag=> __engine::#bound);
            let call = quote_spanned!(c.ty_span()=> #role::<#ty>(););
            checks.push(quote!({
                fn #role<V: #bound>() {}
                #call
            }));
        }
    }
    checks
}

/// The merge policy's rule on each data column, asserted at compile time on its codec's SQL type:
/// a `lww` table holds no collaborative column, a `crdt` table nothing else.
fn merge_checks(table: &Table) -> Vec<TokenStream> {
    let rule = match table.merge {
        Merge::Lww => quote!(!),
        Merge::Crdt => quote!(),
        Merge::Field => return Vec::new(),
    };
    let message = match table.merge {
        Merge::Lww => {
            "a `lww` table replaces whole rows, so it cannot hold a collaborative column: declare the table with `merge = \"field\"` (scalar and collaborative columns) or `merge = \"crdt\"` (collaborative columns only)"
        }
        _ => {
            "a `crdt` table holds only collaborative columns (`CrdtText`, `CrdtMap`) besides its keys, owner and soft-delete column: make this column collaborative, or declare the table with `merge = \"field\"` to mix scalar and collaborative columns"
        }
    };
    table
        .columns
        .iter()
        .enumerate()
        .filter(|(_, c)| table.merge == Merge::Lww || c.is_data())
        .map(|(i, c)| {
            let codec = codec(i);
            quote_spanned!(c.ty_span()=> const _: () = ::core::assert!(#rule #codec.sql_type.is_crdt(), #message);)
        })
        .collect()
}

fn option(value: Option<&String>) -> TokenStream {
    match value {
        Some(v) => quote!(::core::option::Option::Some(#v)),
        None => quote!(::core::option::Option::None),
    }
}
