//! `MYRIAD_TRANSPORT=ofi` (issue 15): without the `ofi` feature a clear
//! error naming it; with it, jobs of several processes (the built-in
//! launcher, `MYRIAD_PROCESSES`) over libfabric (`FI_PROVIDER=tcp` unless
//! the environment names another): order per pair, `ANY_SOURCE` across
//! processes, a 16 MiB message, no provider, a peer that exits while
//! another waits for its data, and the launcher's rxm passthru (set
//! unless the user chose).
//!
//! The whole multi-process suite (`tests/processes.rs`) also runs over
//! libfabric with `MYRIAD_TRANSPORT=ofi cargo test --features myriad/ofi`
//! (its `tcp::` cases then join their processes through ofi).

mod common;

use std::time::Duration;

/// What this run of the test binary is (see `tests/launch.rs`).
enum Role {
    Parent,
    Launcher,
    Child,
}

fn role(test: &str) -> Role {
    if std::env::var("MYRIAD_TEST_LAUNCH").as_deref() != Ok(test) {
        return Role::Parent;
    }
    match std::env::var("PMI_RANK") {
        Ok(_) => Role::Child,
        Err(_) => Role::Launcher,
    }
}

/// Runs `test` of this binary as the built-in launcher of `processes`
/// processes with `MYRIAD_TRANSPORT=ofi` and `envs`: the launcher's exit
/// status, standard output and error. Killed (and the test failed) after
/// two minutes.
fn launch(
    test: &str,
    processes: u32,
    envs: &[(&str, &str)],
) -> (std::process::ExitStatus, String, String) {
    let provider = std::env::var("FI_PROVIDER").unwrap_or_else(|_| "tcp".into());
    let provider = [
        ("MYRIAD_TRANSPORT", "ofi"),
        ("FI_PROVIDER", provider.as_str()),
    ];
    let envs: Vec<(&str, &str)> = provider.iter().chain(envs).copied().collect();
    common::launched::launch(test, processes, &envs, &[], Duration::from_secs(120))
}

fn be_the_launcher() -> ! {
    let _ = myriad::run(2, |_| ());
    unreachable!("the built-in launcher exits the process");
}

#[cfg(not(feature = "ofi"))]
#[test]
fn ofi_without_the_feature_is_an_error_naming_it() {
    const TEST: &str = "ofi_without_the_feature_is_an_error_naming_it";
    match role(TEST) {
        Role::Parent => {}
        Role::Launcher => be_the_launcher(),
        Role::Child => {
            let e = myriad::run(2, |_| ()).unwrap_err().to_string();
            assert!(
                e.contains("MYRIAD_TRANSPORT=ofi") && e.contains("`ofi` cargo feature"),
                "{e}"
            );
            return;
        }
    }
    let (_, stdout, stderr) = launch(TEST, 2, &[]);
    assert_eq!(stdout.matches("1 passed").count(), 2, "{stdout}\n{stderr}");
}

#[cfg(feature = "ofi")]
mod with_the_feature {
    use super::*;
    use myriad::traits::*;

    /// The children's tests passed and the launch succeeded.
    fn assert_passed(test: &str, processes: u32, envs: &[(&str, &str)]) {
        let (status, stdout, stderr) = launch(test, processes, envs);
        assert!(status.success(), "{status:?}\n{stdout}\n{stderr}");
        assert_eq!(
            stdout.matches("1 passed").count(),
            processes as usize,
            "{stdout}\n{stderr}"
        );
    }

    /// 2 processes × 2 ranks: each rank of process 0 sends 200 numbered
    /// messages to each rank of process 1 (some larger than a libfabric
    /// message); each pair's arrive in order.
    #[test]
    fn messages_of_one_pair_arrive_in_order_across_processes() {
        const TEST: &str =
            "with_the_feature::messages_of_one_pair_arrive_in_order_across_processes";
        match role(TEST) {
            Role::Parent => {}
            Role::Launcher => be_the_launcher(),
            Role::Child => {
                let out = myriad::run(4, |u| {
                    let world = u.world();
                    let rank = world.rank();
                    if rank < 2 {
                        for i in 0..200u64 {
                            for t in [2, 3] {
                                let n = if i % 40 == 0 { 20_000 } else { 1 };
                                world.process_at_rank(t).send(&vec![i; n][..]);
                            }
                        }
                    } else {
                        for f in [0, 1] {
                            for i in 0..200u64 {
                                let (v, _) = world.process_at_rank(f).receive_vec::<u64>();
                                assert!(v.iter().all(|&x| x == i), "from {f}: {} for {i}", v[0]);
                            }
                        }
                    }
                    rank
                })
                .unwrap();
                assert_eq!(out.len(), 2);
                return;
            }
        }
        assert_passed(TEST, 2, &[]);
    }

