//! The status of a completed receive or probe.

use crate::datatype::Datatype;
use crate::{Count, Rank, Tag};

/// What a receive or probe learned about its message (rsmpi's `Status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Status {
    pub(crate) source: Rank,
    pub(crate) tag: Tag,
    pub(crate) bytes: usize,
    pub(crate) cancelled: bool,
}

impl Status {
    pub(crate) fn new(source: Rank, tag: Tag, bytes: usize) -> Status {
        Status {
            source,
            tag,
            bytes,
            cancelled: false,
        }
    }

    pub(crate) fn cancelled() -> Status {
        Status {
            source: crate::ANY_SOURCE,
            tag: crate::ANY_TAG,
            bytes: 0,
            cancelled: true,
        }
    }

    /// The rank that sent the message.
    pub fn source_rank(&self) -> Rank {
        self.source
    }

    /// The message's tag.
    pub fn tag(&self) -> Tag {
        self.tag
    }

    /// Number of elements of `datatype` in the message (`MPI_UNDEFINED`,
    /// i.e. `-1`, if the message is not a whole number of them).
    pub fn count<D: Datatype>(&self, datatype: D) -> Count {
        let size = datatype.type_map().size();
        if size == 0 {
            return 0;
        }
        if self.bytes % size != 0 {
            return crate::UNDEFINED;
        }
        Count::try_from(self.bytes / size).unwrap_or(Count::MAX)
    }

    /// Bytes of data in the message (not an rsmpi method).
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Whether the operation was cancelled (`MPI_Test_cancelled`).
    pub fn is_cancelled(&self) -> bool {
        self.cancelled
    }
}
