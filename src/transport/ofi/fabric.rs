//! Safe types over libfabric's objects (`sys::ofi`): [`Info`], [`Fabric`],
//! [`Domain`], [`Cq`], [`Av`], [`Endpoint`], [`Mr`]. Each closes its object
//! on drop and keeps its parents alive (an `Arc`), so no object outlives
//! the one it was opened from. Most of libfabric's API is `static inline`
//! calls through ops tables (`ep->msg->send(...)`); the methods here are
//! those calls, written in Rust.
//!
//! libfabric returns negative `FI_E*` codes; [`OfiError`] names the call
//! and the code's text (`fi_strerror`). The domain is opened with
//! `FI_THREAD_SAFE`, so every method may be called from any thread.

use std::ffi::{c_void, CStr};
use std::fmt;
use std::ptr;
use std::sync::Arc;

use crate::sys::ofi as sys;

/// `FI_ADDR_UNSPEC` (a macro bindgen does not see): any source.
pub(crate) const ADDR_UNSPEC: sys::fi_addr_t = u64::MAX;

/// A libfabric call failed with `code` (a positive `FI_E*` value).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct OfiError {
    /// The call, as libfabric's manual names it.
    pub(crate) call: &'static str,
    /// The error code, positive.
    pub(crate) code: i32,
}

impl OfiError {
    /// `-FI_EAGAIN`: resources are busy, try again after progress.
    pub(crate) fn is_again(&self) -> bool {
        self.code == sys::FI_EAGAIN as i32
    }
}

impl fmt::Display for OfiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // SAFETY: fi_strerror returns a static NUL-terminated string for
        // any code.
        let text = unsafe { CStr::from_ptr(sys::fi_strerror(self.code)) };
        write!(
            f,
            "{} failed: {} ({})",
            self.call,
            text.to_string_lossy(),
            self.code
        )
    }
}

impl std::error::Error for OfiError {}

/// A libfabric return value as a result (negative: an error).
fn check(call: &'static str, ret: i64) -> Result<i64, OfiError> {
    if ret < 0 {
        Err(OfiError {
            call,
            code: (-ret).min(i32::MAX as i64) as i32,
        })
    } else {
        Ok(ret)
    }
}

/// An entry of an ops table, or the error a provider without it deserves.
fn op<T>(call: &'static str, f: Option<T>) -> Result<T, OfiError> {
    f.ok_or(OfiError {
        call,
        code: sys::FI_ENOSYS as i32,
    })
}

/// Closes `fid` (what `fi_close` does); errors at close are ignored (the
/// object is gone either way).
///
/// # Safety
///
/// `fid` is an open object nobody uses any more.
unsafe fn close(fid: *mut sys::fid) {
    // SAFETY: the caller's contract: `fid` is open, so its ops table is
    // valid.
    unsafe {
        if let Some(close) = (*(*fid).ops).close {
            close(fid);
        }
    }
}

/// What [`Info::get`] asks of a provider.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Wanted {
    /// Capabilities (`FI_MSG | FI_RMA | ...`).
    pub(crate) caps: u64,
    /// Message ordering on both sides (`FI_ORDER_SAS`).
    pub(crate) msg_order: u64,
}

/// The providers' answer to `fi_getinfo`: a list of `fi_info`, freed on
/// drop; the first entry is the one used.
#[derive(Debug)]
pub(crate) struct Info {
    info: *mut sys::fi_info,
}

// SAFETY: the list is plain data libfabric allocated; it is only read
// after `get`, and freed once (drop).
unsafe impl Send for Info {}
// SAFETY: as above: shared access only reads.
unsafe impl Sync for Info {}

