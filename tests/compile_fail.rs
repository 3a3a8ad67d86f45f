//! What must not compile: the lifetime guarantees of requests and scopes.
//!
//! Each file in `tests/compile_fail/` is a small program that would let a
//! peer touch a buffer that is gone or in use; the compiler must refuse it
//! with the error in the `.stderr` file next to it. If a lifetime bound of
//! `Request`, `Scope`, `scope`, `multiple_scope`, `RequestCollection`,
//! `WaitGuard` or an immediate operation is loosened, a case compiles and
//! this test fails.
//!
//! The expected messages are those of the stable compiler, so this test does
//! not run in the AddressSanitizer build (nightly, `sanitizer` feature).
//! Regenerate them with `TRYBUILD=overwrite cargo test --test compile_fail`
//! on stable, and read the diff.
#![cfg(not(feature = "sanitizer"))]

#[test]
fn requests_and_scopes_keep_their_buffers_alive() {
    let cases = trybuild::TestCases::new();
    cases.compile_fail("tests/compile_fail/*.rs");
}
