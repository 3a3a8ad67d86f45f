//! What happens when a rank overflows its stack.
//!
//! Every rank stack sits above a guard page (`sched::stack`), so an overflow
//! faults instead of silently writing into the stack below it, which belongs to
//! another rank. This module turns that fault into a clear message: a
//! `SIGSEGV` handler, running on the worker's alternate signal stack, checks
//! whether the faulting address is a guard page of a registered stack chunk;
//! if so it prints which rank overflowed and how to raise the stack size, then
//! restores the default action so the process dies of the signal. Faults
//! anywhere else go to the handler that was installed before ours (Rust's own
//! stack-overflow handler, or the default action).
//!
//! The handler only reads atomics and calls `write(2)`: it is
//! async-signal-safe. Chunk registrations live in a lock-free list whose nodes
//! are never freed (they are recycled), so the handler can walk it while
//! another thread registers or unregisters a chunk.

use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicUsize, Ordering};
use std::sync::OnceLock;

/// One registered chunk of stack slots.
#[derive(Debug)]
struct Region {
    /// Start address; 0 while the node is unused or being filled in.
    start: AtomicUsize,
    len: AtomicUsize,
    slot: AtomicUsize,
    page: AtomicUsize,
    /// The usable stack size an overflow report names: what the pool
    /// promises, a little less than the slot above its guard.
    stack: AtomicUsize,
    in_use: AtomicBool,
    next: AtomicPtr<Region>,
}

static REGIONS: AtomicPtr<Region> = AtomicPtr::new(ptr::null_mut());

/// Proof that a chunk is registered; give it back with [`unregister`].
#[derive(Debug)]
pub(crate) struct Registration(&'static Region);

/// Registers a chunk of `len` bytes at `start` made of slots of `slot` bytes
/// whose lowest `page` bytes are guard pages, holding stacks of `stack`
/// usable bytes.
pub(crate) fn register(
    start: usize,
    len: usize,
    slot: usize,
    page: usize,
    stack: usize,
) -> Registration {
    let region = claim_node();
    region.len.store(len, Ordering::Relaxed);
    region.slot.store(slot, Ordering::Relaxed);
    region.page.store(page, Ordering::Relaxed);
    region.stack.store(stack, Ordering::Relaxed);
    // Publish last: the handler only trusts the other fields after reading a
    // non-zero start with Acquire.
    region.start.store(start, Ordering::Release);
    Registration(region)
}

/// Forgets a chunk (before it is unmapped).
pub(crate) fn unregister(registration: Registration) {
    registration.0.start.store(0, Ordering::Release);
    registration.0.in_use.store(false, Ordering::Release);
}

fn claim_node() -> &'static Region {
    let mut node = REGIONS.load(Ordering::Acquire);
    while !node.is_null() {
        // SAFETY: nodes are leaked boxes, never freed.
        let region = unsafe { &*node };
        if region
            .in_use
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
        {
            return region;
        }
        node = region.next.load(Ordering::Acquire);
    }
    let region: &'static Region = Box::leak(Box::new(Region {
        start: AtomicUsize::new(0),
        len: AtomicUsize::new(0),
        slot: AtomicUsize::new(1),
        page: AtomicUsize::new(0),
        stack: AtomicUsize::new(0),
        in_use: AtomicBool::new(true),
        next: AtomicPtr::new(ptr::null_mut()),
    }));
    let mut head = REGIONS.load(Ordering::Acquire);
    loop {
        region.next.store(head, Ordering::Relaxed);
        match REGIONS.compare_exchange(
            head,
            region as *const Region as *mut Region,
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            Ok(_) => return region,
            Err(current) => head = current,
        }
    }
}

/// If `addr` is in a guard page of a registered chunk, the usable stack size
/// of that chunk's slots.
fn guard_hit(addr: usize) -> Option<usize> {
    let mut node = REGIONS.load(Ordering::Acquire);
    while !node.is_null() {
        // SAFETY: nodes are leaked boxes, never freed.
        let region = unsafe { &*node };
        let start = region.start.load(Ordering::Acquire);
        if start != 0 {
            let len = region.len.load(Ordering::Relaxed);
            let slot = region.slot.load(Ordering::Relaxed).max(1);
            let page = region.page.load(Ordering::Relaxed);
            if addr >= start && addr < start + len && (addr - start) % slot < page {
                return Some(region.stack.load(Ordering::Relaxed));
            }
        }
        node = region.next.load(Ordering::Acquire);
    }
    None
}

static PREVIOUS: OnceLock<libc::sigaction> = OnceLock::new();

/// Installs the `SIGSEGV` handler once per process, keeping the previous one
/// to chain to.
pub(crate) fn install_handler() {
    static INSTALLED: OnceLock<()> = OnceLock::new();
    INSTALLED.get_or_init(|| {
        // SAFETY: [1] a zeroed sigaction is a valid "default" value; [2] we
        // install a handler with SA_SIGINFO whose signature matches; [3] the
        // previous action is saved before ours can run (PREVIOUS is set
        // before the second sigaction call returns control to anyone else's
        // fault, and the handler treats a missing PREVIOUS as SIG_DFL).
        unsafe {
            let mut previous: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(libc::SIGSEGV, ptr::null(), &mut previous) != 0 {
                return;
            }
            let _ = PREVIOUS.set(previous);
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_segv as *const () as usize;
            action.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(libc::SIGSEGV, &action, ptr::null_mut());
        }
    });
}

