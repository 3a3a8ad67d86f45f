//! Which path names the myriad crate in the code a macro generates.
//!
//! Ported rsmpi programs depend on myriad under another name
//! (`mpi = { package = "myriad" }`), so the macros never hard-code `::myriad`.
//! In order:
//!
//! 1. an explicit `crate = "path"` (`#[mpi(crate = "...")]` or
//!    `#[myriad(crate = "...")]` on a derived struct, `#[myriad::main(crate =
//!    "...")]`), as rsmpi's `#[mpi(crate = "...")]`;
//! 2. the name of the dependency on the `myriad` package in the calling
//!    crate's `Cargo.toml`, found by `proc-macro-crate` (renames and
//!    workspace dependencies included);
//! 3. `::myriad`: inside myriad's own package (its integration tests,
//!    examples and doctests are separate crates that link the library as
//!    `myriad`), and whenever the manifest cannot be read.
//!
//! The library itself never uses its own macros, so `crate::` is never
//! needed.

use proc_macro2::{Span, TokenStream};
use proc_macro_crate::{crate_name, FoundCrate};
use quote::{quote, ToTokens};
use syn::{Ident, LitStr, Path};

/// The package whose path the generated code names.
const PACKAGE: &str = "myriad";

/// The path of the myriad crate: `explicit` if given, else the name found in
/// the calling crate's manifest.
pub(crate) fn path(explicit: Option<&Path>) -> TokenStream {
    if let Some(path) = explicit {
        return path.to_token_stream();
    }
    match crate_name(PACKAGE) {
        Ok(FoundCrate::Name(name)) => {
            let ident = Ident::new(&name, Span::call_site());
            quote!(::#ident)
        }
        Ok(FoundCrate::Itself) | Err(_) => quote!(::myriad),
    }
}

/// Parses the string of a `crate = "path"` argument.
pub(crate) fn parse_path(lit: &LitStr) -> syn::Result<Path> {
    lit.parse::<Path>().map_err(|_| {
        syn::Error::new(
            lit.span(),
            format!(
                "`crate = {:?}` is not a path; expected something like `crate = \"::mpi\"`",
                lit.value()
            ),
        )
    })
}