    /// Rank 0 receives from any source: every other rank's message, local
    /// and remote alike.
    #[test]
    fn any_source_spans_processes() {
        const TEST: &str = "with_the_feature::any_source_spans_processes";
        match role(TEST) {
            Role::Parent => {}
            Role::Launcher => be_the_launcher(),
            Role::Child => {
                myriad::run(6, |u| {
                    let world = u.world();
                    if world.rank() == 0 {
                        let mut sources: Vec<i32> = (1..6)
                            .map(|_| {
                                let (v, status) = world.any_process().receive::<i32>();
                                assert_eq!(v, status.source_rank() * 10);
                                status.source_rank()
                            })
                            .collect();
                        sources.sort();
                        assert_eq!(sources, [1, 2, 3, 4, 5]);
                    } else {
                        world.process_at_rank(0).send(&(world.rank() * 10));
                    }
                })
                .unwrap();
                return;
            }
        }
        assert_passed(TEST, 2, &[]);
    }

    /// 16 MiB from the last rank (process 1) to rank 0 and back.
    #[test]
    fn a_16_mib_message_crosses_whole() {
        const TEST: &str = "with_the_feature::a_16_mib_message_crosses_whole";
        match role(TEST) {
            Role::Parent => {}
            Role::Launcher => be_the_launcher(),
            Role::Child => {
                myriad::run(2, |u| {
                    let world = u.world();
                    let n = 16 << 20;
                    let data: Vec<u8> = (0..n).map(|i| (i * 7 % 251) as u8).collect();
                    if world.rank() == 1 {
                        world.process_at_rank(0).send(&data[..]);
                        let (back, _) = world.process_at_rank(0).receive_vec::<u8>();
                        assert!(back == data, "the echo differs");
                    } else {
                        let mut buf = vec![0u8; n];
                        world.process_at_rank(1).receive_into(&mut buf[..]);
                        assert!(buf == data, "the message differs");
                        world.process_at_rank(1).send(&buf[..]);
                    }
                })
                .unwrap();
                return;
            }
        }
        assert_passed(TEST, 2, &[]);
    }

    /// The built-in launcher gives its children rxm's passthru to the
    /// `tcp` provider (`FI_OFI_RXM_ENABLE_PASSTHRU=1`) unless the user set
    /// the variable; either way small and 16 MiB messages cross (the
    /// 16 MiB by `fi_read`).
    #[test]
    fn the_launcher_sets_rxm_passthru_unless_the_user_did() {
        const TEST: &str = "with_the_feature::the_launcher_sets_rxm_passthru_unless_the_user_did";
        const PASSTHRU: &str = "FI_OFI_RXM_ENABLE_PASSTHRU";
        match role(TEST) {
            Role::Parent => {}
            Role::Launcher => be_the_launcher(),
            Role::Child => {
                let want = std::env::var("MYRIAD_TEST_PASSTHRU").unwrap();
                assert_eq!(std::env::var(PASSTHRU).unwrap(), want);
                myriad::run(2, |u| {
                    let world = u.world();
                    let data: Vec<u8> = (0..16 << 20).map(|i| (i % 253) as u8).collect();
                    let other = world.process_at_rank(1 - world.rank());
                    if world.rank() == 0 {
                        other.send(&7u32);
                        other.send(&data[..]);
                    } else {
                        assert_eq!(other.receive::<u32>().0, 7);
                        let (v, _) = other.receive_vec::<u8>();
                        assert!(v == data, "the message differs");
                    }
                })
                .unwrap();
                return;
            }
        }
        let (status, stdout, stderr) = common::launched::launch(
            TEST,
            2,
            &[
                ("MYRIAD_TRANSPORT", "ofi"),
                ("FI_PROVIDER", "tcp"),
                ("MYRIAD_TEST_PASSTHRU", "1"),
            ],
            &[PASSTHRU],
            Duration::from_secs(120),
        );
        assert!(status.success(), "{status:?}\n{stdout}\n{stderr}");
        assert_eq!(stdout.matches("1 passed").count(), 2, "{stdout}\n{stderr}");
        assert_passed(TEST, 2, &[(PASSTHRU, "0"), ("MYRIAD_TEST_PASSTHRU", "0")]);
    }

