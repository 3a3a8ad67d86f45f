//! myriad: a thread-based MPI runtime.
