//! # myriad-macros: the procedural macros of myriad
//!
//! Use them through myriad, never directly: `myriad::Equivalence` (also in
//! `myriad::traits::*`, as in rsmpi) and `myriad::main`.
//!
//! * [`#[derive(Equivalence)]`](derive@Equivalence) makes a struct sendable:
//!   it implements `myriad::datatype::Equivalence` from the fields' own
//!   datatypes, at the offsets the compiler chose.
//! * [`#[myriad::main]`](macro@main) turns the `main` of a ported rsmpi
//!   program into the code that every rank runs.
//!
//! ```
//! use myriad::traits::*;
//!
//! #[derive(Equivalence, Debug, PartialEq)]
//! struct Particle {
//!     position: [f64; 3],
//!     id: u32,
//!     alive: bool,
//! }
//!
//! let got = myriad::run(2, |universe| {
//!     let world = universe.world();
//!     if world.rank() == 0 {
//!         let p = Particle { position: [1.0, 2.0, 3.0], id: 7, alive: true };
//!         world.process_at_rank(1).send(&p);
//!         None
//!     } else {
//!         Some(world.process_at_rank(0).receive::<Particle>().0)
//!     }
//! })
//! .unwrap();
//! assert_eq!(got[1], Some(Particle { position: [1.0, 2.0, 3.0], id: 7, alive: true }));
//! ```
//!
//! ## Finding the myriad crate
//!
//! The generated code names the myriad crate by the name the calling crate
//! gives it in its `Cargo.toml` (found with `proc-macro-crate`), so a ported
//! program that keeps `mpi = { package = "myriad" }` works unchanged. When the
//! macros are reached another way (through a facade crate, say), name the path
//! explicitly, as rsmpi's `#[mpi(crate = "...")]`:
//!
//! ```
//! use myriad as facade;
//!
//! #[derive(myriad::Equivalence)]
//! #[mpi(crate = "facade")] // or #[myriad(crate = "facade")]
//! struct Sample(u8, f32);
//! # fn main() {}
//! ```

mod equivalence;
mod krate;
mod main_attr;

use proc_macro::TokenStream;

/// Derives `myriad::datatype::Equivalence` for a struct, so that values, arrays,
/// slices and `Vec`s of it can be sent and received.
///
/// Works on structs with named fields, tuple structs and unit structs, with any
/// `repr`; every field type must implement `Equivalence`: primitives
/// (`bool`, integers, floats), arrays `[T; N]`, tuples, and other derived
/// structs. Generic structs get an impl whenever their field types are
/// `Equivalence + 'static`.
///
/// ```
/// use myriad::traits::*;
///
/// #[derive(Equivalence)]
/// #[repr(C)]
/// struct Cell {
///     kind: u8,            // 3 bytes of padding follow
///     value: f32,
///     neighbours: [u32; 4],
/// }
///
/// #[derive(Equivalence)]
/// struct Tagged<T>(u16, T);
///
/// let map = Cell::equivalent_datatype().type_map().clone();
/// assert_eq!(map.size(), 1 + 4 + 16); // data bytes, padding excluded
/// assert_eq!(map.extent(), std::mem::size_of::<Cell>());
/// assert!(!map.is_contiguous());
/// assert_eq!(Tagged::<Cell>::equivalent_datatype().type_map().size(), 2 + 21);
/// ```
///
/// ## What is sent
///
/// The datatype records the *type signature*, the sequence of base types
/// (`u8, f32, u32 x 4` above), and which bytes hold data. Padding is never
/// read. A message can be received as any type with the same signature, in
/// any layout: `struct A { x: u8, y: u32 }` arrives intact as
/// `struct B(u8, u32)` or `(u8, u32)`; a different signature is a type
/// mismatch error (`myriad::Error::Type`), as in MPI.
///
/// ## Safety
///
/// `Equivalence` is an `unsafe trait`, and the generated `unsafe impl` is
/// sound because the compiler checks everything it relies on: the impl
/// compiles only if every field type is `Equivalence` (so any data matching a
/// field's signature is a valid value of that field, and may cross threads;
/// field types that involve the struct's generic parameters are bounded in
/// the impl's where-clause, the others are checked where the impl uses
/// them), and the offsets, size and alignment come from
/// `core::mem::offset_of!`, `core::mem::size_of` and `core::mem::align_of`,
/// so the map describes the real layout whatever the `repr` (an
/// `#[repr(align(32))]` struct's map has alignment 32, a `#[repr(packed)]`
/// one's alignment 1). Like a struct with public fields, a derived struct can then be
/// built from any field values: do not derive it for a type whose other code
/// relies on an invariant between its fields.
///
/// Enums and unions are rejected, because no type signature says which
/// variant or field holds the data:
///
/// ```compile_fail
/// #[derive(myriad::Equivalence)]
/// enum Mode { Fast, Slow }
/// ```
///
/// ```compile_fail
/// #[derive(myriad::Equivalence)]
/// union Bits { int: u32, float: f32 }
/// ```
///
/// Fields that are not `Equivalence` (references, `String`, `char`, ...) are
/// errors at the field:
///
/// ```compile_fail
/// #[derive(myriad::Equivalence)]
/// struct Named { id: u32, name: String }
/// ```
///
/// ## Attributes
///
/// `#[mpi(crate = "path")]` or `#[myriad(crate = "path")]` on the struct
/// names the myriad crate when it cannot be found in `Cargo.toml` (see the
/// [crate docs](crate)).
#[proc_macro_derive(Equivalence, attributes(mpi, myriad))]
pub fn derive_equivalence(input: TokenStream) -> TokenStream {
    let input = syn::parse_macro_input!(input as syn::DeriveInput);
    equivalence::derive(input)
        .unwrap_or_else(syn::Error::into_compile_error)
        .into()
}

