//! Moving messages between the processes of a job (layer L2).
mod addr;
pub(crate) mod mesh;
