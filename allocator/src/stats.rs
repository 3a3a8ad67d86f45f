//! Statistics: what the allocator holds, per node and in total, and how often it called the
//! kernel. Reading them takes two short locks (the cache registry, no node lock) and allocates
//! nothing, so they can be read from anywhere, including inside a global allocator hook.

use core::fmt;

use crate::cache;
use crate::global::Global;
use crate::os::COUNTERS;
use crate::sync::{AtomicU64, Ordering};
use crate::topology::MAX_NODES;

/// Bytes of huge blocks (direct mappings) in use.
pub(crate) static HUGE_IN_USE: AtomicU64 = AtomicU64::new(0);

/// System calls made by the allocator since the process started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OsCalls {
    /// `mmap` calls (new arenas and huge blocks).
    pub mmap: u64,
    /// `munmap` calls (alignment trimming, idle arenas, evicted huge blocks).
    pub munmap: u64,
    /// `madvise` calls: purges beyond `MYRIAD_ALLOC_KEEP` (`MADV_DONTNEED`), and huge-page advice when `MYRIAD_ALLOC_HUGEPAGES` is on.
    pub madvise: u64,
    /// `mbind` calls (binding pools to their node).
    pub mbind: u64,
    /// `mbind` calls the kernel refused (the memory is still usable, just not bound).
    pub mbind_failed: u64,
    /// `mremap` calls (in-place growth of huge blocks).
    pub mremap: u64,
}

/// Figures of one NUMA node pool.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NodeStats {
    /// Bytes of arenas mapped for this node.
    pub mapped: u64,
    /// Bytes of large blocks (page runs) in use.
    pub large_in_use: u64,
    /// Highest `large_in_use` so far.
    pub large_peak: u64,
    /// Bytes of pages held by small-object slabs.
    pub slab_bytes: u64,
    /// Freed bytes kept resident for reuse (dirty free pages and cached huge mappings).
    pub kept: u64,
    /// Arenas mapped.
    pub arenas: u64,
    /// Large blocks handed out since start.
    pub large_allocs: u64,
    /// Slabs carved since start.
    pub slabs_created: u64,
    /// Orphaned slabs adopted by another thread since start.
    pub slabs_adopted: u64,
    /// Bytes returned to the kernel with `madvise` since start.
    pub purged: u64,
    /// Bindings of this node's memory the kernel refused.
    pub bind_failures: u64,
}

/// A snapshot of the allocator's figures.
#[derive(Debug, Clone, Copy)]
pub struct Stats {
    /// Bytes handed to the program and not freed: small blocks at their class size, large
    /// and huge blocks at their page-rounded size.
    pub in_use: u64,
    /// The small-block part of `in_use`.
    pub small_in_use: u64,
    /// The large-block part of `in_use` (page runs from node pools).
    pub large_in_use: u64,
    /// The huge-block part of `in_use` (direct mappings above 16 MiB).
    pub huge_in_use: u64,
    /// Bytes currently mapped from the kernel (address space, resident or not).
    pub mapped: u64,
    /// Highest `mapped` so far.
    pub peak_mapped: u64,
    /// Freed bytes kept resident for reuse, all nodes (bounded by `MYRIAD_ALLOC_KEEP`).
    pub kept: u64,
    /// Bytes of pages held by small-object slabs (in use or free inside slabs).
    pub slab_bytes: u64,
    /// System calls.
    pub os: OsCalls,
    /// Number of NUMA nodes the allocator uses.
    pub nodes: usize,
    /// Whether the topology came from `MYRIAD_ALLOC_NODES` rather than the machine.
    pub synthetic_topology: bool,
    /// The `MYRIAD_ALLOC_KEEP` bound in force, in bytes.
    pub keep_limit: u64,
    /// Small allocations served by the shared fallback cache: by threads whose cache is gone
    /// (allocation inside thread-local destructors) or not started yet.
    pub fallback_allocs: u64,
    per_node: [NodeStats; MAX_NODES],
}

impl Stats {
    /// Figures of node `node` (zero for nodes beyond [`Stats::nodes`]).
    pub fn node(&self, node: usize) -> NodeStats {
        self.per_node.get(node).copied().unwrap_or_default()
    }
}

