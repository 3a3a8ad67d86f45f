//! The PMIx client (feature `pmix`): what a process started by Open MPI's
//! `mpirun` or `srun --mpi=pmix` uses instead of PMI, through libpmix
//! (`sys::pmix`, bindings generated at build time).
//!
//! ## The calls, by operation
//!
//! | operation | libpmix |
//! |---|---|
//! | start | `PMIx_Init` (this process's namespace and rank), `PMIx_Get(wildcard rank, PMIX_JOB_SIZE)`, `PMIx_Get(self, PMIX_LOCAL_RANK)` |
//! | put | `PMIx_Put(PMIX_GLOBAL, key, string)` |
//! | fence | `PMIx_Commit`, `PMIx_Fence(whole namespace, PMIX_COLLECT_DATA=true)` |
//! | get | `PMIx_Get(the owner's rank, key, PMIX_TIMEOUT)` |
//! | barrier | `PMIx_Fence(whole namespace)` without data |
//! | finalize, abort | `PMIx_Finalize`, `PMIx_Abort` |
//!
//! PMIx keys belong to the process that put them, so a get names the
//! owner (PMI's key-value space is one flat table instead). Values are
//! strings (`PMIX_STRING`); there is no PMI-style value limit, but keys
//! stay within `PMIX_MAX_KEYLEN` (511 bytes).
//!
//! ## Waiting
//!
//! As in the PMI client (`pmi.rs`): a get waits at most the client's
//! timeout (`PMIX_TIMEOUT`), so a missing key is an error rather than a
//! hang; a fence or barrier waits for the other processes without a
//! timeout, and a server that goes away ends it with an error. `PMIx_Init`
//! against a server that is not there fails at once (libpmix connects
//! without retrying).
//!
//! ## Process-global state
//!
//! libpmix keeps one connection per process. [`Client`] is the token for
//! it: at most one exists at a time ([`IN_USE`]), and
//! [`finalize`](Client::finalize) and [`abort`](Client::abort) consume it.

use std::ffi::{c_char, CStr, CString};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::error::{shorten, LaunchError};
use crate::sys::pmix as ffi;

/// Whether a [`Client`] exists in this process (libpmix's state is global).
static IN_USE: AtomicBool = AtomicBool::new(false);

/// The longest key (`PMIX_MAX_KEYLEN`, NUL excluded).
const KEY_MAX: usize = ffi::PMIX_MAX_KEYLEN as usize;

/// A started PMIx client: this process's place in the launcher's job.
#[derive(Debug)]
pub(crate) struct Client {
    /// This process (namespace and rank), as `PMIx_Init` returned it.
    this: Proc,
    size: u32,
    local_rank: Option<u32>,
    timeout: Duration,
}

/// A `pmix_proc_t` (a namespace, NUL-terminated, and a rank).
#[derive(Clone, Copy)]
struct Proc(ffi::pmix_proc_t);

impl std::fmt::Debug for Proc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.namespace(), self.0.rank)
    }
}

impl Proc {
    /// The process of `namespace` with `rank`.
    fn with_rank(&self, rank: u32) -> Proc {
        let mut p = self.0;
        p.rank = rank;
        Proc(p)
    }

    fn namespace(&self) -> String {
        // SAFETY: `PMIx_Init` wrote a NUL-terminated namespace into the
        // array (at most PMIX_MAX_NSLEN bytes and its NUL; the array holds
        // PMIX_MAX_NSLEN + 1), and the array is zeroed before it.
        unsafe { CStr::from_ptr(self.0.nspace.as_ptr()) }
            .to_string_lossy()
            .into_owned()
    }
}

/// A `pmix_info_t` directive for a call: a key and a bool or int value
/// (no heap data, so nothing to destruct).
struct Info(ffi::pmix_info_t);

impl Info {
    fn new(key: &[u8]) -> Info {
        // SAFETY: `pmix_info_t` is plain C data (arrays, integers, a union
        // of scalars and pointers); all zeros is a valid, empty value.
        let mut info: ffi::pmix_info_t = unsafe { std::mem::zeroed() };
        // `key` is one of the header's constants: NUL-terminated, shorter
        // than the key array.
        for (to, &from) in info.key.iter_mut().zip(key) {
            *to = from as c_char;
        }
        Info(info)
    }

    fn flag(key: &[u8], value: bool) -> Info {
        let mut info = Info::new(key);
        info.0.value.type_ = ffi::PMIX_BOOL as ffi::pmix_data_type_t;
        info.0.value.data.flag = value;
        info
    }

