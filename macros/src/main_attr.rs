//! `#[myriad::main]`: the entry point of a ported rsmpi program.
//!
//! ```text
//! #[myriad::main]                    fn main() {
//! fn main() {                            fn __myriad_rank_main() { BODY }
//!     BODY                   =>          ::myriad::launch(__myriad_rank_main)
//! }                                  }
//! ```
//!
//! With `-> Result<(), E>` the rank function keeps that signature, and a rank
//! whose `main` returns `Err(e)` panics with `e`'s `Debug`, which fails the job
//! (`launch` prints the error and exits with status 1), as `Err` from a plain
//! `main` fails the process. The expansion's `main` returns `()`.
//!
//! The body moves into a nested `fn` rather than a closure: `return`, `?` and
//! the declared return type mean exactly what they meant in `main`, and the
//! body cannot capture anything by accident.

use proc_macro2::{Span, TokenStream};
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{Ident, ItemFn, ReturnType, Type};

use crate::krate;

/// Expands `#[main(args)] item`.
pub(crate) fn expand(args: TokenStream, item: ItemFn) -> syn::Result<TokenStream> {
    let mut explicit = None;
    let parser = syn::meta::parser(|meta| {
        if meta.path.is_ident("crate") {
            let lit: syn::LitStr = meta.value()?.parse()?;
            explicit = Some(krate::parse_path(&lit)?);
            Ok(())
        } else if meta.path.is_ident("ranks") {
            Err(meta.error(
                "`#[myriad::main(ranks = N)]` is not supported yet: set the rank count when \
                 running the program, with `--ranks N` or the `MYRIAD_RANKS` environment \
                 variable (e.g. `MYRIAD_RANKS=4 cargo run`)",
            ))
        } else {
            Err(meta.error(
                "unknown argument: `#[myriad::main]` takes only `crate = \"path\"`; the rank \
                 count comes from `--ranks N` or `MYRIAD_RANKS`",
            ))
        }
    });
    syn::parse::Parser::parse2(parser, args)?;
    check_signature(&item)?;
    let krate = krate::path(explicit.as_ref());

    let ItemFn {
        attrs,
        vis,
        sig,
        block,
    } = item;
    let name = &sig.ident;
    let output = &sig.output;
    let rank_main = Ident::new("__myriad_rank_main", Span::call_site());
    let launch = match result_type(output)? {
        None => quote!(#krate::launch(#rank_main)),
        Some(ty) => {
            let fail = quote_spanned! {ty.span()=>
                ::core::panic!("main returned an error: {:?}", error)
            };
            quote! {
                #krate::launch(|| {
                    if let ::core::result::Result::Err(error) = #rank_main() {
                        #fail
                    }
                })
            }
        }
    };
    Ok(quote! {
        #(#attrs)*
        #vis fn #name() {
            fn #rank_main() #output #block
            #launch
        }
    })
}

/// Rejects what a per-rank `main` cannot be.
fn check_signature(item: &ItemFn) -> syn::Result<()> {
    let sig = &item.sig;
    if let Some(token) = &sig.asyncness {
        return Err(syn::Error::new(
            token.span,
            "`#[myriad::main]` cannot be used on an `async fn`: each rank is a coroutine that \
             blocks in MPI calls, with no executor; write a plain `fn main()`",
        ));
    }
    if let Some(token) = &sig.constness {
        return Err(syn::Error::new(
            token.span,
            "`#[myriad::main]` needs a plain `fn main()`, not a `const fn`",
        ));
    }
    if let Some(token) = &sig.unsafety {
        return Err(syn::Error::new(
            token.span,
            "`#[myriad::main]` needs a plain `fn main()`, not an `unsafe fn`",
        ));
    }
    if let Some(abi) = &sig.abi {
        return Err(syn::Error::new_spanned(
            abi,
            "`#[myriad::main]` needs a plain `fn main()`, without an `extern` ABI",
        ));
    }
    if !sig.generics.params.is_empty() || sig.generics.where_clause.is_some() {
        return Err(syn::Error::new_spanned(
            &sig.generics,
            "`#[myriad::main]` needs a plain `fn main()`, without generic parameters",
        ));
    }
    if !sig.inputs.is_empty() || sig.variadic.is_some() {
        return Err(syn::Error::new_spanned(
            &sig.inputs,
            "`#[myriad::main]` takes a `fn main()` without arguments: read the command line \
             with `std::env::args()` (every rank sees the same arguments)",
        ));
    }
    Ok(())
}

/// `None` for `fn main()` and `fn main() -> ()`, the type for `-> Result<..>`
/// (any path ending in `Result`, such as `io::Result<()>`), an error for
/// anything else.
fn result_type(output: &ReturnType) -> syn::Result<Option<&Type>> {
    let ty = match output {
        ReturnType::Default => return Ok(None),
        ReturnType::Type(_, ty) => &**ty,
    };
    match ty {
        Type::Tuple(tuple) if tuple.elems.is_empty() => Ok(None),
        Type::Path(path)
            if path.qself.is_none()
                && path
                    .path
                    .segments
                    .last()
                    .is_some_and(|segment| segment.ident == "Result") =>
        {
            Ok(Some(ty))
        }
        _ => Err(syn::Error::new_spanned(
            ty,
            "`#[myriad::main]` supports `fn main()` and `fn main() -> Result<(), E>` (an `Err` \
             in any rank fails the job); other return types are not supported",
        )),
    }
}
