//! `engine::app!`: tables, mutators and sync rules bundled into one `engine::App`, with the
//! checks of `AppBuilder::build` done at compile time: no two mutators share a wire name, no two
//! tables share a SQL name, and every table a sync rule reads is listed.

mod args;
mod expand;

use proc_macro2::TokenStream;

pub(crate) fn app_inner(input: TokenStream) -> TokenStream {
    match syn::parse2::<args::AppArgs>(input) {
        Ok(args) => expand::expand(&args),
        Err(err) => {
            let error = err.to_compile_error();
            // Still an expression of type `App`, so the error is the only one reported.
            quote::quote!({ #error; ::engine::__private::App::builder().build().unwrap() })
        }
    }
}

#[cfg(test)]
mod tests;