/// Takes a snapshot of the allocator's statistics.
///
/// ```
/// let s = myriad_alloc::stats();
/// assert!(s.nodes >= 1);
/// println!("{s}");
/// ```
pub fn stats() -> Stats {
    let g = Global::get();
    let nodes = g.topology().nodes();
    let mut per_node = [NodeStats::default(); MAX_NODES];
    let (mut large, mut kept, mut slabs) = (0, 0, 0);
    for (i, n) in per_node.iter_mut().enumerate().take(nodes) {
        let c = &g.pool(i).counters;
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        *n = NodeStats {
            mapped: l(&c.mapped),
            large_in_use: l(&c.large_in_use),
            large_peak: l(&c.large_peak),
            slab_bytes: l(&c.slab_bytes),
            kept: l(&c.kept),
            arenas: l(&c.arenas),
            large_allocs: l(&c.large_allocs),
            slabs_created: l(&c.slabs_created),
            slabs_adopted: l(&c.slabs_adopted),
            purged: l(&c.purged),
            bind_failures: l(&c.bind_failures),
        };
        large += n.large_in_use;
        kept += n.kept;
        slabs += n.slab_bytes;
    }
    let small = cache::small_in_use();
    let huge = HUGE_IN_USE.load(Ordering::Relaxed);
    let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
    Stats {
        in_use: small.wrapping_add(large).wrapping_add(huge),
        small_in_use: small,
        large_in_use: large,
        huge_in_use: huge,
        mapped: l(&COUNTERS.mapped),
        peak_mapped: l(&COUNTERS.peak_mapped),
        kept,
        slab_bytes: slabs,
        os: OsCalls {
            mmap: l(&COUNTERS.mmap),
            munmap: l(&COUNTERS.munmap),
            madvise: l(&COUNTERS.madvise),
            mbind: l(&COUNTERS.mbind),
            mbind_failed: l(&COUNTERS.mbind_failed),
            mremap: l(&COUNTERS.mremap),
        },
        nodes,
        synthetic_topology: g.topology().is_synthetic(),
        keep_limit: g.config().keep as u64,
        fallback_allocs: cache::FALLBACK_ALLOCS.load(Ordering::Relaxed),
        per_node,
    }
}

struct Mib(u64);

impl fmt::Display for Mib {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.1} MiB", self.0 as f64 / (1u64 << 20) as f64)
    }
}

impl fmt::Display for Stats {
    /// A short report: totals, system calls, then one line per node.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "myriad-alloc: in use {} (small {}, large {}, huge {}), mapped {} (peak {}), \
             kept {} of {}, slabs {}",
            Mib(self.in_use),
            Mib(self.small_in_use),
            Mib(self.large_in_use),
            Mib(self.huge_in_use),
            Mib(self.mapped),
            Mib(self.peak_mapped),
            Mib(self.kept),
            Mib(self.keep_limit),
            Mib(self.slab_bytes),
        )?;
        writeln!(
            f,
            "  os calls: mmap {}, munmap {}, madvise {}, mremap {}, mbind {} ({} refused); \
             fallback allocs {}",
            self.os.mmap,
            self.os.munmap,
            self.os.madvise,
            self.os.mremap,
            self.os.mbind,
            self.os.mbind_failed,
            self.fallback_allocs,
        )?;
        for i in 0..self.nodes {
            let n = self.node(i);
            writeln!(
                f,
                "  node {i}{}: arenas {}, mapped {}, large {} (peak {}), slabs {}, kept {}, purged {}, \
                 large allocs {}, slabs new/adopted {}/{}, bind failures {}",
                if self.synthetic_topology {
                    " (synthetic)"
                } else {
                    ""
                },
                n.arenas,
                Mib(n.mapped),
                Mib(n.large_in_use),
                Mib(n.large_peak),
                Mib(n.slab_bytes),
                Mib(n.kept),
                Mib(n.purged),
                n.large_allocs,
                n.slabs_created,
                n.slabs_adopted,
                n.bind_failures,
            )?;
        }
        Ok(())
    }
}
