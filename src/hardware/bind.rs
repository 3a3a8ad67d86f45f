//! Thread binding through the Linux scheduler: pin the calling thread to one CPU, read the
//! process's affinity mask, ask which CPU the thread runs on.
//!
//! These use `sched_setaffinity`/`sched_getaffinity` with pid 0, which on Linux means *the
//! calling thread* (not the whole process), so each worker binds itself. CPU masks are sized
//! at run time, so machines with more than 1024 CPUs work too.
//!
//! ```
//! use myriad::topology::{allowed_cpus, bind_current_thread, current_cpu};
//!
//! let cpus = allowed_cpus()?;
//! std::thread::spawn(move || {
//!     bind_current_thread(cpus[0])?;
//!     assert_eq!(current_cpu(), Some(cpus[0]));
//!     Ok::<(), std::io::Error>(())
//! })
//! .join()
//! .unwrap()?;
//! # Ok::<(), std::io::Error>(())
//! ```

use std::io;
use std::mem;

use libc::c_ulong;

/// Bits in one word of a CPU mask: the kernel's masks are arrays of `unsigned long`, bit
/// `i % BITS` of word `i / BITS` standing for CPU `i`.
const BITS: usize = 8 * mem::size_of::<c_ulong>();

/// The largest mask tried: 65,536 CPUs.
const MAX_CPUS: usize = 1 << 16;

/// Pins the calling thread to the CPU with operating-system index `os_index` (a
/// [`Pu::os_index`](super::Pu::os_index)).
///
/// # Errors
///
/// `EINVAL` when that CPU does not exist or is outside the process's cpuset (the kernel's
/// answer), `InvalidInput` for an index of 65,536 or more.
pub fn bind_current_thread(os_index: usize) -> io::Result<()> {
    if os_index >= MAX_CPUS {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("CPU index {os_index} is beyond the largest supported mask ({MAX_CPUS} CPUs)"),
        ));
    }
    // At least one cpu_set_t, as glibc's wrappers expect.
    let words =
        (os_index / BITS + 1).max(mem::size_of::<libc::cpu_set_t>() / mem::size_of::<c_ulong>());
    let mut mask: Vec<c_ulong> = vec![0; words];
    mask[os_index / BITS] |= 1 << (os_index % BITS);
    // SAFETY: the pointer and byte size describe `mask`, which outlives the call; the kernel
    // only reads it, as an array of unsigned long (cpu_set_t is such an array). pid 0 is the
    // calling thread.
    let rc = unsafe {
        libc::sched_setaffinity(0, mem::size_of_val(mask.as_slice()), mask.as_ptr().cast())
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The operating-system indexes of the CPUs the calling thread may run on
/// (`sched_getaffinity`), ascending. Before any binding this is the process's mask (what
/// `taskset` or the batch system set).
///
/// # Errors
///
/// The kernel refused every mask size up to 65,536 CPUs.
pub fn allowed_cpus() -> io::Result<Vec<usize>> {
    let mut cpus = 8 * mem::size_of::<libc::cpu_set_t>();
    loop {
        let mut mask: Vec<c_ulong> = vec![0; cpus / BITS];
        // SAFETY: the pointer and byte size describe `mask`, which outlives the call; the
        // kernel writes at most that many bytes, as an array of unsigned long. pid 0 is the
        // calling thread.
        let rc = unsafe {
            libc::sched_getaffinity(
                0,
                mem::size_of_val(mask.as_slice()),
                mask.as_mut_ptr().cast(),
            )
        };
        if rc == 0 {
            return Ok((0..cpus)
                .filter(|&cpu| mask[cpu / BITS] & (1 << (cpu % BITS)) != 0)
                .collect());
        }
        let err = io::Error::last_os_error();
        // EINVAL: the kernel's mask is larger than ours.
        if err.raw_os_error() != Some(libc::EINVAL) || cpus >= MAX_CPUS {
            return Err(err);
        }
        cpus *= 2;
    }
}

/// The CPU the calling thread is running on right now (`sched_getcpu`), if the system says.
pub fn current_cpu() -> Option<usize> {
    // SAFETY: sched_getcpu has no arguments and no preconditions.
    let cpu = unsafe { libc::sched_getcpu() };
    usize::try_from(cpu).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allowed_cpus_is_sorted_and_not_empty() {
        let cpus = allowed_cpus().unwrap();
        assert!(!cpus.is_empty());
        assert!(cpus.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn binding_moves_the_thread_and_narrows_its_mask() {
        let cpus = allowed_cpus().unwrap();
        for &cpu in &cpus {
            std::thread::spawn(move || {
                bind_current_thread(cpu).unwrap();
                assert_eq!(current_cpu(), Some(cpu));
                assert_eq!(allowed_cpus().unwrap(), [cpu]);
            })
            .join()
            .unwrap();
        }
    }

    #[test]
    fn binding_to_a_missing_cpu_fails() {
        std::thread::spawn(|| {
            let before = allowed_cpus().unwrap();
            // Within the mask size but surely absent on a test machine.
            let err = bind_current_thread(4000).unwrap_err();
            assert_eq!(err.raw_os_error(), Some(libc::EINVAL), "{err}");
            let err = bind_current_thread(usize::MAX).unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
            assert_eq!(allowed_cpus().unwrap(), before, "mask unchanged");
        })
        .join()
        .unwrap();
    }
}