    fn int(key: &[u8], value: i32) -> Info {
        let mut info = Info::new(key);
        info.0.value.type_ = ffi::PMIX_INT as ffi::pmix_data_type_t;
        info.0.value.data.integer = value;
        info
    }
}

/// A value `PMIx_Get` returned: owned by this process, released on drop.
struct Value(*mut ffi::pmix_value_t);

impl Drop for Value {
    fn drop(&mut self) {
        // SAFETY: `PMIx_Get` allocated the value with malloc and gave it to
        // the caller, which releases it once (PMIX_VALUE_RELEASE: destruct
        // the data, free the struct); nothing else holds the pointer.
        unsafe {
            ffi::PMIx_Value_destruct(self.0);
            libc::free(self.0.cast());
        }
    }
}

impl Value {
    fn type_(&self) -> ffi::pmix_data_type_t {
        // SAFETY: the pointer is valid until drop (see `Drop`).
        unsafe { (*self.0).type_ }
    }

    /// The value as a `u32`, if it is an unsigned integer type.
    fn unsigned(&self) -> Option<u32> {
        // SAFETY: the pointer is valid until drop, and the union field read
        // is the one its `type_` says is set.
        unsafe {
            match u32::from(self.type_()) {
                ffi::PMIX_UINT32 => Some((*self.0).data.uint32),
                ffi::PMIX_UINT16 => Some(u32::from((*self.0).data.uint16)),
                _ => None,
            }
        }
    }

    /// The value as text, if it is a string.
    fn text(&self) -> Option<String> {
        if u32::from(self.type_()) != ffi::PMIX_STRING {
            return None;
        }
        // SAFETY: the pointer is valid until drop, and a PMIX_STRING value
        // holds a NUL-terminated string or NULL.
        unsafe {
            let s = (*self.0).data.string;
            (!s.is_null()).then(|| CStr::from_ptr(s).to_string_lossy().into_owned())
        }
    }
}

/// libpmix's name for `status` (`PMIX_ERR_UNREACH`, ...).
fn describe(status: ffi::pmix_status_t) -> String {
    // SAFETY: `PMIx_Error_string` returns a pointer to a static string for
    // any status (an "unknown" text for codes it does not know).
    let name = unsafe { ffi::PMIx_Error_string(status) };
    if name.is_null() {
        return format!("status {status}");
    }
    // SAFETY: non-NULL, NUL-terminated and static (above).
    unsafe { CStr::from_ptr(name) }
        .to_string_lossy()
        .into_owned()
}

/// An error for `status` returned by `call`.
fn refused(call: &str, status: ffi::pmix_status_t) -> LaunchError {
    LaunchError::Refused {
        command: call.to_string(),
        rc: i64::from(status),
        message: Some(describe(status)),
    }
}

fn check(call: &str, status: ffi::pmix_status_t) -> Result<(), LaunchError> {
    if status == ffi::PMIX_SUCCESS as ffi::pmix_status_t {
        Ok(())
    } else {
        Err(refused(call, status))
    }
}

/// A key as a C string within PMIx's limit.
fn c_key(key: &str) -> Result<CString, LaunchError> {
    if key.is_empty() {
        return Err(LaunchError::EmptyKey);
    }
    if key.len() > KEY_MAX {
        return Err(LaunchError::TooLong {
            what: "key",
            len: key.len(),
            max: KEY_MAX,
            limit: "PMIX_MAX_KEYLEN".to_string(),
        });
    }
    CString::new(key).map_err(|_| LaunchError::BadByte {
        what: "key",
        text: shorten(key),
        byte: '\0',
    })
}

