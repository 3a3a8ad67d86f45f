//! Which address this process listens on for its peers.
//!
//! | first that applies | address |
//! |---|---|
//! | `MYRIAD_TCP_ADDRESS` | that IP address (an error if it is not one) |
//! | `MYRIAD_TCP_INTERFACE` | the interface's first IPv4 address (an error if it has none) |
//! | `MPIR_CVAR_CH3_INTERFACE_HOSTNAME` (Hydra sets it from `-hosts`/`-f`) | that, if it is an IP address (a host name is skipped) |
//! | an interface that is up and not loopback | its first IPv4 address |
//! | otherwise | `127.0.0.1` (one host only) |
//!
//! The interfaces come from `getifaddrs(3)`, in the kernel's order.

use std::ffi::CStr;
use std::net::{IpAddr, Ipv4Addr};

use crate::error::Error;

/// An IPv4 address of a network interface.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Interface {
    /// Its name (`eth0`).
    pub(crate) name: String,
    /// The address.
    pub(crate) addr: Ipv4Addr,
    /// Whether the interface is up.
    pub(crate) up: bool,
    /// Whether it is a loopback interface.
    pub(crate) loopback: bool,
}

/// The address to listen on, by the rules above; `var` reads the
/// environment, `interfaces` lists the machine's.
pub(crate) fn listen_ip(
    var: &dyn Fn(&str) -> Option<String>,
    interfaces: &dyn Fn() -> Vec<Interface>,
) -> Result<IpAddr, Error> {
    let set = |name: &str| var(name).filter(|v| !v.trim().is_empty());
    if let Some(v) = set("MYRIAD_TCP_ADDRESS") {
        return v.trim().parse().map_err(|_| {
            Error::config(format!(
                "MYRIAD_TCP_ADDRESS={v:?} is not an IP address (e.g. 10.0.0.5); to choose an \
                 interface by name, use MYRIAD_TCP_INTERFACE"
            ))
        });
    }
    let all = interfaces();
    if let Some(name) = set("MYRIAD_TCP_INTERFACE") {
        let name = name.trim();
        return all
            .iter()
            .find(|i| i.name == name)
            .map(|i| IpAddr::V4(i.addr))
            .ok_or_else(|| {
                let names: Vec<&str> = all.iter().map(|i| i.name.as_str()).collect();
                Error::config(format!(
                    "MYRIAD_TCP_INTERFACE={name:?} has no IPv4 address (interfaces with one: {})",
                    names.join(", ")
                ))
            });
    }
    if let Some(ip) =
        set("MPIR_CVAR_CH3_INTERFACE_HOSTNAME").and_then(|v| v.trim().parse::<IpAddr>().ok())
    {
        return Ok(ip);
    }
    Ok(all
        .iter()
        .find(|i| i.up && !i.loopback)
        .map_or(IpAddr::V4(Ipv4Addr::LOCALHOST), |i| IpAddr::V4(i.addr)))
}