extern "C" fn on_segv(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo for SA_SIGINFO handlers.
    let addr = unsafe { (*info).si_addr() } as usize;
    if let Some(stack_size) = guard_hit(addr) {
        report_overflow(stack_size);
        reset_default(sig);
        return; // the faulting instruction runs again and the signal kills us
    }
    match PREVIOUS.get() {
        Some(previous) if previous.sa_sigaction == libc::SIG_IGN => {}
        Some(previous) if previous.sa_sigaction != libc::SIG_DFL => {
            if previous.sa_flags & libc::SA_SIGINFO != 0 {
                // SAFETY: the previous handler was installed with SA_SIGINFO,
                // so it has this signature.
                let handler: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
                    unsafe { std::mem::transmute(previous.sa_sigaction) };
                handler(sig, info, ctx);
            } else {
                // SAFETY: a plain handler takes the signal number.
                let handler: extern "C" fn(libc::c_int) =
                    unsafe { std::mem::transmute(previous.sa_sigaction) };
                handler(sig);
            }
        }
        _ => reset_default(sig),
    }
}

fn reset_default(sig: libc::c_int) {
    // SAFETY: restoring the default disposition is async-signal-safe.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = libc::SIG_DFL;
        libc::sigaction(sig, &action, ptr::null_mut());
    }
}

fn report_overflow(stack_size: usize) {
    // The running rank's context: a const-initialised thread-local pointer
    // to a struct at the top of the rank's stack, far from the guard page
    // that was hit; reading it is a plain load.
    let rank = super::rank::with_current(|ctx| ctx.map_or(u32::MAX, |ctx| ctx.rank.get()));
    let mut buf = [0u8; 256];
    let mut len = 0;
    let mut put = |bytes: &[u8]| {
        let n = bytes.len().min(buf.len() - len);
        buf[len..len + n].copy_from_slice(&bytes[..n]);
        len += n;
    };
    put(b"myriad: rank ");
    if rank == u32::MAX {
        put(b"?");
    } else {
        put(decimal(rank as usize, &mut [0u8; 20]));
    }
    put(b" overflowed its stack of ");
    put(decimal(stack_size / 1024, &mut [0u8; 20]));
    put(b" KiB (it hit the guard page; no other rank was touched). ");
    put(b"Raise MYRIAD_STACK_SIZE (or Runtime::builder().stack_size) and run again.\n");
    // SAFETY: write(2) on stderr with a valid buffer is async-signal-safe.
    unsafe { libc::write(2, buf.as_ptr().cast(), len) };
}

fn decimal(mut n: usize, out: &mut [u8; 20]) -> &[u8] {
    let mut i = out.len();
    loop {
        i -= 1;
        out[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    &out[i..]
}

/// An alternate signal stack for the current thread, if it had none: the
/// `SIGSEGV` handler cannot run on the stack that overflowed.
#[derive(Debug)]
pub(crate) struct AltStack {
    mapping: Option<(usize, usize)>,
}

impl AltStack {
    /// Installs an alternate signal stack unless the thread already has one
    /// (threads spawned by std usually do).
    pub(crate) fn ensure() -> AltStack {
        // SAFETY: [1] querying the current alternate stack; [2] the new
        // stack is a fresh mapping owned by the returned guard, which disables
        // it before unmapping.
        unsafe {
            let mut current: libc::stack_t = std::mem::zeroed();
            if libc::sigaltstack(ptr::null(), &mut current) != 0
                || current.ss_flags & libc::SS_DISABLE == 0
            {
                return AltStack { mapping: None };
            }
            let size = (libc::SIGSTKSZ).max(64 * 1024);
            let addr = libc::mmap(
                ptr::null_mut(),
                size,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            );
            if addr == libc::MAP_FAILED {
                return AltStack { mapping: None };
            }
            let stack = libc::stack_t {
                ss_sp: addr,
                ss_flags: 0,
                ss_size: size,
            };
            if libc::sigaltstack(&stack, ptr::null_mut()) != 0 {
                libc::munmap(addr, size);
                return AltStack { mapping: None };
            }
            AltStack {
                mapping: Some((addr as usize, size)),
            }
        }
    }
}

impl Drop for AltStack {
    fn drop(&mut self) {
        if let Some((addr, size)) = self.mapping {
            // SAFETY: disable the alternate stack we installed, then unmap it.
            unsafe {
                let disable = libc::stack_t {
                    ss_sp: ptr::null_mut(),
                    ss_flags: libc::SS_DISABLE,
                    ss_size: 0,
                };
                libc::sigaltstack(&disable, ptr::null_mut());
                libc::munmap(addr as *mut libc::c_void, size);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guard_pages_are_recognised() {
        let reg = register(0x1000_0000, 0x10_0000, 0x4000, 0x1000, 0x2000);
        assert_eq!(guard_hit(0x1000_0000), Some(0x2000));
        assert_eq!(guard_hit(0x1000_4fff), Some(0x2000));
        assert_eq!(guard_hit(0x1000_5000), None);
        assert_eq!(guard_hit(0x2000_0000), None);
        unregister(reg);
        assert_eq!(guard_hit(0x1000_0000), None);
    }

    #[test]
    fn decimal_formats() {
        assert_eq!(decimal(0, &mut [0; 20]), b"0");
        assert_eq!(decimal(1_234_567, &mut [0; 20]), b"1234567");
    }
}
