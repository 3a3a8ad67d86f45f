//! Which NUMA node the calling thread runs on, without hwloc and without allocating.
//!
//! The map from CPU to node is read once from sysfs (`/sys/devices/system/node/online` and
//! `nodeN/cpulist`) into a fixed table; the current CPU comes from `sched_getcpu` (a vDSO /
//! rseq read, no system call on recent glibc). A machine whose sysfs cannot be read is one node.
//!
//! ## Synthetic topologies
//! `MYRIAD_ALLOC_NODES` replaces sysfs, so the node logic can be exercised on a one-node
//! machine: either a count `N` (CPU `c` belongs to node `c % N`) or one CPU list per node,
//! separated by `;` (`"0;1"`: CPU 0 on node 0, CPU 1 on node 1; `"0-3;4-7"`). Tests also build
//! a [`Topology`] directly with [`Topology::from_spec`].

use crate::config;

/// Most NUMA nodes the allocator keeps a pool for; higher node ids share pool `id % MAX_NODES`.
pub const MAX_NODES: usize = 64;
/// CPUs whose node is remembered; higher CPU numbers count as node 0.
pub const MAX_CPUS: usize = 1024;

/// The CPU to NUMA node map.
#[derive(Clone)]
pub struct Topology {
    nodes: usize,
    cpu_node: [u8; MAX_CPUS],
    synthetic: bool,
}

impl core::fmt::Debug for Topology {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Topology")
            .field("nodes", &self.nodes)
            .field("synthetic", &self.synthetic)
            .finish_non_exhaustive()
    }
}

impl Topology {
    /// One node holding every CPU.
    pub const fn single() -> Topology {
        Topology {
            nodes: 1,
            cpu_node: [0; MAX_CPUS],
            synthetic: false,
        }
    }

    /// Number of nodes (at least 1).
    pub fn nodes(&self) -> usize {
        self.nodes
    }

    /// Whether the map came from `MYRIAD_ALLOC_NODES` / [`Topology::from_spec`] rather than the
    /// machine.
    pub fn is_synthetic(&self) -> bool {
        self.synthetic
    }

    /// The node of `cpu`.
    pub fn node_of_cpu(&self, cpu: usize) -> usize {
        if cpu < MAX_CPUS {
            usize::from(self.cpu_node[cpu])
        } else {
            0
        }
    }

    /// The node of the CPU the calling thread runs on right now.
    pub fn current_node(&self) -> usize {
        if self.nodes == 1 {
            return 0;
        }
        // SAFETY: sched_getcpu has no preconditions.
        let cpu = unsafe { libc::sched_getcpu() };
        if cpu < 0 {
            0
        } else {
            self.node_of_cpu(cpu as usize)
        }
    }

    /// Parses a synthetic topology: a node count `N` (CPU `c` on node `c % N`) or CPU lists
    /// separated by `;`, one per node. Returns `None` if the text is malformed or names more
    /// than [`MAX_NODES`] nodes.
    ///
    /// ```
    /// let t = myriad_alloc::Topology::from_spec(b"0-1;2-3").unwrap();
    /// assert_eq!((t.nodes(), t.node_of_cpu(1), t.node_of_cpu(2)), (2, 0, 1));
    /// ```
    pub fn from_spec(spec: &[u8]) -> Option<Topology> {
        let mut t = Topology::single();
        t.synthetic = true;
        if !spec.is_empty() && spec.iter().all(u8::is_ascii_digit) {
            let n = parse_number(spec)?;
            if n == 0 || n > MAX_NODES {
                return None;
            }
            t.nodes = n;
            for (cpu, node) in t.cpu_node.iter_mut().enumerate() {
                *node = (cpu % n) as u8;
            }
            return Some(t);
        }
        let mut nodes = 0;
        for list in spec.split(|&b| b == b';') {
            if nodes == MAX_NODES {
                return None;
            }
            let node = nodes as u8;
            for_each_in_list(list, |cpu| {
                if cpu < MAX_CPUS {
                    t.cpu_node[cpu] = node;
                }
            })?;
            nodes += 1;
        }
        t.nodes = nodes.max(1);
        Some(t)
    }

    /// Reads the machine's map from sysfs; one node if sysfs is unreadable.
    pub fn from_sysfs() -> Topology {
        let mut t = Topology::single();
        let mut buf = [0u8; 4096];
        let Some(online) = read_file(c"/sys/devices/system/node/online", &mut buf) else {
            return t;
        };
        let mut ids = [0u16; MAX_NODES];
        let mut count = 0;
        let parsed = for_each_in_list(online, |id| {
            if count < MAX_NODES {
                ids[count] = id as u16;
                count += 1;
            }
        });
        if parsed.is_none() || count <= 1 {
            return t;
        }
        let mut max_id = 0;
        for &id in &ids[..count] {
            let mut path = [0u8; 64];
            let prefix = b"/sys/devices/system/node/node";
            path[..prefix.len()].copy_from_slice(prefix);
            let mut len = prefix.len() + write_number(&mut path[prefix.len()..], usize::from(id));
            let suffix = b"/cpulist\0";
            path[len..len + suffix.len()].copy_from_slice(suffix);
            len += suffix.len();
            let Ok(path) = core::ffi::CStr::from_bytes_with_nul(&path[..len]) else {
                continue;
            };
            let pool = usize::from(id) % MAX_NODES;
            max_id = max_id.max(pool);
            let mut cpus = [0u8; 4096];
            if let Some(list) = read_file(path, &mut cpus) {
                let _ = for_each_in_list(list, |cpu| {
                    if cpu < MAX_CPUS {
                        t.cpu_node[cpu] = pool as u8;
                    }
                });
            }
        }
        t.nodes = max_id + 1;
        t
    }