/// The machine's IPv4 interface addresses (`getifaddrs`); empty if the
/// call fails.
pub(crate) fn interfaces() -> Vec<Interface> {
    let mut list = std::ptr::null_mut();
    // SAFETY: `getifaddrs` writes a pointer to a list it allocates into
    // `list`, which is valid for writes.
    if unsafe { libc::getifaddrs(&mut list) } != 0 {
        return Vec::new();
    }
    let mut found = Vec::new();
    let mut next = list;
    while !next.is_null() {
        // SAFETY: `next` is a node of the list `getifaddrs` returned, not
        // yet freed (it is freed below, after the loop).
        let ifa = unsafe { &*next };
        next = ifa.ifa_next;
        if ifa.ifa_addr.is_null() || ifa.ifa_name.is_null() {
            continue;
        }
        // SAFETY: `ifa_addr` is non-null and points to a socket address of
        // the family its `sa_family` says.
        let family = unsafe { (*ifa.ifa_addr).sa_family };
        if i32::from(family) != libc::AF_INET {
            continue;
        }
        // SAFETY: an `AF_INET` address is a `sockaddr_in`.
        let sin = unsafe { &*ifa.ifa_addr.cast::<libc::sockaddr_in>() };
        // SAFETY: `ifa_name` is a non-null NUL-terminated string of the list.
        let name = unsafe { CStr::from_ptr(ifa.ifa_name) };
        let flags = ifa.ifa_flags as libc::c_int;
        found.push(Interface {
            name: name.to_string_lossy().into_owned(),
            addr: Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr)),
            up: flags & libc::IFF_UP != 0,
            loopback: flags & libc::IFF_LOOPBACK != 0,
        });
    }
    // SAFETY: `list` came from `getifaddrs` and is freed once; no
    // reference into it outlives this point (names and addresses were
    // copied).
    unsafe { libc::freeifaddrs(list) };
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn machine() -> Vec<Interface> {
        let i = |name: &str, addr: [u8; 4], up, loopback| Interface {
            name: name.to_string(),
            addr: Ipv4Addr::from(addr),
            up,
            loopback,
        };
        vec![
            i("lo", [127, 0, 0, 1], true, true),
            i("eth9", [192, 168, 9, 9], false, false),
            i("eth0", [10, 99, 0, 2], true, false),
            i("eth1", [10, 1, 0, 2], true, false),
        ]
    }

    fn pick(vars: &[(&str, &str)], ifs: fn() -> Vec<Interface>) -> Result<IpAddr, Error> {
        let var = |n: &str| {
            vars.iter()
                .find(|(k, _)| *k == n)
                .map(|(_, v)| v.to_string())
        };
        listen_ip(&var, &ifs)
    }

    #[test]
    fn the_first_rule_that_applies_gives_the_address() {
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        assert_eq!(pick(&[], machine).unwrap(), ip("10.99.0.2"));
        assert_eq!(pick(&[], Vec::new).unwrap(), ip("127.0.0.1"));
        assert_eq!(
            pick(&[("MYRIAD_TCP_ADDRESS", "10.1.0.2")], machine).unwrap(),
            ip("10.1.0.2")
        );
        assert_eq!(
            pick(&[("MYRIAD_TCP_ADDRESS", "::1")], machine).unwrap(),
            ip("::1")
        );
        assert_eq!(
            pick(&[("MYRIAD_TCP_INTERFACE", "eth1")], machine).unwrap(),
            ip("10.1.0.2")
        );
        assert_eq!(
            pick(&[("MPIR_CVAR_CH3_INTERFACE_HOSTNAME", "10.1.0.2")], machine).unwrap(),
            ip("10.1.0.2")
        );
        // A host name is not an address: the interfaces decide.
        assert_eq!(
            pick(&[("MPIR_CVAR_CH3_INTERFACE_HOSTNAME", "hostA")], machine).unwrap(),
            ip("10.99.0.2")
        );
        // The override wins over Hydra's variable.
        assert_eq!(
            pick(
                &[
                    ("MPIR_CVAR_CH3_INTERFACE_HOSTNAME", "10.1.0.2"),
                    ("MYRIAD_TCP_ADDRESS", "127.0.0.1")
                ],
                machine
            )
            .unwrap(),
            ip("127.0.0.1")
        );
    }

    #[test]
    fn bad_overrides_are_errors_naming_them() {
        let err = pick(&[("MYRIAD_TCP_ADDRESS", "hostA")], machine)
            .unwrap_err()
            .to_string();
        assert!(err.contains("MYRIAD_TCP_ADDRESS=\"hostA\""), "{err}");
        let err = pick(&[("MYRIAD_TCP_INTERFACE", "wlan0")], machine)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("MYRIAD_TCP_INTERFACE=\"wlan0\"") && err.contains("eth0"),
            "{err}"
        );
    }

    #[test]
    fn this_machine_has_a_loopback_interface() {
        let all = interfaces();
        assert!(
            all.iter()
                .any(|i| i.loopback && i.addr == Ipv4Addr::LOCALHOST),
            "{all:?}"
        );
    }
}
