//! Attributes cached on communicators (rsmpi's `mpi::attribute`, MPI §6.7).
//!
//! An attribute is a value of a type that implements [`CommAttribute`],
//! kept by one rank for one communicator: one value per type.
//!
//! ## Where they live
//!
//! In the rank's communicator *handle* ([`SimpleCommunicator`],
//! [`CartesianCommunicator`](super::CartesianCommunicator)), not in the state
//! the communicator's ranks share. In MPI every process has its own copy of a
//! communicator object and its attributes are that process's; a myriad
//! handle is exactly that per-rank object. Keeping the table there means
//! [`AnyCommunicator::get_attr`] can lend `&A` for as long as the handle is
//! borrowed, and [`AnyCommunicator::set_attr`] (which takes `&mut self`)
//! cannot replace a value someone still reads — no lock, no reference
//! counting. Handles are `Clone` in myriad (rsmpi's are not): a clone is
//! another handle to the same communicator and starts with a copy of the
//! attributes; from then on the two tables are independent.
//! [`Communicator::duplicate`] copies the attributes whose type sets
//! [`CommAttribute::CLONE_ON_DUP`] to the new communicator (MPI's copy
//! callback); a split starts with none.
//!
//! Handles may be moved between threads with the rank that owns them (ranks
//! can be stolen by another worker before they start), so attribute types
//! must be `Send + Sync` (rsmpi does not ask for this; its handles are
//! plain integers owned by one process).
//!
//! The world communicator also answers two predefined attributes,
//! [`UniverseSize`] and [`AppNum`] (MPI caches them on `MPI_COMM_WORLD`
//! only).
//!
//! ```
//! use myriad::attribute::{CommAttribute, UniverseSize};
//! use myriad::traits::*;
//!
//! #[derive(Clone, Debug, PartialEq)]
//! struct Owner(&'static str);
//! impl CommAttribute for Owner {
//!     const CLONE_ON_DUP: bool = true;
//! }
//!
//! myriad::run(3, |universe| {
//!     let mut world = universe.world();
//!     assert_eq!(world.get_attr::<UniverseSize>().map(usize::from), Some(3));
//!     assert!(world.get_attr::<Owner>().is_none());
//!     world.set_attr(Owner("solver"));
//!     let dup = world.duplicate();
//!     assert_eq!(dup.get_attr::<Owner>(), Some(&Owner("solver")));
//! })
//! .unwrap();
//! ```

use std::any::{Any, TypeId};
use std::fmt;

use super::Communicator;
// The world communicator's predefined attributes: plain values the
// communicator core keeps (`comm::Registry`), attributes here.
pub use crate::comm::{AppNum, UniverseSize};
use crate::error::{raise, CommError, Error};

#[cfg(doc)]
use super::SimpleCommunicator;

/// A type whose values can be cached on a communicator (rsmpi's
/// `CommAttribute`). Implement it with `impl CommAttribute for MyData {}`.
///
/// rsmpi's `extern "C"` copy and delete callbacks and `get_key` are not
/// needed here: values are Rust values, cloned by `Clone` and dropped by
/// `Drop`, keyed by their type.
///
/// Unlike rsmpi, attribute types must be `Send + Sync` (see the module
/// docs), so this does not compile:
///
/// ```compile_fail
/// use std::rc::Rc;
/// use myriad::attribute::CommAttribute;
///
/// #[derive(Clone)]
/// struct Shared(Rc<u32>);
/// impl CommAttribute for Shared {}
/// ```
pub trait CommAttribute: 'static + Sized + Clone + Send + Sync {
    /// Whether [`Communicator::duplicate`] copies the attribute to the new
    /// communicator (default: no).
    const CLONE_ON_DUP: bool = false;
}

/// Attribute access on any communicator (rsmpi's `AnyCommunicator`; kept
/// apart from [`Communicator`] so that one stays object safe).
pub trait AnyCommunicator: Communicator {
    /// The calling rank's attribute of type `A` on this communicator, if set.
    fn get_attr<A: CommAttribute>(&self) -> Option<&A>;

    /// Sets the calling rank's attribute of type `A` (replacing the previous
    /// one).
    fn set_attr<A: CommAttribute>(&mut self, attribute: A);
}

impl<C: ?Sized + Communicator> AnyCommunicator for C {
    fn get_attr<A: CommAttribute>(&self) -> Option<&A> {
        let core = self.core();
        if core.p2p_context() == 0 {
            if let Some(predefined) = core.job().comms().predefined::<A>() {
                return Some(predefined);
            }
        }
        self.attributes()?.get::<A>()
    }

    #[track_caller]
    fn set_attr<A: CommAttribute>(&mut self, attribute: A) {
        match self.attributes_mut() {
            Some(attrs) => attrs.set(attribute),
            None => raise(Error::Comm(CommError::NoAttributes)),
        }
    }
}

/// A stored attribute value.
trait Value: Any + Send + Sync {
    fn clone_box(&self) -> Box<dyn Value>;
    fn clone_on_dup(&self) -> bool;
    fn as_any(&self) -> &dyn Any;
}

impl<A: CommAttribute> Value for A {
    fn clone_box(&self) -> Box<dyn Value> {
        Box::new(self.clone())
    }

    fn clone_on_dup(&self) -> bool {
        A::CLONE_ON_DUP
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// The attributes of one communicator handle (internal; reached through
/// [`AnyCommunicator`]).
#[doc(hidden)]
#[derive(Default)]
pub struct Attributes {
    /// Few entries, so a list searched by type.
    values: Vec<(TypeId, Box<dyn Value>)>,
}

impl Attributes {
    fn get<A: CommAttribute>(&self) -> Option<&A> {
        let id = TypeId::of::<A>();
        self.values
            .iter()
            .find(|(t, _)| *t == id)
            .and_then(|(_, v)| v.as_any().downcast_ref::<A>())
    }

    fn set<A: CommAttribute>(&mut self, attribute: A) {
        let id = TypeId::of::<A>();
        match self.values.iter_mut().find(|(t, _)| *t == id) {
            Some((_, v)) => *v = Box::new(attribute),
            None => self.values.push((id, Box::new(attribute))),
        }
    }

    /// The attributes a duplicate gets: those whose type asks for it.
    pub(crate) fn duplicate(&self) -> Attributes {
        Attributes {
            values: self
                .values
                .iter()
                .filter(|(_, v)| v.clone_on_dup())
                .map(|(t, v)| (*t, v.clone_box()))
                .collect(),
        }
    }
}

impl Clone for Attributes {
    fn clone(&self) -> Self {
        Attributes {
            values: self
                .values
                .iter()
                .map(|(t, v)| (*t, v.clone_box()))
                .collect(),
        }
    }
}

impl fmt::Debug for Attributes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Attributes")
            .field("count", &self.values.len())
            .finish()
    }
}

impl CommAttribute for UniverseSize {}

impl CommAttribute for AppNum {}
