//! `#[derive(Equivalence)]`: the type map of a struct, field by field.
//!
//! For a struct `S` with fields `f1: T1, f2: T2, ...` the derive emits
//!
//! ```text
//! #[automatically_derived]
//! unsafe impl<G> ::myriad::datatype::Equivalence for S<G>
//! where T1: Equivalence + 'static, ... // the field types that name a parameter in G
//! {
//!     type Out = ::myriad::datatype::SystemDatatype;
//!     fn equivalent_datatype() -> Self::Out {
//!         // not generic: a `static MAP: OnceLock<TypeMap>` built on first use;
//!         // generic: `__private::cached_type_map::<Self>(..)`, one map per
//!         // instantiation (a `static` in a generic fn is shared by all of them)
//!         DatatypeRef::from_static(TypeMap::structure(
//!             type_name::<Self>(),
//!             &[(offset_of!(Self, f1), <T1 as Equivalence>::equivalent_datatype().type_map(), 1), ...],
//!             size_of::<Self>(),
//!         ).with_align(align_of::<Self>()))
//!     }
//! }
//! ```
//!
//! Why the `unsafe impl` is sound: `Equivalence` promises that the type map
//! describes `Self` exactly, that any data matching its signature is a valid
//! `Self`, and that values may be copied to another thread. The impl only
//! compiles when every field type is `Equivalence` (so each field's own map
//! keeps those promises for the field): the body names
//! `<Ti as Equivalence>` for every field, and field types that mention the
//! struct's generic parameters are also bounded in the where-clause (needed
//! for the body to type-check; for the other field types a where-clause bound
//! would be a "trivial bound", reported at the `#[derive]` instead of at the
//! field, so the body's use, spanned at the field type, is what checks them).
//! The offsets, the size and the alignment come from the compiler
//! (`offset_of!`, `size_of`, `align_of`), never from the macro's own idea of
//! the layout: whatever the `repr`, the map covers exactly the fields' data,
//! padding stays out of every segment, and a `#[repr(align(N))]` or
//! `#[repr(packed)]` struct has the alignment it really has (scratch space
//! for it is allocated so, and a packed `struct P(f64)` is not taken for an
//! `f64`). A
//! struct whose fields are all valid for any matching data is itself valid for
//! any matching data, and is `Send`-safe when they are. Enums and unions are
//! rejected: their valid bit patterns depend on a discriminant or on which
//! field is live, which no type signature can express.

use proc_macro2::{Group, Span, TokenStream, TokenTree};
use quote::{quote, ToTokens};
use syn::spanned::Spanned;
use syn::{
    Attribute, Data, DeriveInput, Fields, GenericParam, Generics, Ident, Member, Path, Type,
};

use crate::krate;

