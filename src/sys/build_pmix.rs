//! PMIx's bindings (feature `pmix`): see `build.rs`.
//!
//! The headers and library come from pkg-config's `pmix` (Debian's
//! libpmix-dev installs them under `/usr/lib/x86_64-linux-gnu/pmix2`, off
//! the default search paths); without a `.pc` file, that directory. Only
//! what `launch/pmix.rs` calls is allowlisted, so the generated file stays
//! small and a newer libpmix cannot add names that clash.

use std::path::PathBuf;
use std::process::Command;

/// Where Debian puts libpmix 4 (used when pkg-config has no `pmix`).
const FALLBACK: &str = "/usr/lib/x86_64-linux-gnu/pmix2";

/// Writes `OUT_DIR/pmix.rs` and tells cargo to link libpmix.
pub(crate) fn generate() {
    println!("cargo:rerun-if-changed=src/sys/build_pmix.rs");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
    let (includes, lib_dirs) = locate();
    for dir in &lib_dirs {
        println!("cargo:rustc-link-search=native={dir}");
        // The library is off the loader's default paths: the binaries
        // find it as `mpicc` and pkg-config's flags make them do.
        println!("cargo:rustc-link-arg=-Wl,-rpath,{dir}");
    }
    println!("cargo:rustc-link-lib=dylib=pmix");
    let mut builder = bindgen::Builder::default()
        .header_contents("wrapper.h", "#include <pmix.h>\n")
        .allowlist_function("PMIx_(Init|Finalize|Put|Commit|Fence|Get|Abort|Error_string)")
        .allowlist_function("PMIx_Value_destruct")
                .allowlist_var("PMIX_(SUCCESS|ERR_NOT_FOUND|ERR_TIMEOUT|RANK_WILDCARD|GLOBAL|BOOL|STRING|INT|UINT16|UINT32|MAX_KEYLEN)")
        .allowlist_var("PMIX_(JOB_SIZE|LOCAL_RANK|COLLECT_DATA|TIMEOUT)")
        .derive_debug(false)
        .layout_tests(false)
        .generate_comments(false);
    for dir in &includes {
        builder = builder.clang_arg(format!("-I{dir}"));
    }
    let bindings = builder.generate().unwrap_or_else(|e| {
        panic!("bindgen over <pmix.h> failed ({e}): install libpmix-dev and libclang-dev")
    });
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    bindings
        .write_to_file(out.join("pmix.rs"))
        .expect("writing OUT_DIR/pmix.rs");
}

/// The include and library directories of libpmix.
fn locate() -> (Vec<String>, Vec<String>) {
    let flags = |what: &str| {
        Command::new("pkg-config")
            .args([what, "pmix"])
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
    };
    match (flags("--cflags-only-I"), flags("--libs-only-L")) {
        (Some(cflags), Some(libs)) => (
            cflags
                .split_whitespace()
                .filter_map(|f| f.strip_prefix("-I"))
                .map(str::to_string)
                .collect(),
            libs.split_whitespace()
                .filter_map(|f| f.strip_prefix("-L"))
                .map(str::to_string)
                .collect(),
        ),
        _ => (
            vec![format!("{FALLBACK}/include")],
            vec![format!("{FALLBACK}/lib")],
        ),
    }
}