impl Client {
    /// Starts PMIx: `PMIx_Init`, then the job size and this process's local
    /// rank. Each get waits at most `timeout`.
    ///
    /// Fails if a client already exists in this process, or if the server
    /// the environment names (`PMIX_SERVER_URI*`) does not answer.
    pub(crate) fn init(timeout: Duration) -> Result<Client, LaunchError> {
        if IN_USE.swap(true, Ordering::AcqRel) {
            return Err(LaunchError::Io {
                command: "PMIx_Init".to_string(),
                reason: "this process already has a PMIx client (PMIx starts once per process)"
                    .to_string(),
            });
        }
        // SAFETY: all zeros is a valid `pmix_proc_t` (an empty namespace,
        // rank 0), which `PMIx_Init` overwrites.
        let mut this: ffi::pmix_proc_t = unsafe { std::mem::zeroed() };
        // SAFETY: `this` is valid for writes; no info array (NULL, 0).
        let status = unsafe { ffi::PMIx_Init(&mut this, std::ptr::null_mut(), 0) };
        if status != ffi::PMIX_SUCCESS as ffi::pmix_status_t {
            IN_USE.store(false, Ordering::Release);
            let server = ["PMIX_SERVER_URI41", "PMIX_SERVER_URI4", "PMIX_SERVER_URI3"]
                .into_iter()
                .find_map(|v| std::env::var(v).ok().map(|uri| format!("{v}={uri:?}")))
                .unwrap_or_else(|| "no PMIX_SERVER_URI* variable".to_string());
            return Err(LaunchError::Io {
                command: "PMIx_Init".to_string(),
                reason: format!(
                    "{} (rc={status}): the launcher's PMIx server ({server}) did not accept \
                     this process (was it started by `mpirun` or `srun --mpi=pmix` of a job \
                     still running?)",
                    describe(status)
                ),
            });
        }
        let mut client = Client {
            this: Proc(this),
            size: 0,
            local_rank: None,
            timeout,
        };
        // From here on, a failure finalizes (drop does not).
        let sizes = client
            .get_value(
                client.this.with_rank(ffi::PMIX_RANK_WILDCARD),
                ffi::PMIX_JOB_SIZE,
            )
            .and_then(|v| {
                v.unsigned().ok_or_else(|| LaunchError::Malformed {
                    command: "PMIx_Get(PMIX_JOB_SIZE)".to_string(),
                    problem: format!("the value has type {}, not an unsigned integer", v.type_()),
                    reply: String::new(),
                })
            });
        let size = match sizes {
            Ok(size) if size > client.this.0.rank => size,
            Ok(size) => {
                let rank = client.this.0.rank;
                let _ = client.finalize();
                return Err(LaunchError::Malformed {
                    command: "PMIx_Get(PMIX_JOB_SIZE)".to_string(),
                    problem: format!("this process's rank {rank} is not below the job size"),
                    reply: size.to_string(),
                });
            }
            Err(e) => {
                let _ = client.finalize();
                return Err(e);
            }
        };
        client.size = size;
        client.local_rank = client
            .get_value(client.this, ffi::PMIX_LOCAL_RANK)
            .ok()
            .and_then(|v| v.unsigned());
        Ok(client)
    }

    /// This process's rank in the launcher's job.
    pub(crate) fn rank(&self) -> u32 {
        self.this.0.rank
    }

    /// The number of processes of the launcher's job.
    pub(crate) fn size(&self) -> u32 {
        self.size
    }

    /// This process's index among the job's processes on its host
    /// (`PMIX_LOCAL_RANK`), if the server gives it.
    pub(crate) fn local_rank(&self) -> Option<u32> {
        self.local_rank
    }

    /// The job's namespace (for messages).
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn namespace(&self) -> String {
        self.this.namespace()
    }

    /// Publishes `key` = `value` for every process of the job; they see it
    /// after the next [`fence`](Self::fence).
    pub(crate) fn put(&mut self, key: &str, value: &str) -> Result<(), LaunchError> {
        let key = c_key(key)?;
        let value = CString::new(value).map_err(|_| LaunchError::BadByte {
            what: "value",
            text: shorten(value),
            byte: '\0',
        })?;
        // SAFETY: all zeros is a valid `pmix_value_t` (see `Info::new`).
        let mut v: ffi::pmix_value_t = unsafe { std::mem::zeroed() };
        v.type_ = ffi::PMIX_STRING as ffi::pmix_data_type_t;
        v.data.string = value.as_ptr().cast_mut();
        // SAFETY: `key` and the string are NUL-terminated and live across
        // the call; `PMIx_Put` copies the value (it does not write through
        // the string pointer, nor keep it).
        let status = unsafe { ffi::PMIx_Put(ffi::PMIX_GLOBAL as u8, key.as_ptr(), &mut v) };
        check("PMIx_Put", status)
    }

