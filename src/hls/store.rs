//! What a job keeps for HLS: the groups of every level, their barriers, and
//! the values of every [`Hls`](super::Hls) static its ranks used.
//!
//! The values belong to the job, not to the static: they are dropped with
//! the job, and a second job in the same process starts without any.

use std::any::Any;
use std::collections::HashMap;

use super::level::{GroupBarrier, HlsLevel, Layout};
use super::shared::GroupCell;
use crate::hardware::{RankAssignment, WorkerPlacement};
use crate::sync::Mutex;

/// The HLS state of one job (a field of `Job`).
pub(crate) struct JobHls {
    pub(crate) layout: Layout,
    /// Per level, one barrier per group.
    pub(crate) barriers: [Box<[GroupBarrier]>; 4],
    /// Per `Hls` static (by key id): a `Box<[GroupCell<T>]>`, one cell per
    /// group of its level. Boxed and never removed before the job ends, so
    /// references to the cells stay valid for the job's life.
    vars: Mutex<HashMap<u32, Box<dyn Any + Send + Sync>>>,
    /// Bytes of the group cells created so far (their inline size; what a
    /// value owns on the heap is not known): the memory report.
    bytes: std::sync::atomic::AtomicUsize,
}

impl std::fmt::Debug for JobHls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JobHls")
            .field("layout", &self.layout)
            .finish_non_exhaustive()
    }
}

impl JobHls {
    pub(crate) fn new(placements: &[WorkerPlacement], assignment: RankAssignment) -> JobHls {
        let layout = Layout::new(placements, assignment);
        let barriers = HlsLevel::ALL.map(|level| {
            (0..layout.groups(level))
                .map(|_| GroupBarrier::default())
                .collect()
        });
        JobHls {
            layout,
            barriers,
            vars: Mutex::new(HashMap::new()),
            bytes: std::sync::atomic::AtomicUsize::new(0),
        }
    }

    /// The `Hls` statics used so far and the bytes of their group cells.
    pub(crate) fn footprint(&self) -> (usize, usize) {
        let vars = self.vars.lock().unwrap_or_else(|e| e.into_inner()).len();
        let bytes = self.bytes.load(std::sync::atomic::Ordering::Relaxed);
        (vars, bytes)
    }

    /// The group cells of `Hls` static `id` (of `level`, holding `T`),
    /// created on first use.
    pub(crate) fn cells<T: Send + Sync + 'static>(
        &self,
        id: u32,
        level: HlsLevel,
    ) -> &[GroupCell<T>] {
        let mut vars = self.vars.lock().unwrap_or_else(|e| e.into_inner());
        let cells = vars.entry(id).or_insert_with(|| {
            let cells: Box<[GroupCell<T>]> = (0..self.layout.groups(level))
                .map(|index| {
                    let size = self.layout.group_size(level, index);
                    GroupCell::new(size)
                })
                .collect();
            self.bytes.fetch_add(
                std::mem::size_of_val::<[GroupCell<T>]>(&cells),
                std::sync::atomic::Ordering::Relaxed,
            );
            Box::new(cells)
        });
        let cells: *const [GroupCell<T>] = &**cells
            .downcast_ref::<Box<[GroupCell<T>]>>()
            .expect("one value type per Hls static");
        drop(vars);
        // SAFETY: the cells are boxed in `vars`, which never removes an
        // entry before the job (and `self` with it) is dropped.
        unsafe { &*cells }
    }
}
