//! Which transport the processes of a job use: `MYRIAD_TRANSPORT`.
//!
//! | value | peers on this host | peers on other hosts |
//! |---|---|---|
//! | `auto` (default, or unset) | shared memory where it can be set up, else as remote peers | libfabric where the `ofi` feature is built and a provider is up, else TCP |
//! | `tcp` | TCP | TCP |
//! | `ofi` | libfabric (`FI_PROVIDER` chooses the provider) | libfabric |
//! | `shm` | shared memory | an error: the job spans hosts |
//!
//! An explicit value forces every peer through that transport, so tests and
//! benchmarks of one host measure the path they name (`tcp` on loopback is
//! what `pingpong --transport tcp` compares with MPICH over TCP).
//!
//! ## Design note
//!
//! The choice is parsed once, before the mesh is built, and a value the
//! build cannot honour is an error naming the variable: a job never runs
//! silently on another transport than the one it was asked for.

use crate::error::Error;

/// The value of `MYRIAD_TRANSPORT`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Choice {
    /// The best each pair of processes can have.
    Auto,
    /// TCP streams for every pair.
    Tcp,
    /// libfabric RDM endpoints for every pair.
    Ofi,
    /// Shared memory for every pair (one host only).
    Shm,
}

impl Choice {
    /// Reads `MYRIAD_TRANSPORT` through `var` (unset or empty: `auto`).
    pub(crate) fn from_env(var: &dyn Fn(&str) -> Option<String>) -> Result<Choice, Error> {
        let Some(value) = var("MYRIAD_TRANSPORT").filter(|v| !v.trim().is_empty()) else {
            return Ok(Choice::Auto);
        };
        match value.trim().to_ascii_lowercase().as_str() {
            "auto" => Ok(Choice::Auto),
            "tcp" => Ok(Choice::Tcp),
            "ofi" => Ok(Choice::Ofi),
            "shm" => Ok(Choice::Shm),
            _ => Err(Error::config(format!(
                "MYRIAD_TRANSPORT={value:?} is not a transport: use auto, tcp, ofi or shm"
            ))),
        }
    }

    /// The name users write.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Choice::Auto => "auto",
            Choice::Tcp => "tcp",
            Choice::Ofi => "ofi",
            Choice::Shm => "shm",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(value: Option<&str>) -> Result<Choice, Error> {
        Choice::from_env(&|name| {
            assert_eq!(name, "MYRIAD_TRANSPORT");
            value.map(str::to_owned)
        })
    }

    #[test]
    fn unset_or_empty_is_auto() {
        assert_eq!(parse(None).unwrap(), Choice::Auto);
        assert_eq!(parse(Some(" ")).unwrap(), Choice::Auto);
    }

    #[test]
    fn each_name_parses_whatever_its_case() {
        for c in [Choice::Auto, Choice::Tcp, Choice::Ofi, Choice::Shm] {
            assert_eq!(parse(Some(c.name())).unwrap(), c);
            assert_eq!(parse(Some(&c.name().to_uppercase())).unwrap(), c);
        }
    }

    #[test]
    fn an_unknown_value_is_an_error_naming_the_variable() {
        let e = parse(Some("infiniband")).unwrap_err().to_string();
        assert!(
            e.contains("MYRIAD_TRANSPORT") && e.contains("infiniband"),
            "{e}"
        );
    }
}