    /// The topology the allocator uses: `MYRIAD_ALLOC_NODES` if set and valid, else sysfs.
    pub(crate) fn detect() -> Topology {
        if let Some(spec) = config::env(c"MYRIAD_ALLOC_NODES") {
            if let Some(t) = Topology::from_spec(spec) {
                return t;
            }
        }
        Topology::from_sysfs()
    }
}

/// Reads a small file into `buf` with raw system calls; returns the bytes read, trimmed.
fn read_file<'a>(path: &core::ffi::CStr, buf: &'a mut [u8]) -> Option<&'a [u8]> {
    // SAFETY: `path` is NUL-terminated; the descriptor is closed below.
    let fd = unsafe { libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
    if fd < 0 {
        return None;
    }
    let mut filled = 0;
    while filled < buf.len() {
        // SAFETY: reads at most the remaining length of `buf` into it.
        let n = unsafe { libc::read(fd, buf[filled..].as_mut_ptr().cast(), buf.len() - filled) };
        if n <= 0 {
            break;
        }
        filled += n as usize;
    }
    // SAFETY: `fd` was opened above and is closed once.
    unsafe { libc::close(fd) };
    let mut text = &buf[..filled];
    while let [rest @ .., b'\n' | b' ' | b'\0'] = text {
        text = rest;
    }
    Some(text)
}

fn parse_number(text: &[u8]) -> Option<usize> {
    if text.is_empty() || text.len() > 9 || !text.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(
        text.iter()
            .fold(0usize, |n, &b| n * 10 + usize::from(b - b'0')),
    )
}

fn write_number(out: &mut [u8], mut n: usize) -> usize {
    let mut digits = [0u8; 20];
    let mut len = 0;
    loop {
        digits[len] = b'0' + (n % 10) as u8;
        len += 1;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    for i in 0..len {
        out[i] = digits[len - 1 - i];
    }
    len
}

/// Calls `f` for each number of a Linux list such as `0-3,8,10-11` (empty list: no call).
fn for_each_in_list(list: &[u8], mut f: impl FnMut(usize)) -> Option<()> {
    let list = list.strip_suffix(b"\n").unwrap_or(list);
    if list.is_empty() {
        return Some(());
    }
    for item in list.split(|&b| b == b',') {
        let mut ends = item.splitn(2, |&b| b == b'-');
        let lo = parse_number(ends.next()?)?;
        let hi = match ends.next() {
            Some(hi) => parse_number(hi)?,
            None => lo,
        };
        if hi < lo || hi - lo > 1 << 20 {
            return None;
        }
        for n in lo..=hi {
            f(n);
        }
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_parse() {
        let mut seen = [false; 16];
        for_each_in_list(b"0-2,5,7-8\n", |n| seen[n] = true).unwrap();
        let got: Vec<usize> = (0..16).filter(|&i| seen[i]).collect();
        assert_eq!(got, [0, 1, 2, 5, 7, 8]);
        assert!(for_each_in_list(b"3-1", |_| ()).is_none());
        assert!(for_each_in_list(b"a", |_| ()).is_none());
    }

    #[test]
    fn synthetic_count_deals_cpus_round_robin() {
        let t = Topology::from_spec(b"4").unwrap();
        assert_eq!(t.nodes(), 4);
        assert!(t.is_synthetic());
        assert_eq!(
            (0..8).map(|c| t.node_of_cpu(c)).collect::<Vec<_>>(),
            [0, 1, 2, 3, 0, 1, 2, 3]
        );
        assert!(Topology::from_spec(b"0").is_none());
        assert!(Topology::from_spec(b"65").is_none());
    }

    #[test]
    fn synthetic_lists_give_blocks() {
        let t = Topology::from_spec(b"0-3;4-7;8").unwrap();
        assert_eq!(t.nodes(), 3);
        assert_eq!(t.node_of_cpu(3), 0);
        assert_eq!(t.node_of_cpu(4), 1);
        assert_eq!(t.node_of_cpu(8), 2);
        assert_eq!(t.node_of_cpu(5000), 0);
        assert!(Topology::from_spec(b"0-3;x").is_none());
    }

    #[test]
    fn sysfs_gives_at_least_one_node_covering_cpu_zero() {
        let t = Topology::from_sysfs();
        assert!(t.nodes() >= 1);
        assert!(t.node_of_cpu(0) < t.nodes());
        assert!(t.current_node() < t.nodes());
    }

    #[test]
    fn numbers_print() {
        let mut buf = [0u8; 20];
        let n = write_number(&mut buf, 1203);
        assert_eq!(&buf[..n], b"1203");
        let n = write_number(&mut buf, 0);
        assert_eq!(&buf[..n], b"0");
    }
}