/// The entry point of a program ported from rsmpi: the body of `main` runs
/// once per rank.
///
/// ```
/// use myriad as mpi; // or `mpi = { package = "myriad" }` in Cargo.toml
/// use mpi::traits::*;
///
/// #[mpi::main]
/// fn main() {
///     let universe = mpi::initialize().unwrap();
///     let world = universe.world();
///     println!("hello from rank {} of {}", world.rank(), world.size());
/// }
/// ```
///
/// expands to
///
/// ```text
/// fn main() {
///     fn __myriad_rank_main() {
///         let universe = mpi::initialize().unwrap();
///         ...
///     }
///     ::myriad::launch(__myriad_rank_main)
/// }
/// ```
///
/// The rank count comes from the command line (`--ranks N`) or the
/// `MYRIAD_RANKS` environment variable, and defaults to the processing units
/// the process may use (see `myriad::Runtime`): `MYRIAD_RANKS=4 cargo run`
/// plays the role of `mpiexec -n 4`. A rank that panics fails the job:
/// `main` prints the error and exits with status 1.
///
/// A `main` returning `Result<(), E>` (`E: Debug`) keeps its `?`s; an `Err`
/// in any rank fails the job with the error's `Debug`:
///
/// ```
/// # use myriad as mpi;
/// #[mpi::main]
/// fn main() -> Result<(), std::num::ParseIntError> {
///     let _universe = mpi::initialize().unwrap();
///     let n: i32 = "42".parse()?;
///     assert_eq!(n, 42);
///     Ok(())
/// }
/// ```
///
/// `#[myriad::main(crate = "path")]` names the myriad crate explicitly.
/// `ranks = N` is not supported yet (set `MYRIAD_RANKS` instead), and an
/// `async fn` or a `main` with arguments is an error:
///
/// ```compile_fail
/// #[myriad::main(ranks = 4)]
/// fn main() {}
/// ```
///
/// ```compile_fail
/// #[myriad::main]
/// async fn main() {}
/// ```
#[proc_macro_attribute]
pub fn main(args: TokenStream, item: TokenStream) -> TokenStream {
    let item = syn::parse_macro_input!(item as syn::ItemFn);
    main_attr::expand(args.into(), item)
        .unwrap_or_else(syn::Error::into_compile_error)
        .into()
}