    /// `auto` where a fabric is up (forced: the tcp provider counted as
    /// one, `MYRIAD_TEST_OFI_AS_FABRIC`): the processes of this host talk
    /// through shared memory, not libfabric, and a large message crosses.
    #[test]
    fn auto_with_a_fabric_keeps_shared_memory_on_one_host() {
        const TEST: &str = "with_the_feature::auto_with_a_fabric_keeps_shared_memory_on_one_host";
        match role(TEST) {
            Role::Parent => {}
            Role::Launcher => be_the_launcher(),
            Role::Child => {
                myriad::run(2, |u| {
                    let world = u.world();
                    let data: Vec<u32> = (0..(1 << 20)).collect();
                    if world.rank() == 0 {
                        world.process_at_rank(1).send(&data[..]);
                    } else {
                        let (v, _) = world.process_at_rank(0).receive_vec::<u32>();
                        assert!(v == data, "the message differs");
                    }
                })
                .unwrap();
                return;
            }
        }
        let envs = [
            ("MYRIAD_TRANSPORT", "auto"),
            ("MYRIAD_TEST_OFI_AS_FABRIC", "1"),
            ("MYRIAD_REPORT_BINDINGS", "1"),
        ];
        let (status, stdout, stderr) = launch(TEST, 2, &envs);
        assert!(status.success(), "{status:?}\n{stdout}\n{stderr}");
        assert_eq!(stdout.matches("1 passed").count(), 2, "{stdout}\n{stderr}");
        for (p, other) in [(0, 1), (1, 0)] {
            let line = format!("process {p} (host");
            let report = stderr
                .lines()
                .find(|l| l.contains(&line) && l.contains("transport:"))
                .unwrap_or_else(|| panic!("no report of process {p}: {stderr}"));
            assert!(
                report.contains(&format!("shared memory with processes {other}"))
                    && report.contains("libfabric with none"),
                "{report}"
            );
        }
    }

    /// No provider: every process fails with an error naming
    /// `FI_PROVIDER` and `fi_info`.
    #[test]
    fn no_provider_is_an_error_naming_fi_provider_and_fi_info() {
        const TEST: &str =
            "with_the_feature::no_provider_is_an_error_naming_fi_provider_and_fi_info";
        match role(TEST) {
            Role::Parent => {}
            Role::Launcher => be_the_launcher(),
            Role::Child => {
                let e = myriad::run(2, |_| ()).unwrap_err().to_string();
                assert!(
                    e.contains("FI_PROVIDER=\"nonexistent\"") && e.contains("fi_info"),
                    "{e}"
                );
                return;
            }
        }
        let (_, stdout, stderr) = launch(TEST, 2, &[("FI_PROVIDER", "nonexistent")]);
        assert_eq!(stdout.matches("1 passed").count(), 2, "{stdout}\n{stderr}");
    }

    /// Process 1 exits (no goodbye) while rank 0 waits for its 16 MiB:
    /// the launch fails naming process 1, and nothing hangs.
    #[test]
    fn a_peer_exiting_mid_job_fails_the_waiting_ranks() {
        const TEST: &str = "with_the_feature::a_peer_exiting_mid_job_fails_the_waiting_ranks";
        match role(TEST) {
            Role::Parent => {}
            Role::Launcher => be_the_launcher(),
            Role::Child => {
                let result = myriad::run(2, |u| {
                    let world = u.world();
                    if world.rank() == 1 {
                        world.process_at_rank(0).send(&1u8);
                        let (_, _) = world.process_at_rank(0).receive::<u8>();
                        // SAFETY: ends the process at once, as a crash would.
                        unsafe { libc::_exit(9) };
                    }
                    let _ = world.process_at_rank(1).receive::<u8>();
                    world.process_at_rank(1).send(&2u8);
                    let mut buf = vec![0u8; 16 << 20];
                    world.process_at_rank(1).receive_into(&mut buf[..]);
                });
                let e = result.unwrap_err().to_string();
                // One write: the launcher's own line may come at the same
                // time on the shared standard error (`eprintln!` writes
                // piece by piece).
                let line = format!("process 0: {e}\n");
                let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
                std::process::exit(1);
            }
        }
        let (status, stdout, stderr) = launch(TEST, 2, &[]);
        assert!(!status.success(), "{stdout}\n{stderr}");
        // Process 0 sees the loss at once (its control stream ends), well
        // within the launcher's grace before it kills the others.
        assert!(
            stderr.contains("process 0: process 1 of the job") && stderr.contains("was lost"),
            "{stdout}\n{stderr}"
        );
    }
}