    /// Commits this process's puts and waits until every process of the
    /// job has, collecting their data (`PMIx_Commit`, `PMIx_Fence` with
    /// `PMIX_COLLECT_DATA`).
    pub(crate) fn fence(&mut self) -> Result<(), LaunchError> {
        // SAFETY: no arguments; the client is initialised (a `Client`
        // exists).
        check("PMIx_Commit", unsafe { ffi::PMIx_Commit() })?;
        let everyone = self.this.with_rank(ffi::PMIX_RANK_WILDCARD);
        let collect = Info::flag(ffi::PMIX_COLLECT_DATA, true);
        // SAFETY: one proc and one info, both valid across the call, which
        // only reads them.
        let status = unsafe { ffi::PMIx_Fence(&everyone.0, 1, &collect.0, 1) };
        check("PMIx_Fence", status)
    }

    /// Waits until every process of the job has called it.
    pub(crate) fn barrier(&mut self) -> Result<(), LaunchError> {
        let everyone = self.this.with_rank(ffi::PMIX_RANK_WILDCARD);
        // SAFETY: one proc, valid across the call; no infos.
        let status = unsafe { ffi::PMIx_Fence(&everyone.0, 1, std::ptr::null(), 0) };
        check("PMIx_Fence", status)
    }

    /// The value process `owner` put under `key` before the last fence. A
    /// key that is not there is [`LaunchError::KeyNotFound`] (after at
    /// most the client's timeout); a rank outside the job is refused.
    pub(crate) fn get(&mut self, owner: u32, key: &str) -> Result<String, LaunchError> {
        if owner >= self.size {
            return Err(LaunchError::Malformed {
                command: "PMIx_Get".to_string(),
                problem: format!("process {owner} is not in the job of {}", self.size),
                reply: String::new(),
            });
        }
        let c = c_key(key)?;
        let value = self
            .get_value(self.this.with_rank(owner), c.as_bytes_with_nul())
            .map_err(|e| match e {
                LaunchError::Refused { rc, .. }
                    if rc == i64::from(ffi::PMIX_ERR_NOT_FOUND)
                        || rc == i64::from(ffi::PMIX_ERR_TIMEOUT) =>
                {
                    LaunchError::KeyNotFound {
                        key: format!("{key} of process {owner}"),
                    }
                }
                e => e,
            })?;
        value.text().ok_or_else(|| LaunchError::Malformed {
            command: "PMIx_Get".to_string(),
            problem: format!("{key} of process {owner} is not a string"),
            reply: format!("type {}", value.type_()),
        })
    }

    /// `PMIx_Get` of `key` (NUL-terminated) from `owner`, waiting at most
    /// the timeout.
    fn get_value(&self, owner: Proc, key: &[u8]) -> Result<Value, LaunchError> {
        let name = CStr::from_bytes_until_nul(key).map_err(|_| LaunchError::EmptyKey)?;
        let seconds = self.timeout.as_secs().clamp(1, i32::MAX as u64) as i32;
        let timeout = Info::int(ffi::PMIX_TIMEOUT, seconds);
        let mut out: *mut ffi::pmix_value_t = std::ptr::null_mut();
        // SAFETY: the proc, the NUL-terminated key and the info are valid
        // across the call, which reads them; `out` is valid for writes and
        // receives a value this process then owns (or stays NULL).
        let status = unsafe { ffi::PMIx_Get(&owner.0, name.as_ptr(), &timeout.0, 1, &mut out) };
        let what = format!("PMIx_Get({})", name.to_string_lossy());
        check(&what, status)?;
        if out.is_null() {
            return Err(LaunchError::Malformed {
                command: what,
                problem: "success without a value".to_string(),
                reply: String::new(),
            });
        }
        Ok(Value(out))
    }

    /// Tells the server this process is done with PMIx.
    pub(crate) fn finalize(self) -> Result<(), LaunchError> {
        // SAFETY: the client is initialised, and consumed here: no PMIx call
        // follows on it.
        let status = unsafe { ffi::PMIx_Finalize(std::ptr::null(), 0) };
        IN_USE.store(false, Ordering::Release);
        check("PMIx_Finalize", status)
    }

    /// Asks the launcher to end the whole job with `exit_code`.
    pub(crate) fn abort(self, exit_code: i32, message: &str) -> Result<(), LaunchError> {
        let message = CString::new(message.replace('\0', " ")).unwrap_or_default();
        // SAFETY: the message is NUL-terminated and lives across the call;
        // no procs (NULL, 0) means the whole namespace.
        let status =
            unsafe { ffi::PMIx_Abort(exit_code, message.as_ptr(), std::ptr::null_mut(), 0) };
        IN_USE.store(false, Ordering::Release);
        check("PMIx_Abort", status)
    }
}