impl Info {
    /// Asks libfabric for RDM endpoints with `wanted` (the provider is
    /// filtered by `FI_PROVIDER`, which libfabric reads itself).
    pub(crate) fn get(wanted: Wanted) -> Result<Info, OfiError> {
        // SAFETY: `fi_dupinfo(NULL)` is `fi_allocinfo`: a zeroed fi_info
        // with its attribute structs allocated, or NULL.
        let hints = unsafe { sys::fi_dupinfo(ptr::null()) };
        if hints.is_null() {
            return Err(OfiError {
                call: "fi_allocinfo",
                code: libc::ENOMEM,
            });
        }
        // SAFETY: `hints` and its attribute structs were allocated by
        // fi_allocinfo above; only numbers are written (no pointers that
        // fi_freeinfo would free), and the hints are freed once.
        let ret = unsafe {
            let h = &mut *hints;
            h.caps = wanted.caps;
            h.mode = sys::FI_CONTEXT | sys::FI_CONTEXT2;
            (*h.ep_attr).type_ = sys::fi_ep_type_FI_EP_RDM;
            (*h.tx_attr).msg_order = wanted.msg_order;
            (*h.rx_attr).msg_order = wanted.msg_order;
            let d = &mut *h.domain_attr;
            d.threading = sys::fi_threading_FI_THREAD_SAFE;
            d.av_type = sys::fi_av_type_FI_AV_TABLE;
            // Not FI_MR_LOCAL: sends and receives pass no descriptors.
            d.mr_mode = (sys::FI_MR_VIRT_ADDR | sys::FI_MR_ALLOCATED | sys::FI_MR_PROV_KEY) as i32;
            let mut info = ptr::null_mut();
            let version = (sys::FI_MAJOR_VERSION << 16) | sys::FI_MINOR_VERSION;
            let ret = sys::fi_getinfo(version, ptr::null(), ptr::null(), 0, hints, &mut info);
            sys::fi_freeinfo(hints);
            check("fi_getinfo", ret as i64).map(|_| info)
        };
        match ret {
            Ok(info) if !info.is_null() => Ok(Info { info }),
            Ok(_) => Err(OfiError {
                call: "fi_getinfo",
                code: sys::FI_ENODATA as i32,
            }),
            Err(e) => Err(e),
        }
    }

    /// The capabilities the provider grants (`FI_MSG | FI_RMA | ...`).
    pub(crate) fn caps(&self) -> u64 {
        // SAFETY: `info` is a valid fi_info from fi_getinfo.
        unsafe { (*self.info).caps }
    }

    /// The memory registration modes the provider requires
    /// (`FI_MR_VIRT_ADDR`, `FI_MR_PROV_KEY`, `FI_MR_LOCAL`, ...).
    pub(crate) fn mr_mode(&self) -> u64 {
        // SAFETY: `info` is valid; its domain_attr is NULL or valid.
        unsafe {
            let domain = (*self.info).domain_attr;
            if domain.is_null() {
                0
            } else {
                (*domain).mr_mode as u32 as u64
            }
        }
    }

    /// The largest message (and read) the endpoint moves at once.
    pub(crate) fn max_msg_size(&self) -> usize {
        // SAFETY: `info` is valid; its ep_attr is NULL or valid.
        unsafe {
            let ep = (*self.info).ep_attr;
            if ep.is_null() {
                0
            } else {
                (*ep).max_msg_size
            }
        }
    }

    /// The provider's name (`tcp;ofi_rxm`, `verbs;ofi_rxm`, `sockets`, ...).
    pub(crate) fn provider(&self) -> String {
        // SAFETY: `info` is a valid fi_info from fi_getinfo, whose
        // fabric_attr and prov_name are NULL or valid C strings.
        unsafe {
            let fabric = (*self.info).fabric_attr;
            if fabric.is_null() || (*fabric).prov_name.is_null() {
                return String::from("?");
            }
            CStr::from_ptr((*fabric).prov_name)
                .to_string_lossy()
                .into_owned()
        }
    }
}

impl Drop for Info {
    fn drop(&mut self) {
        // SAFETY: the list came from fi_getinfo and is freed once.
        unsafe { sys::fi_freeinfo(self.info) };
    }
}

/// An open fabric (`fi_fabric`).
#[derive(Debug)]
pub(crate) struct Fabric {
    fabric: *mut sys::fid_fabric,
    info: Info,
}

// SAFETY: the domain is FI_THREAD_SAFE: libfabric serialises its objects'
// calls itself.
unsafe impl Send for Fabric {}
// SAFETY: as above.
unsafe impl Sync for Fabric {}

impl Fabric {
    /// Opens the fabric of `info`'s first entry.
    pub(crate) fn open(info: Info) -> Result<Arc<Fabric>, OfiError> {
        let mut fabric = ptr::null_mut();
        // SAFETY: `info` is a valid answer of fi_getinfo; its fabric_attr
        // is what fi_fabric expects.
        check("fi_fabric", unsafe {
            sys::fi_fabric((*info.info).fabric_attr, &mut fabric, ptr::null_mut())
        } as i64)?;
        Ok(Arc::new(Fabric { fabric, info }))
    }

    /// The answer this fabric was opened from.
    pub(crate) fn info(&self) -> &Info {
        &self.info
    }

