//! The process-wide state: configuration, topology and the node pools, initialised once on
//! first use (possibly before `main`) without allocating.

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
