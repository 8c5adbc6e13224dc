//! The macros of `engine`. Each entry point is a thin shim over an `*_inner` function on
//! `proc_macro2` tokens, which runs its macro's phases: parse the arguments (`args`), build a
//! typed model that keeps spans (`model`), check the rules, collecting every error
//! (`validate`), and generate code (`expand`).
//!
//! Use them through the `engine` crate: generated code names `::engine::__private`.

use proc_macro::TokenStream;

mod app;
mod args;
mod mutator;
mod support;
mod sync_rules;
mod table;

/// Declare a table. See `engine::table`.
#[proc_macro_attribute]
pub fn table(args: TokenStream, item: TokenStream) -> TokenStream {
    table::table_inner(args.into(), item.into()).into()
}

/// Declare a mutator. See `engine::mutator`.
#[proc_macro_attribute]
pub fn mutator(args: TokenStream, item: TokenStream) -> TokenStream {
    mutator::mutator_inner(args.into(), item.into()).into()
}

/// Derive what a mutator's arguments need, through the engine's crates. See `engine::args`.
#[proc_macro_attribute]
pub fn args(args: TokenStream, item: TokenStream) -> TokenStream {
    args::args_inner(args.into(), item.into()).into()
}

/// Declare sync rules. See `engine::sync_rules`.
#[proc_macro_attribute]
pub fn sync_rules(args: TokenStream, item: TokenStream) -> TokenStream {
    sync_rules::sync_rules_inner(args.into(), item.into()).into()
}

/// Bundle an app. See `engine::app!`.
#[proc_macro]
pub fn app(input: TokenStream) -> TokenStream {
    app::app_inner(input.into()).into()
}
