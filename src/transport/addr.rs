//! Which address this process listens on.