    /// `fi_trywait` on `cq`: `Ok` if it may block on its wait object,
    /// `Err` (`FI_EAGAIN`) if completions are there to read first.
    pub(crate) fn trywait(&self, cq: &Cq) -> Result<(), OfiError> {
        let mut fids = [cq.cq_fid()];
        // SAFETY: the fabric is open; `fids` holds one open CQ's fid.
        unsafe {
            let trywait = op("fi_trywait", (*(*self.fabric).ops).trywait)?;
            check(
                "fi_trywait",
                trywait(self.fabric, fids.as_mut_ptr(), 1) as i64,
            )
            .map(drop)
        }
    }
}

impl Drop for Fabric {
    fn drop(&mut self) {
        // SAFETY: every child holds an Arc of this fabric, so none is open.
        unsafe { close(&mut (*self.fabric).fid) };
    }
}

/// An open domain (`fi_domain`).
#[derive(Debug)]
pub(crate) struct Domain {
    domain: *mut sys::fid_domain,
    fabric: Arc<Fabric>,
}

// SAFETY: FI_THREAD_SAFE (see `Fabric`).
unsafe impl Send for Domain {}
// SAFETY: as above.
unsafe impl Sync for Domain {}

impl Domain {
    /// Opens the domain of the fabric's answer.
    pub(crate) fn open(fabric: &Arc<Fabric>) -> Result<Arc<Domain>, OfiError> {
        let mut domain = ptr::null_mut();
        // SAFETY: the fabric is open and its info valid.
        check("fi_domain", unsafe {
            let open = op("fi_domain", (*(*fabric.fabric).ops).domain)?;
            open(
                fabric.fabric,
                fabric.info.info,
                &mut domain,
                ptr::null_mut(),
            )
        } as i64)?;
        Ok(Arc::new(Domain {
            domain,
            fabric: Arc::clone(fabric),
        }))
    }

    /// The fabric.
    pub(crate) fn fabric(&self) -> &Arc<Fabric> {
        &self.fabric
    }
}

impl Drop for Domain {
    fn drop(&mut self) {
        // SAFETY: every child holds an Arc of this domain.
        unsafe { close(&mut (*self.domain).fid) };
    }
}

/// A completion queue of `fi_cq_msg_entry`s (`fi_cq_open`).
#[derive(Debug)]
pub(crate) struct Cq {
    cq: *mut sys::fid_cq,
    /// The wait object's file descriptor (`FI_WAIT_FD`), if it has one.
    fd: Option<i32>,
    _domain: Arc<Domain>,
}

// SAFETY: FI_THREAD_SAFE (see `Fabric`).
unsafe impl Send for Cq {}
// SAFETY: as above.
unsafe impl Sync for Cq {}

/// A completion read from a [`Cq`].
#[derive(Debug, Clone)]
pub(crate) struct Completion {
    /// The context the operation was posted with (its address: an
    /// opaque token here, which only its poster turns back into a pointer).
    pub(crate) context: usize,
    /// Bytes received (receives).
    pub(crate) len: usize,
    /// `Some` for an operation that failed: why.
    pub(crate) error: Option<OfiError>,
}

impl Cq {
    /// Opens a queue of `size` entries with a file descriptor to wait on,
    /// or, where the provider has none, without a wait object.
    pub(crate) fn open(domain: &Arc<Domain>, size: usize) -> Result<Arc<Cq>, OfiError> {
        let open = |wait_obj| {
            let mut attr = sys::fi_cq_attr {
                size,
                format: sys::fi_cq_format_FI_CQ_FORMAT_MSG,
                wait_obj,
                ..Default::default()
            };
            let mut cq = ptr::null_mut();
            // SAFETY: the domain is open; `attr` is valid for the call.
            check("fi_cq_open", unsafe {
                let open = op("fi_cq_open", (*(*domain.domain).ops).cq_open)?;
                open(domain.domain, &mut attr, &mut cq, ptr::null_mut())
            } as i64)
            .map(|_| cq)
        };
        let (cq, waits) = match open(sys::fi_wait_obj_FI_WAIT_FD) {
            Ok(cq) => (cq, true),
            Err(_) => (open(sys::fi_wait_obj_FI_WAIT_NONE)?, false),
        };
        let mut cq = Cq {
            cq,
            fd: None,
            _domain: Arc::clone(domain),
        };
        if waits {
            let mut fd: libc::c_int = -1;
            // SAFETY: the CQ is open; FI_GETWAIT writes an int (its fd).
            let got = unsafe {
                let control = op("fi_control", (*(*cq.cq).fid.ops).control)?;
                control(
                    &mut (*cq.cq).fid,
                    sys::FI_GETWAIT as i32,
                    (&mut fd as *mut libc::c_int).cast(),
                )
            };
            if got == 0 && fd >= 0 {
                cq.fd = Some(fd);
            }
        }
        Ok(Arc::new(cq))
    }

