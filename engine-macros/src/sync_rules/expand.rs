//! The code `#[engine::sync_rules]` generates: per bucket, its `engine::Bucket` impl (the struct
//! is a typed bucket key) and type checks on the user's tokens; per module, `SYNC_RULES`.

use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;

use super::model::{Bucket, Claim, ColumnRef, Compared, Condition, Literal, Membership, Rules, Selection, Source};
use crate::support::text;

/// The module with its generated items appended.
pub(crate) fn expand(rules: &Rules) -> TokenStream {
    let buckets: Vec<TokenStream> = rules.buckets.iter().map(bucket_items).collect();
    let metas = rules.buckets.iter().map(|bucket| rule_meta(rules, bucket));
    // Each table a rule selects from, with what `engine::app!` says when the app does not list it.
    let mut tables: Vec<(String, TokenStream)> = Vec::new();
    for bucket in &rules.buckets {
        for condition in bucket.selections().iter().flat_map(|s| &s.conditions) {
            if let Some((column, _)) = condition.as_scope()
                && !tables.iter().any(|(key, _)| *key == column.table_key())
            {
                let (path, table) = (&column.path, text(&column.table));
                let message = format!(
                    "sync rule `{}` selects from `{table}`, which this app's `tables: [...]` does not list: add `{table}` to it",
                    bucket.name
                );
                tables.push((column.table_key(), quote!((#path.table(), #message))));
            }
        }
    }
    let tables = tables.iter().map(|(_, entry)| entry);
    let server_only = &rules.server_only;
    let generated = quote! {
        #(#buckets)*

        /// The sync rules this module defines, for `engine::app!` (`sync_rules: <this module>`).
        pub static SYNC_RULES: ::engine::__private::SyncRules = ::engine::__private::SyncRules {
            rules: &[#(#metas,)*],
            server_only: &[#(<#server_only as ::engine::__private::Table>::META.name,)*],
        };

        #[doc(hidden)]
        pub const __ENGINE_RULE_TABLES: &[(&str, &str)] = &[#(#tables,)*];
    };
    with_items(rules, generated)
}

/// What is emitted when the module has errors: the module as written, minus the engine's
/// attributes. Its imports go unused without the generated code; the build fails anyway, so
/// warnings about them would only hide the errors.
pub(crate) fn fallback(rules: &Rules) -> TokenStream {
    let mut rules_without_code =
        Rules { item: rules.item.clone(), buckets: Vec::new(), unreadable_buckets: true, server_only: Vec::new() };
    rules_without_code.item.attrs.push(syn::parse_quote!(#[allow(unused_imports)]));
    with_items(&rules_without_code, TokenStream::new())
}

fn with_items(rules: &Rules, generated: TokenStream) -> TokenStream {
    let mut item = rules.item.clone();
    if let Some((_, items)) = &mut item.content
        && !generated.is_empty()
    {
        items.push(syn::Item::Verbatim(generated));
    }
    quote!(#item)
}

fn bucket_items(bucket: &Bucket) -> TokenStream {
    let ident = &bucket.ident;
    let name = &bucket.name;
    // Reported at the field's type, resolved where the method declaring `self` is: rules that
    // come from a `macro_rules!` give the field another hygiene than the method.
    let texts = bucket.params.iter().map(|p| {
        let field = &p.field;
        let span = proc_macro2::Span::call_site().located_at(p.ty.span());
        quote_spanned!(span=> __engine::ParamValue::to_param(&self.#field))
    });
    let checks = bucket_checks(bucket);
    quote! {
        const _: () = {
            use ::engine::__private as __engine;

            impl __engine::Bucket for #ident {
                const RULE: &'static str = #name;

                fn key(&self) -> __engine::BucketKey {
                    __engine::BucketKey::new(Self::RULE, &[#(#texts,)*])
                }
            }

            impl ::core::convert::From<#ident> for __engine::BucketKey {
                fn from(bucket: #ident) -> Self {
                    __engine::Bucket::key(&bucket)
                }
            }

            impl ::core::convert::From<&#ident> for __engine::BucketKey {
                fn from(bucket: &#ident) -> Self {
                    __engine::Bucket::key(bucket)
                }
            }

            // Named after the bucket, so an error names its checks `Shared::column_of_a_table`.
            #[allow(dead_code, unused_imports, non_snake_case)]
            fn #ident() {
                #(#checks)*
            }
        };
    }
}

/// Checks whose trait bounds fail, on the user's tokens, when a table is not a table or a column
/// and what it is compared with disagree in type. Each is a local function named after what it
/// checks, so an error names the domain's trait and that name, nothing of the engine's
/// internals; its bound sits on the other side of the comparison, so the error shows both.
fn bucket_checks(bucket: &Bucket) -> Vec<TokenStream> {
    let mut checks = Vec::new();
    let mut tables_seen: Vec<String> = Vec::new();
    let mut check_table = |checks: &mut Vec<TokenStream>, column: &ColumnRef| {
        if !tables_seen.contains(&column.table_key()) {
            tables_seen.push(column.table_key());
            let (path, span) = (&column.path, column.table.span());
            let bound = quote_spanned!(span=> __engine::Table);
            checks.push(local_check(
                quote!(column_of_a_table<T: #bound, V>(_: __engine::Column<T, V>)),
                quote_spanned!(span=> column_of_a_table(#path);),
            ));
        }
    };
    let scope_check = |ty: &syn::Type, path: &syn::ExprPath| {
        let bound = quote_spanned!(ty.span()=> __engine::ParamComparable<P>);
        local_check(
            quote!(compared_with_bucket_parameter<P, T, V: #bound>(_: __engine::Column<T, V>)),
            quote_spanned!(path.span()=> compared_with_bucket_parameter::<#ty, _, _>(#path);),
        )
    };
    for param in &bucket.params {
        let ty = &param.ty;
        match param.sources.as_slice() {
            [(expr, Source::Claim(claim))] if claim.is_text() => {
                let bound = quote_spanned!(expr.span()=> __engine::TextClaimParam);
                checks.push(local_check(
                    quote!(takes_user_id_or_owner_id<P: #bound>()),
                    quote_spanned!(ty.span()=> takes_user_id_or_owner_id::<#ty>();),
                ));
            }
            [(_, Source::Column(column))] => {
                check_table(&mut checks, column);
                checks.push(scope_check(ty, &column.path));
            }
            _ => {}
        }
    }
    if let Some(Membership::Conditions { conditions, .. }) = &bucket.membership {
        for condition in conditions {
            if let Some((column, claim)) = condition.as_claim() {
                check_table(&mut checks, column);
                checks.push(claim_check(column, claim, condition.expr()));
            }
            if let Some((column, literal, expr)) = condition.as_const() {
                check_table(&mut checks, column);
                checks.push(const_check(column, literal, expr));
            }
        }
    }
    if let Some((_, column)) = &bucket.invite {
        check_table(&mut checks, column);
        let path = &column.path;
        let bound = quote_spanned!(path.span()=> __engine::InvitationColumn);
        checks.push(local_check(
            quote!(accepted_through_a_bool_column<T, V: #bound>(_: __engine::Column<T, V>)),
            quote_spanned!(path.span()=> accepted_through_a_bool_column(#path);),
        ));
    }
    let anchor = bucket.anchor.iter().map(|(_, anchor)| anchor);
    for condition in bucket.selections().iter().chain(anchor).flat_map(|s| &s.conditions) {
        if let Some((column, param)) = condition.as_scope() {
            check_table(&mut checks, column);
            if let Some(param) = bucket.param(param) {
                checks.push(scope_check(&param.ty, &column.path));
            }
        }
        if let Some((column, literal, expr)) = condition.as_const() {
            check_table(&mut checks, column);
            checks.push(const_check(column, literal, expr));
        }
    }
    if let Some(Membership::Raw { reads, .. }) = &bucket.membership {
        for table in reads {
            let bound = quote_spanned!(table.span()=> __engine::Table);
            checks.push(local_check(quote!(a_table<T: #bound>()), quote_spanned!(table.span()=> a_table::<#table>();)));
        }
    }
    for write in &bucket.writes {
        let table = &write.table;
        let bound = quote_spanned!(table.span()=> __engine::Table);
        checks.push(local_check(quote!(a_table<T: #bound>()), quote_spanned!(table.span()=> a_table::<#table>();)));
        for condition in write.any_of.iter().flatten() {
            if let Some((column, compared, _, expr)) = condition.as_row_term() {
                let column = write.row_column(column);
                match compared {
                    Compared::Literal(literal) => checks.push(const_check(&column, &literal, expr)),
                    Compared::Actor(Source::Claim(claim)) => checks.push(claim_check(&column, &claim, expr)),
                    Compared::Actor(_) => unreachable!("validated: a claim"),
                }
            } else if let Some((column, literal, expr)) = condition.as_const() {
                check_table(&mut checks, column);
                checks.push(const_check(column, literal, expr));
            }
        }
    }
    checks
}

/// The check that `column` is a column and can be compared with `claim` in `expr`: `actor.user_id`
/// and `actor.owner_id` are text; a custom claim's type is the token's, unknown here.
fn claim_check(column: &ColumnRef, claim: &Claim, expr: &syn::Expr) -> TokenStream {
    let path = &column.path;
    if !claim.is_text() {
        return local_check(
            quote!(a_column<T, V>(_: __engine::Column<T, V>)),
            quote_spanned!(path.span()=> a_column(#path);),
        );
    }
    let bound = quote_spanned!(expr.span()=> __engine::TextClaimComparable);
    local_check(
        quote!(compared_with_user_id_or_owner_id<T, V: #bound>(_: __engine::Column<T, V>)),
        quote_spanned!(path.span()=> compared_with_user_id_or_owner_id(#path);),
    )
}

/// A block declaring the local function `signature` (its body empty) and making `call`.
fn local_check(signature: TokenStream, call: TokenStream) -> TokenStream {
    quote!({
        fn #signature {}
        #call
    })
}

fn const_check(column: &ColumnRef, literal: &Literal, expr: &syn::Expr) -> TokenStream {
    let path = &column.path;
    let value = match expr {
        syn::Expr::Binary(b) if matches!(&*b.left, syn::Expr::Path(_) | syn::Expr::Field(_)) => &b.right,
        syn::Expr::Binary(b) => &b.left,
        other => return quote!(let _ = #other;),
    };
    // Text and booleans name their type, so a column of another type fails the bound (whose
    // message says so) rather than the literal's inference; integers fit any integer column.
    let constant = match literal {
        Literal::Bool(_) => quote!(bool),
        Literal::Text(_) => quote!(&'static str),
        _ => quote!(_),
    };
    let bound = quote_spanned!(value.span()=> __engine::ConstComparable<L>);
    local_check(
        quote!(compared_with_constant<T, V: #bound, L>(_: __engine::Column<T, V>, _: L)),
        quote_spanned!(expr.span()=> compared_with_constant::<_, _, #constant>(#path, #value);),
    )
}

fn rule_meta(rules: &Rules, bucket: &Bucket) -> TokenStream {
    let name = &bucket.name;
    let description = &bucket.description;
    let params = bucket.params.iter().map(|param| {
        let (field, ty) = (param.field.to_string(), &param.ty);
        let source = match param.source() {
            Some(Source::Claim(claim)) => {
                let claim = claim_tokens(claim);
                quote!(__engine::ParamSource::Claim(#claim))
            }
            Some(Source::Column(column)) => {
                let path = &column.path;
                quote!(__engine::ParamSource::Membership { column: #path.name() })
            }
            Some(Source::RawColumn(column)) => {
                let column = column.to_string();
                quote!(__engine::ParamSource::Membership { column: #column })
            }
            _ => unreachable!("validated: every parameter has one actor source"),
        };
        quote! {
            __engine::ParamMeta {
                name: #field,
                sql_type: <#ty as __engine::ColumnType>::SQL_TYPE,
                source: #source,
            }
        }
    });
    let membership = match &bucket.membership {
        None => quote!(::core::option::Option::None),
        Some(Membership::Raw { sql, reads, .. }) => {
            let reads = reads.iter().map(|table| quote!(<#table as __engine::Table>::META.name));
            quote!(::core::option::Option::Some(__engine::Membership::Raw { sql: #sql, reads: &[#(#reads,)*] }))
        }
        Some(Membership::Conditions { conditions, .. }) => {
            let table = &conditions.iter().flat_map(Condition::columns).next().expect("validated").path;
            let filters = conditions.iter().map(|condition| {
                if let Some((column, claim)) = condition.as_claim() {
                    let (path, claim) = (&column.path, claim_tokens(claim));
                    quote!(__engine::MembershipFilter { column: #path.name(), value: __engine::FilterValue::Claim(#claim) })
                } else {
                    let (column, literal, _) = condition.as_const().expect("validated: claim or constant");
                    let (path, value) = (&column.path, const_value(literal));
                    quote!(__engine::MembershipFilter { column: #path.name(), value: __engine::FilterValue::Const(#value) })
                }
            });
            // An invitation grants nothing until accepted: the query requires its column true.
            let accepted = bucket.invite.iter().map(|(_, column)| {
                let path = &column.path;
                quote!(__engine::MembershipFilter {
                    column: #path.name(),
                    value: __engine::FilterValue::Const(__engine::ConstValue::Bool(true)),
                })
            });
            quote! {
                ::core::option::Option::Some(__engine::Membership::Table {
                    table: #table.table(),
                    filters: &[#(#filters,)* #(#accepted,)*],
                })
            }
        }
    };
    let selections = bucket.selections().iter().map(selection_meta);
    let anchor = match &bucket.anchor {
        Some((_, anchor)) => {
            let anchor = selection_meta(anchor);
            quote!(::core::option::Option::Some(#anchor))
        }
        None => quote!(::core::option::Option::None),
    };
    let writes = bucket.writes.iter().map(|write| {
        let table = &write.table;
        let any_of = write.any_of.iter().map(|all| {
            let row = all.iter().filter_map(Condition::as_row_term).map(|(column, compared, equal, _)| {
                let path = write.row_column(column).path;
                let value = match &compared {
                    Compared::Literal(literal) => {
                        let value = const_value(literal);
                        quote!(__engine::FilterValue::Const(#value))
                    }
                    Compared::Actor(Source::Claim(claim)) => {
                        let claim = claim_tokens(claim);
                        quote!(__engine::FilterValue::Claim(#claim))
                    }
                    Compared::Actor(_) => unreachable!("validated: a claim"),
                };
                quote!(__engine::RowTerm { column: #path.name(), value: #value, equal: #equal })
            });
            let member = all.iter().filter(|c| c.as_row_term().is_none()).filter_map(Condition::as_const).map(
                |(column, literal, _)| {
                    let (path, value) = (&column.path, const_value(literal));
                    quote!(__engine::ConstFilter { column: #path.name(), value: #value })
                },
            );
            quote!(__engine::WriteAlternative { member: &[#(#member,)*], row: &[#(#row,)*] })
        });
        quote! {
            __engine::WriteRule {
                table: <#table as __engine::Table>::META.name,
                any_of: &[#(#any_of,)*],
            }
        }
    });
    let accepts = bucket.accepts.iter().filter_map(|accept| {
        let source = rules.buckets.iter().find(|b| b.ident == accept.bucket)?;
        let (rule, open) = (&source.name, accept.open);
        Some(quote!(__engine::Accept { rule: #rule, open: #open }))
    });
    let leave = bucket.leave.is_some();
    let invite = match &bucket.invite {
        Some((_, column)) => {
            let path = &column.path;
            quote!(::core::option::Option::Some(#path.name()))
        }
        None => quote!(::core::option::Option::None),
    };
    let held_while =
        match bucket.held_while.as_ref().and_then(|source| rules.buckets.iter().find(|b| b.ident == *source)) {
            Some(source) => {
                let name = &source.name;
                quote!(::core::option::Option::Some(#name))
            }
            None => quote!(::core::option::Option::None),
        };
    quote! {
        {
            use ::engine::__private as __engine;
            __engine::RuleMeta {
                name: #name,
                description: #description,
                parameters: &[#(#params,)*],
                membership: #membership,
                data: &[#(#selections,)*],
                writes: &[#(#writes,)*],
                accepts: &[#(#accepts,)*],
                leave: #leave,
                invite: #invite,
                held_while: #held_while,
                anchor: #anchor,
            }
        }
    }
}

/// A selection (of `data(...)`, or the anchor) as the kernel's `Selection`.
fn selection_meta(selection: &Selection) -> TokenStream {
    let table = &selection.conditions.iter().flat_map(Condition::columns).next().expect("validated: scoped").path;
    let scope = selection.conditions.iter().filter_map(Condition::as_scope).map(|(column, param)| {
        let (path, param) = (&column.path, param.to_string());
        quote!(__engine::ScopeEq { column: #path.name(), param: #param })
    });
    let filters = selection.conditions.iter().filter_map(Condition::as_const).map(|(column, literal, _)| {
        let (path, value) = (&column.path, const_value(literal));
        quote!(__engine::ConstFilter { column: #path.name(), value: #value })
    });
    quote! {
        __engine::Selection {
            table: #table.table(),
            scope: &[#(#scope,)*],
            filters: &[#(#filters,)*],
        }
    }
}

fn claim_tokens(claim: &Claim) -> TokenStream {
    match claim {
        Claim::UserId => quote!(__engine::Claim::UserId),
        Claim::OwnerId => quote!(__engine::Claim::OwnerId),
        Claim::Custom(name) => quote!(__engine::Claim::Custom(#name)),
    }
}

fn const_value(literal: &Literal) -> TokenStream {
    match literal {
        Literal::Bool(b) => quote!(__engine::ConstValue::Bool(#b)),
        Literal::Int(i) => quote!(__engine::ConstValue::Int(#i)),
        Literal::Text(s) => quote!(__engine::ConstValue::Text(#s)),
        Literal::Unsupported => unreachable!("validated: supported constants only"),
    }
}
