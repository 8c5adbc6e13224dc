//! Helpers every macro shares: doc comments, SQL identifiers, the default table name.

use std::fmt::Display;

use proc_macro2::{Span, TokenStream};
use quote::ToTokens;
use syn::{Attribute, Expr, ExprLit, Lit, Meta};

/// Every error a macro finds, collected so the user sees all mistakes at once, each underlined
/// on its own tokens (from the first token to the last).
#[derive(Default)]
pub(crate) struct Diagnostics {
    errors: Option<syn::Error>,
}

impl Diagnostics {
    pub(crate) fn push(&mut self, error: impl Into<syn::Error>) {
        let error = error.into();
        match &mut self.errors {
            Some(errors) => errors.combine(error),
            None => self.errors = Some(error),
        }
    }

    /// An error underlining `tokens`.
    pub(crate) fn spanned(&mut self, tokens: &dyn ToTokens, message: impl Display) {
        self.push(syn::Error::new_spanned(tokens.to_token_stream(), message));
    }

    /// An error at `span`.
    pub(crate) fn at(&mut self, span: Span, message: impl Display) {
        self.push(syn::Error::new(span, message));
    }

    /// The value of `result`, or `None` with its error recorded.
    pub(crate) fn handle<T, E: Into<syn::Error>>(&mut self, result: Result<T, E>) -> Option<T> {
        result.map_err(|e| self.push(e)).ok()
    }

    pub(crate) fn finish(self) -> Result<(), syn::Error> {
        self.errors.map_or(Ok(()), Err)
    }

    /// The output of a macro applied to an item it does not go on: the errors so far, `message`
    /// at the attribute, and the item unchanged.
    pub(crate) fn wrong_item(mut self, message: &str, item: TokenStream) -> TokenStream {
        self.at(Span::call_site(), message);
        let mut out = self.finish().expect_err("an error was pushed").to_compile_error();
        out.extend(item);
        out
    }

    /// The output of a macro: its expansion when there are no errors; otherwise the fallback
    /// (the user's item, so one mistake does not cascade) and every error.
    pub(crate) fn emit(
        self,
        expand: impl FnOnce() -> TokenStream,
        fallback: impl FnOnce() -> TokenStream,
    ) -> TokenStream {
        match self.finish() {
            Ok(()) => expand(),
            Err(err) => {
                let mut out = fallback();
                out.extend(err.to_compile_error());
                out
            }
        }
    }
}

/// The text of the `///` doc comments among `attrs`, lines joined by `\n`, trimmed.
pub(crate) fn doc_text(attrs: &[Attribute]) -> String {
    let mut lines = Vec::new();
    for attr in attrs {
        if let Meta::NameValue(nv) = &attr.meta
            && nv.path.is_ident("doc")
            && let Expr::Lit(ExprLit { lit: Lit::Str(s), .. }) = &nv.value
        {
            let line = s.value();
            lines.push(line.strip_prefix(' ').unwrap_or(&line).trim_end().to_owned());
        }
    }
    lines.join("\n").trim().to_owned()
}

/// The paths in `#[derive(...)]` among `attrs` whose last segment is one of `names`, however
/// they are spelled (`Serialize`, `serde::Serialize`).
pub(crate) fn derived_among(attrs: &[Attribute], names: &[&str]) -> Vec<syn::Path> {
    let mut found = Vec::new();
    for attr in attrs.iter().filter(|attr| attr.path().is_ident("derive")) {
        let _ = attr.parse_nested_meta(|meta| {
            if meta.path.segments.last().is_some_and(|last| names.iter().any(|name| last.ident == name)) {
                found.push(meta.path.clone());
            }
            Ok(())
        });
    }
    found
}

/// `tokens` as the user wrote them, to quote in a message: token streams print `a . b` and
/// `A :: b`, which no one writes.
pub(crate) fn text(tokens: &dyn ToTokens) -> String {
    let text = tokens.to_token_stream().to_string();
    text.replace(" . ", ".").replace(" :: ", "::").replace(" (", "(").replace("( ", "(").replace(" )", ")")
}

/// `T` of a type written `Option<T>` (by any path ending in `Option`).
pub(crate) fn option_inner(ty: &syn::Type) -> Option<&syn::Type> {
    let syn::Type::Path(path) = ty else { return None };
    let last = path.path.segments.last()?;
    match &last.arguments {
        syn::PathArguments::AngleBracketed(args) if last.ident == "Option" && args.args.len() == 1 => {
            match args.args.first() {
                Some(syn::GenericArgument::Type(inner)) => Some(inner),
                _ => None,
            }
        }
        _ => None,
    }
}

/// Table and column names: shared with the tools that read the names back (`engine introspect`).
pub(crate) use engine_kernel::table::{default_table_name, is_sql_identifier};

/// The prefix of the engine's own tables and columns, which user names may not start with.
pub(crate) const RESERVED_PREFIX: &str = "_engine";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_table_names_follow_the_documented_rule() {
        for (name, table) in [
            ("Note", "notes"),
            ("ListMember", "list_members"),
            ("Category", "categories"),
            ("Day", "days"),
            ("Box", "boxes"),
            ("Status", "statuses"),
            ("Match", "matches"),
            ("HTTPLog", "http_logs"),
        ] {
            assert_eq!(default_table_name(name), table, "{name}");
        }
    }

    #[test]
    fn sql_identifiers() {
        assert!(is_sql_identifier("list_members"));
        assert!(is_sql_identifier("_x1"));
        assert!(!is_sql_identifier("1x"));
        assert!(!is_sql_identifier("Notes"));
        assert!(!is_sql_identifier("a-b"));
        assert!(!is_sql_identifier(""));
        assert!(!is_sql_identifier(&"a".repeat(64)));
    }
}