    fn cq_fid(&self) -> *mut sys::fid {
        // SAFETY: the CQ is open.
        unsafe { &mut (*self.cq).fid }
    }

    /// The file descriptor that becomes readable when completions may be
    /// there (owned by the CQ), if the provider has one.
    pub(crate) fn wait_fd(&self) -> Option<i32> {
        self.fd
    }

    /// Reads up to `out.len()` completions without blocking; failed
    /// operations come as completions with an error.
    pub(crate) fn read(&self, out: &mut Vec<Completion>, max: usize) -> Result<(), OfiError> {
        let mut entries = [sys::fi_cq_msg_entry::default(); 16];
        while out.len() < max {
            let want = entries.len().min(max - out.len());
            // SAFETY: the CQ is open and of FI_CQ_FORMAT_MSG; `entries` has
            // room for `want` of them.
            let n = unsafe {
                let read = op("fi_cq_read", (*(*self.cq).ops).read)?;
                read(self.cq, entries.as_mut_ptr().cast(), want)
            };
            if n == -(sys::FI_EAGAIN as isize) {
                return Ok(());
            }
            if n == -(sys::FI_EAVAIL as isize) {
                let mut err = sys::fi_cq_err_entry::default();
                // SAFETY: the CQ is open; `err` is a zeroed entry (no
                // err_data buffer: the provider keeps its own).
                let got = unsafe {
                    let readerr = op("fi_cq_readerr", (*(*self.cq).ops).readerr)?;
                    readerr(self.cq, &mut err, 0)
                };
                if got < 1 {
                    check("fi_cq_readerr", got as i64)?;
                    return Ok(());
                }
                out.push(Completion {
                    context: err.op_context as usize,
                    len: err.len,
                    error: Some(OfiError {
                        call: "a posted operation",
                        code: err.err,
                    }),
                });
                continue;
            }
            let n = check("fi_cq_read", n as i64)? as usize;
            out.extend(entries[..n].iter().map(|e| Completion {
                context: e.op_context as usize,
                len: e.len,
                error: None,
            }));
            if n < want {
                return Ok(());
            }
        }
        Ok(())
    }
}

impl Drop for Cq {
    fn drop(&mut self) {
        // SAFETY: endpoints bound to it hold an Arc of it.
        unsafe { close(self.cq_fid()) };
    }
}

/// An address vector of type `FI_AV_TABLE` (`fi_av_open`): addresses are
/// their insertion index.
#[derive(Debug)]
pub(crate) struct Av {
    av: *mut sys::fid_av,
    _domain: Arc<Domain>,
}

// SAFETY: FI_THREAD_SAFE (see `Fabric`).
unsafe impl Send for Av {}
// SAFETY: as above.
unsafe impl Sync for Av {}

impl Av {
    /// Opens a table for `count` addresses.
    pub(crate) fn open(domain: &Arc<Domain>, count: usize) -> Result<Arc<Av>, OfiError> {
        let mut attr = sys::fi_av_attr {
            type_: sys::fi_av_type_FI_AV_TABLE,
            count,
            ..Default::default()
        };
        let mut av = ptr::null_mut();
        // SAFETY: the domain is open; `attr` is valid.
        check("fi_av_open", unsafe {
            let open = op("fi_av_open", (*(*domain.domain).ops).av_open)?;
            open(domain.domain, &mut attr, &mut av, ptr::null_mut())
        } as i64)?;
        Ok(Arc::new(Av {
            av,
            _domain: Arc::clone(domain),
        }))
    }

    /// Inserts one endpoint name (as `fi_getname` gave it); its address.
    pub(crate) fn insert(&self, name: &[u8]) -> Result<sys::fi_addr_t, OfiError> {
        let mut addr: sys::fi_addr_t = ADDR_UNSPEC;
        // SAFETY: the AV is open; `name` is one address of the provider's
        // format (libfabric reads `addrlen` of its own from it, at most
        // the name's length for the providers' formats); `addr` takes one.
        let n = unsafe {
            let insert = op("fi_av_insert", (*(*self.av).ops).insert)?;
            insert(
                self.av,
                name.as_ptr().cast(),
                1,
                &mut addr,
                0,
                ptr::null_mut(),
            )
        };
        if n != 1 {
            check("fi_av_insert", n.min(0) as i64)?;
            return Err(OfiError {
                call: "fi_av_insert",
                code: libc::EINVAL,
            });
        }
        Ok(addr)
    }
}