/// Expands `#[derive(Equivalence)]` on `input`.
pub(crate) fn derive(input: DeriveInput) -> syn::Result<TokenStream> {
    let explicit = crate_attr(&input.attrs)?;
    let fields = match &input.data {
        Data::Struct(data) => &data.fields,
        Data::Enum(data) => {
            return Err(syn::Error::new(
                data.enum_token.span,
                "#[derive(Equivalence)] cannot be used on an enum: an MPI type signature is a \
                 fixed sequence of base types and cannot say which variant a value holds, so \
                 received data could be an invalid discriminant; send an integer code or a \
                 struct instead",
            ));
        }
        Data::Union(data) => {
            return Err(syn::Error::new(
                data.union_token.span,
                "#[derive(Equivalence)] cannot be used on a union: which field holds the data \
                 is not known, so no type signature describes it; send the field itself or a \
                 struct instead",
            ));
        }
    };
    reject_field_attrs(fields)?;
    let krate = krate::path(explicit.as_ref());

    let name = &input.ident;
    let mut generics = input.generics.clone();
    let is_generic = !generics.params.is_empty();
    let params = GenericNames::of(&generics);
    let where_clause = generics.make_where_clause();
    for field in fields.iter().filter(|f| params.mentioned_in(&f.ty)) {
        let ty = &field.ty;
        where_clause.predicates.push(
            syn::parse_quote_spanned!(ty.span()=> #ty: #krate::datatype::Equivalence + 'static),
        );
    }
    let (impl_generics, ty_generics, where_clause) = generics.split_for_impl();

    let entries = fields.iter().enumerate().map(|(index, field)| {
        let member = match &field.ident {
            Some(ident) => Member::Named(ident.clone()),
            None => Member::Unnamed(syn::Index {
                index: index as u32,
                span: field.ty.span(),
            }),
        };
        let ty = &field.ty;
        // Spanned at the field type, so that a field type that is not
        // `Equivalence` is reported there.
        let field_map = respan(
            quote!(<#ty as #krate::datatype::Equivalence>::equivalent_datatype()),
            ty.span(),
        );
        quote! {
            (
                ::core::mem::offset_of!(Self, #member),
                #krate::datatype::Datatype::type_map(&#field_map),
                1usize,
            )
        }
    });
    let build = quote! {
        #krate::datatype::TypeMap::structure(
            ::core::any::type_name::<Self>(),
            &[#(#entries),*],
            ::core::mem::size_of::<Self>(),
        )
        .with_align(::core::mem::align_of::<Self>())
    };
    let map = if is_generic {
        quote! {
            #krate::__private::cached_type_map::<Self>(|| #build)
        }
    } else {
        quote! {{
            static MAP: ::std::sync::OnceLock<#krate::datatype::TypeMap> =
                ::std::sync::OnceLock::new();
            MAP.get_or_init(|| #build)
        }}
    };

    Ok(quote! {
        // SAFETY: every field type is `Equivalence` (the body names each
        // field's impl; generic ones are in the where-clause), and the map is
        // built from the fields' maps at the offsets and size the compiler
        // reports, so it describes `Self` exactly.
        #[automatically_derived]
        unsafe impl #impl_generics #krate::datatype::Equivalence for #name #ty_generics
        #where_clause
        {
            type Out = #krate::datatype::SystemDatatype;

            fn equivalent_datatype() -> Self::Out {
                #krate::datatype::DatatypeRef::from_static(#map)
            }
        }
    })
}

/// Whether `attr` is one of the derive's helper attributes.
fn is_helper(attr: &Attribute) -> bool {
    attr.path().is_ident("mpi") || attr.path().is_ident("myriad")
}

/// The `crate = "path"` of `#[mpi(...)]` / `#[myriad(...)]` on the struct.
fn crate_attr(attrs: &[Attribute]) -> syn::Result<Option<Path>> {
    let mut found: Option<Path> = None;
    for attr in attrs.iter().filter(|a| is_helper(a)) {
        attr.parse_nested_meta(|meta| {
            if meta.path.is_ident("crate") {
                let lit: syn::LitStr = meta.value()?.parse()?;
                if found.is_some() {
                    return Err(meta.error("`crate` is given twice"));
                }
                found = Some(krate::parse_path(&lit)?);
                Ok(())
            } else {
                Err(meta.error(
                    "unknown argument: the only one is `crate = \"path\"`, the path under \
                     which the myriad crate is visible here",
                ))
            }
        })?;
    }
    Ok(found)
}

/// Helper attributes on fields would be silently ignored: reject them.
fn reject_field_attrs(fields: &Fields) -> syn::Result<()> {
    match fields.iter().flat_map(|f| &f.attrs).find(|a| is_helper(a)) {
        Some(attr) => Err(syn::Error::new_spanned(
            attr,
            "#[derive(Equivalence)] takes no field attributes: every field is sent, and \
             `crate = \"path\"` goes on the struct",
        )),
        None => Ok(()),
    }
}

/// `tokens` with every span (groups included) set to `span`.
fn respan(tokens: TokenStream, span: Span) -> TokenStream {
    tokens
        .into_iter()
        .map(|mut token| {
            if let TokenTree::Group(group) = &token {
                let mut inner = Group::new(group.delimiter(), respan(group.stream(), span));
                inner.set_span(span);
                token = TokenTree::Group(inner);
            } else {
                token.set_span(span);
            }
            token
        })
        .collect()
}

/// The names of a struct's generic parameters.
struct GenericNames {
    idents: Vec<Ident>,
    lifetimes: Vec<Ident>,
}

impl GenericNames {
    fn of(generics: &Generics) -> Self {
        let mut names = GenericNames {
            idents: Vec::new(),
            lifetimes: Vec::new(),
        };
        for param in &generics.params {
            match param {
                GenericParam::Type(p) => names.idents.push(p.ident.clone()),
                GenericParam::Const(p) => names.idents.push(p.ident.clone()),
                GenericParam::Lifetime(p) => names.lifetimes.push(p.lifetime.ident.clone()),
            }
        }
        names
    }

    /// Whether `ty` may name one of the parameters (an identifier or
    /// lifetime with the same name anywhere in it; a false positive only adds
    /// a where-clause bound that holds anyway).
    fn mentioned_in(&self, ty: &Type) -> bool {
        if self.idents.is_empty() && self.lifetimes.is_empty() {
            return false;
        }
        self.mentioned_in_tokens(ty.to_token_stream())
    }

    fn mentioned_in_tokens(&self, tokens: TokenStream) -> bool {
        let mut after_quote = false;
        for token in tokens {
            let hit = match &token {
                TokenTree::Group(group) => self.mentioned_in_tokens(group.stream()),
                TokenTree::Ident(ident) if after_quote => self.lifetimes.contains(ident),
                TokenTree::Ident(ident) => self.idents.contains(ident),
                TokenTree::Punct(_) | TokenTree::Literal(_) => false,
            };
            if hit {
                return true;
            }
            after_quote = matches!(&token, TokenTree::Punct(p) if p.as_char() == '\'');
        }
        false
    }
}
