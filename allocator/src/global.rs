//! The process-wide state: configuration, topology and the node pools, initialised once on
//! first use (possibly before `main`) without allocating.
//!
//! ## fork()
//! A child process has only the thread that called `fork()`; a lock held by any other thread
//! at that moment would stay locked in the child forever. So `pthread_atfork` handlers take
//! every allocator lock before the fork, in the one order used everywhere (the fallback
//! cache, then the node pools in index order, then the cache registry; node locks are never
//! nested with each other), and release them in the parent and in the child afterwards. The
//! child can then allocate freely; blocks of slabs owned by threads that do not exist in the
//! child are simply never reused there (their owner serials are never given to a thread of
//! the child, see `cache`), and before releasing the locks the child drops those threads'
//! caches from the cache registry (`cache::fork_child`).

use core::cell::UnsafeCell;
use std::sync::Once;

use crate::config::Config;
use crate::node::NodePool;
use crate::topology::{Topology, MAX_NODES};

pub(crate) struct Global {
    once: Once,
    topology: UnsafeCell<Topology>,
    config: UnsafeCell<Config>,
    pools: [NodePool; MAX_NODES],
}

// SAFETY: `topology` and `config` are written once inside `once.call_once` and only read after
// `once` completed (which synchronises); the pools synchronise themselves.
unsafe impl Sync for Global {}

pub(crate) static GLOBAL: Global = Global {
    once: Once::new(),
    topology: UnsafeCell::new(Topology::single()),
    config: UnsafeCell::new(Config::DEFAULT),
    pools: [const { NodePool::new() }; MAX_NODES],
};

impl Global {
    /// Initialises on first call; cheap afterwards (one acquire load).
    #[inline(always)]
    pub(crate) fn get() -> &'static Global {
        if !GLOBAL.once.is_completed() {
            GLOBAL.init_slow();
        }
        &GLOBAL
    }

    #[cold]
    fn init_slow(&self) {
        self.once.call_once(|| {
            let topology = Topology::detect();
            let config = Config::from_env();
            let nodes = topology.nodes();
            let bind = config.bind.unwrap_or(nodes > 1);
            let keep = config.keep / nodes;
            for (id, pool) in self.pools.iter().enumerate().take(nodes) {
                pool.configure(id, bind, config.hugepages, keep);
            }
            // SAFETY: inside `call_once`: no reader before completion, no other writer.
            unsafe {
                *self.topology.get() = topology;
                *self.config.get() = config;
            }
            // SAFETY: registers plain functions that only take and release our locks.
            unsafe {
                libc::pthread_atfork(Some(fork_prepare), Some(fork_release), Some(fork_child))
            };
        });
    }

    /// The topology in use.
    pub(crate) fn topology(&self) -> &Topology {
        // SAFETY: only reachable through `get`, after initialisation completed.
        unsafe { &*self.topology.get() }
    }

    /// The configuration in use.
    pub(crate) fn config(&self) -> Config {
        // SAFETY: only reachable through `get`, after initialisation completed.
        unsafe { *self.config.get() }
    }

    /// The pool of node `node`.
    #[inline(always)]
    pub(crate) fn pool(&self, node: usize) -> &NodePool {
        &self.pools[node % MAX_NODES]
    }

    /// The pool of the node the calling thread runs on.
    #[inline]
    pub(crate) fn current_pool(&self) -> &NodePool {
        self.pool(self.topology().current_node())
    }
}

/// `pthread_atfork` prepare handler: takes every allocator lock (see the module docs).
extern "C" fn fork_prepare() {
    crate::cache::fork_lock_fallback();
    for pool in GLOBAL.pools.iter() {
        pool.fork_lock();
    }
    crate::cache::fork_lock_registry();
}

/// `pthread_atfork` child handler: forgets the parent's other threads, then releases the locks.
extern "C" fn fork_child() {
    crate::cache::fork_child();
    fork_release();
}

/// `pthread_atfork` parent handler: releases the locks taken by `fork_prepare`.
extern "C" fn fork_release() {
    for pool in GLOBAL.pools.iter() {
        pool.fork_unlock();
    }
    crate::cache::fork_unlock();
}