impl Drop for Av {
    fn drop(&mut self) {
        // SAFETY: endpoints bound to it hold an Arc of it.
        unsafe { close(&mut (*self.av).fid) };
    }
}

/// An enabled RDM endpoint bound to a CQ (sends, receives and reads) and
/// an AV (`fi_endpoint`, `fi_ep_bind`, `fi_enable`).
#[derive(Debug)]
pub(crate) struct Endpoint {
    ep: *mut sys::fid_ep,
    cq: Arc<Cq>,
    av: Arc<Av>,
}

// SAFETY: FI_THREAD_SAFE (see `Fabric`).
unsafe impl Send for Endpoint {}
// SAFETY: as above.
unsafe impl Sync for Endpoint {}

impl Endpoint {
    /// Opens an endpoint of the domain, binds `cq` (transmit and receive
    /// completions) and `av`, and enables it.
    pub(crate) fn open(
        domain: &Arc<Domain>,
        cq: &Arc<Cq>,
        av: &Arc<Av>,
    ) -> Result<Endpoint, OfiError> {
        let mut ep = ptr::null_mut();
        // SAFETY: the domain is open and its fabric's info valid.
        check("fi_endpoint", unsafe {
            let open = op("fi_endpoint", (*(*domain.domain).ops).endpoint)?;
            open(
                domain.domain,
                domain.fabric.info.info,
                &mut ep,
                ptr::null_mut(),
            )
        } as i64)?;
        let endpoint = Endpoint {
            ep,
            cq: Arc::clone(cq),
            av: Arc::clone(av),
        };
        // SAFETY: the endpoint, CQ and AV are open; the flags are those of
        // fi_ep_bind; FI_ENABLE takes no argument.
        unsafe {
            let fid = &mut (*ep).fid;
            let bind = op("fi_ep_bind", (*fid.ops).bind)?;
            check(
                "fi_ep_bind (cq)",
                bind(fid, cq.cq_fid(), (sys::FI_TRANSMIT | sys::FI_RECV) as u64) as i64,
            )?;
            check("fi_ep_bind (av)", bind(fid, &mut (*av.av).fid, 0) as i64)?;
            let control = op("fi_enable", (*fid.ops).control)?;
            check(
                "fi_enable",
                control(fid, sys::FI_ENABLE as i32, ptr::null_mut()) as i64,
            )?;
        }
        Ok(endpoint)
    }

    /// The endpoint's address (`fi_getname`), for peers to insert.
    pub(crate) fn name(&self) -> Result<Vec<u8>, OfiError> {
        let mut name = vec![0u8; 256];
        let mut len = name.len();
        // SAFETY: the endpoint is open; `name` has `len` writable bytes
        // and `len` says so; on -FI_ETOOSMALL it holds the size needed.
        unsafe {
            let getname = op("fi_getname", (*(*self.ep).cm).getname)?;
            let mut ret = getname(&mut (*self.ep).fid, name.as_mut_ptr().cast(), &mut len);
            if ret == -(sys::FI_ETOOSMALL as i32) {
                name.resize(len, 0);
                ret = getname(&mut (*self.ep).fid, name.as_mut_ptr().cast(), &mut len);
            }
            check("fi_getname", ret as i64)?;
        }
        name.truncate(len);
        Ok(name)
    }

    /// The AV the endpoint sends through.
    pub(crate) fn av(&self) -> &Av {
        &self.av
    }

    /// The CQ the endpoint completes into.
    pub(crate) fn cq(&self) -> &Cq {
        &self.cq
    }

    /// Posts a receive into `len` bytes at `buf` from any source.
    ///
    /// # Safety
    ///
    /// `buf` stays valid for writes of `len` bytes, and `context` (a
    /// `fi_context2` at its start, for providers that use it) valid, until
    /// the receive's completion is read.
    pub(crate) unsafe fn recv(
        &self,
        buf: *mut u8,
        len: usize,
        context: *mut c_void,
    ) -> Result<(), OfiError> {
        // SAFETY: the endpoint is open; the caller keeps `buf` and
        // `context` valid.
        check("fi_recv", unsafe {
            let recv = op("fi_recv", (*(*self.ep).msg).recv)?;
            recv(
                self.ep,
                buf.cast(),
                len,
                ptr::null_mut(),
                ADDR_UNSPEC,
                context,
            )
        } as i64)
        .map(drop)
    }

