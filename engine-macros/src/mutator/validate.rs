//! The rules a mutator declaration must follow, one `check_*` per rule. That the arguments are
//! `Serialize + Deserialize + JsonSchema` and that the function returns
//! `engine::Result<engine::Outcome>` is checked by the type system in the expansion.

use quote::ToTokens;

use super::model::Mutator;
use crate::support::Diagnostics;

const SIGNATURE: &str =
    "async fn name(ctx: &mut engine::MutatorCtx<'_>, args: Args) -> engine::Result<engine::Outcome>";

pub(crate) fn validate(mutator: &Mutator, errors: &mut Diagnostics) {
    check_async(mutator, errors);
    check_no_generics(mutator, errors);
    check_parameters(mutator, errors);
    check_return_type(mutator, errors);
    check_wire_name(mutator, errors);
}

/// A mutator is an `async fn`: it awaits the store.
fn check_async(mutator: &Mutator, errors: &mut Diagnostics) {
    let sig = &mutator.item.sig;
    if sig.asyncness.is_none() {
        errors.spanned(&sig.fn_token, format!("a mutator is an `async fn`: write `async fn {}`", sig.ident));
    }
}

/// A mutator is a plain function: no generic parameters, the store and arguments are fixed.
fn check_no_generics(mutator: &Mutator, errors: &mut Diagnostics) {
    let generics = &mutator.item.sig.generics;
    let lifetimes_only = generics.params.iter().all(|p| matches!(p, syn::GenericParam::Lifetime(_)));
    if !lifetimes_only || generics.where_clause.is_some() {
        errors.spanned(generics, "a mutator cannot be generic: its arguments have one type, named in the contract");
    }
}

/// A mutator takes exactly `(ctx: &mut engine::MutatorCtx<'_>, args: Args)`. That `Args` is
/// `Serialize + Deserialize + JsonSchema` is the bound of `engine::Mutator::Args`.
fn check_parameters(mutator: &Mutator, errors: &mut Diagnostics) {
    let sig = &mutator.item.sig;
    let inputs: Vec<_> = sig.inputs.iter().collect();
    if let Some(receiver) = inputs.iter().find(|i| matches!(i, syn::FnArg::Receiver(_))) {
        errors.spanned(receiver, format!("a mutator is a free function, not a method: `{SIGNATURE}`"));
        return;
    }
    if inputs.len() != 2 {
        let message = format!("a mutator takes two parameters, the context and the arguments: `{SIGNATURE}`");
        if inputs.is_empty() {
            errors.at(sig.paren_token.span.join(), message);
        } else {
            errors.spanned(&sig.inputs, message);
        }
        return;
    }
    if let syn::FnArg::Typed(ctx) = inputs[0]
        && !is_mut_ref_to_ctx(&ctx.ty)
    {
        errors.spanned(
            &ctx.ty,
            "the first parameter of a mutator is its context: write `ctx: &mut engine::MutatorCtx<'_>`",
        );
    }
    if let syn::FnArg::Typed(args) = inputs[1]
        && let syn::Type::Reference(reference) = &*args.ty
    {
        errors.spanned(
            reference,
            format!("a mutator takes its arguments by value: write `args: {}`", reference.elem.to_token_stream()),
        );
    }
}

fn is_mut_ref_to_ctx(ty: &syn::Type) -> bool {
    match ty {
        syn::Type::Reference(r) if r.mutability.is_some() => match &*r.elem {
            syn::Type::Path(p) => p.path.segments.last().is_some_and(|s| s.ident == "MutatorCtx"),
            _ => false,
        },
        _ => false,
    }
}

/// A mutator returns `engine::Result<engine::Outcome>`; leaving the return type out returns `()`.
fn check_return_type(mutator: &Mutator, errors: &mut Diagnostics) {
    let sig = &mutator.item.sig;
    if matches!(sig.output, syn::ReturnType::Default) {
        errors.spanned(
            &sig.ident,
            format!("mutator `{}` returns nothing: a mutator returns `engine::Result<engine::Outcome>`", sig.ident),
        );
    }
}

/// A wire name is one or more identifiers joined by `.` (`add_note`, `notes.add`).
fn check_wire_name(mutator: &Mutator, errors: &mut Diagnostics) {
    let name = &mutator.name;
    let identifier = |segment: &str| {
        let mut bytes = segment.bytes();
        matches!(bytes.next(), Some(b) if b.is_ascii_alphabetic() || b == b'_')
            && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
    };
    if !name.split('.').all(identifier) {
        errors.at(
            mutator.name_span,
            format!(
                "`{name}` cannot be a mutator's wire name: use identifiers (ASCII letters, digits and `_`, not starting with a digit), optionally joined by `.`"
            ),
        );
    }
}