    /// Posts a send of `len` bytes at `buf` to `to`.
    ///
    /// # Safety
    ///
    /// `buf` stays valid for reads of `len` bytes and unchanged, and
    /// `context` valid, until the send's completion is read.
    pub(crate) unsafe fn send(
        &self,
        buf: *const u8,
        len: usize,
        to: sys::fi_addr_t,
        context: *mut c_void,
    ) -> Result<(), OfiError> {
        // SAFETY: as for `recv`.
        check("fi_send", unsafe {
            let send = op("fi_send", (*(*self.ep).msg).send)?;
            send(self.ep, buf.cast(), len, ptr::null_mut(), to, context)
        } as i64)
        .map(drop)
    }

    /// Posts a read of `len` bytes from `from` (a peer's registered
    /// memory) into `buf` (described by `desc`, where the provider wants
    /// local memory registered).
    ///
    /// # Safety
    ///
    /// `buf` stays valid for writes of `len` bytes, and `context` valid,
    /// until the read's completion is read.
    pub(crate) unsafe fn read(
        &self,
        buf: *mut u8,
        len: usize,
        desc: *mut c_void,
        from: RemoteMemory,
        context: *mut c_void,
    ) -> Result<(), OfiError> {
        // SAFETY: as for `recv`.
        check("fi_read", unsafe {
            let read = op("fi_read", (*(*self.ep).rma).read)?;
            read(
                self.ep,
                buf.cast(),
                len,
                desc,
                from.peer,
                from.addr,
                from.key,
                context,
            )
        } as i64)
        .map(drop)
    }
}

/// Memory of a peer to read: its address in the AV, and the address (or
/// offset) and key its registration gave.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RemoteMemory {
    pub(crate) peer: sys::fi_addr_t,
    pub(crate) addr: u64,
    pub(crate) key: u64,
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        // SAFETY: the endpoint is open and dropped once; the CQ and AV it
        // is bound to are closed after it (their Arcs drop after this).
        unsafe { close(&mut (*self.ep).fid) };
    }
}

/// Registered memory (`fi_mr_reg`): a buffer peers may read (`FI_REMOTE_READ`)
/// or the endpoint read into (`FI_READ`).
#[derive(Debug)]
pub(crate) struct Mr {
    mr: *mut sys::fid_mr,
    _domain: Arc<Domain>,
}

// SAFETY: FI_THREAD_SAFE (see `Fabric`).
unsafe impl Send for Mr {}
// SAFETY: as above.
unsafe impl Sync for Mr {}

impl Mr {
    /// Registers `len` bytes at `buf` for `access`, asking for `key`
    /// (which a provider of `FI_MR_PROV_KEY` mode ignores: [`key`](Self::key)
    /// is the one to use).
    ///
    /// # Safety
    ///
    /// The memory stays valid (and, for remote reads, unchanged) until the
    /// `Mr` is dropped.
    pub(crate) unsafe fn register(
        domain: &Arc<Domain>,
        buf: *const u8,
        len: usize,
        access: u64,
        key: u64,
    ) -> Result<Mr, OfiError> {
        let mut mr = ptr::null_mut();
        // SAFETY: the domain is open; the caller keeps the memory valid.
        check("fi_mr_reg", unsafe {
            let reg = op("fi_mr_reg", (*(*domain.domain).mr).reg)?;
            reg(
                &mut (*domain.domain).fid,
                buf.cast(),
                len,
                access,
                0,
                key,
                0,
                &mut mr,
                ptr::null_mut(),
            )
        } as i64)?;
        Ok(Mr {
            mr,
            _domain: Arc::clone(domain),
        })
    }

    /// The key a peer reads with.
    pub(crate) fn key(&self) -> u64 {
        // SAFETY: the MR is open (`fi_mr_key`'s inline body reads this).
        unsafe { (*self.mr).key }
    }

    /// The local descriptor (`fi_mr_desc`).
    pub(crate) fn desc(&self) -> *mut c_void {
        // SAFETY: as above.
        unsafe { (*self.mr).mem_desc }
    }
}

impl Drop for Mr {
    fn drop(&mut self) {
        // SAFETY: the MR is open and dropped once; its domain outlives it.
        unsafe { close(&mut (*self.mr).fid) };
    }
}
