//! The small rsmpi 0.8.2 items `.ci/api_diff.py` found missing, each used as
//! a ported program would: `AsCommunicator`, `Communicator::target_size`
//! and `abort`, processes as communicators, `MpiError`, `is_finalized`,
//! `Universe::disconnect_parent`, the `_unchecked` Cartesian calls.

use myriad::topology::{Color, InterCommunicator, SimpleCommunicator};
use myriad::traits::*;
use myriad::Rank;

/// Generic code over rsmpi's point-to-point traits reaches the
/// communicator through `AsCommunicator`.
fn size_behind<S: Source>(source: &S) -> Rank {
    source.as_communicator().size()
}

fn rank_behind<D: Destination>(dest: &D) -> Rank {
    dest.as_communicator().rank()
}

#[test]
fn as_communicator_target_size_and_processes_as_communicators() {
    for n in [1, 2, 3, 4, 7] {
        myriad::run(n, |universe| {
            let world = universe.world();
            assert_eq!(size_behind(&world.any_process()), world.size());
            assert_eq!(rank_behind(&world.process_at_rank(0)), world.rank());
            assert_eq!(world.as_communicator().size(), world.size());
            assert_eq!(world.target_size(), world.size());
            // A process is a communicator, as in rsmpi.
            let p = world.process_at_rank(world.size() - 1);
            assert_eq!(
                (p.size(), Communicator::rank(&p)),
                (world.size(), world.rank())
            );
            p.barrier();
            if world.size() >= 2 {
                let left = world.rank() < 1;
                let local = world
                    .split_by_color(Color::with_value(left as i32))
                    .unwrap();
                let inter =
                    InterCommunicator::create(&local, 0, &world, if left { 1 } else { 0 }, 3);
                assert_eq!(inter.target_size(), inter.remote_size());
                assert_eq!(inter.as_communicator().remote_size(), inter.remote_size());
            }
        })
        .unwrap();
    }
}

#[test]
fn abort_ends_the_job_with_an_error_naming_the_code() {
    for n in [1, 3, 7] {
        let err = myriad::run(n, |universe| {
            let world = universe.world();
            if world.rank() == n as Rank - 1 {
                world.abort(17);
            }
            // The others wait for a message that never comes: abort must
            // end them, not leave them hanging.
            world.any_process().receive::<i32>();
        })
        .expect_err("abort fails the job")
        .to_string();
        assert!(
            err.contains(&format!(
                "rank {} of MPI_COMM_WORLD called abort with error code 17",
                n - 1
            )),
            "{err}"
        );
    }
}

#[test]
fn environment_items() {
    fn ported_main(mut universe: myriad::Universe) -> Result<(), myriad::MpiError> {
        assert!(myriad::is_initialized() && !myriad::is_finalized());
        assert!(myriad::initialize().is_none(), "initialised once per rank");
        universe.disconnect_parent();
        assert!(SimpleCommunicator::world().parent().is_none());
        Ok(())
    }
    myriad::run(2, |universe| ported_main(universe).unwrap()).unwrap();
    assert!(!myriad::is_initialized() && !myriad::is_finalized());
    let e = myriad::MpiError::Spawn(1, 4);
    assert_eq!(e.to_string(), "spawned 1 of 4 processes");
}

#[test]
fn unchecked_cartesian_calls_still_check() {
    let out = myriad::run(4, |universe| {
        let world = universe.world();
        let cart = world
            .create_cartesian_communicator(&[2, 2], &[true, false], false)
            .unwrap();
        let (mut dims, mut periods, mut coords) = ([0; 2], [false; 2], [0; 2]);
        // SAFETY: slices of num_dimensions entries, ranks and dimensions in range.
        unsafe {
            cart.get_layout_into_unchecked(&mut dims, &mut periods, &mut coords);
            let rank = cart.coordinates_to_rank_unchecked(&coords);
            let mut back = [0; 2];
            cart.rank_to_coordinates_into_unchecked(rank, &mut back);
            let shift = cart.shift_unchecked(0, 1);
            let sub = cart.subgroup_unchecked(&[true, false]);
            (dims, periods, rank, back == coords, shift, sub.size())
        }
    })
    .unwrap();
    assert_eq!(
        out[3],
        ([2, 2], [true, false], 3, true, (Some(1), Some(1)), 2)
    );
    // The unchecked forms keep the checks: bad input is an error, not UB.
    let err = myriad::run(4, |universe| {
        let world = universe.world();
        let cart = world
            .create_cartesian_communicator(&[2, 2], &[true, false], false)
            .unwrap();
        // SAFETY: violates rsmpi's contract on purpose; myriad checks.
        unsafe { cart.coordinates_to_rank_unchecked(&[0]) };
    })
    .expect_err("a coordinate list of the wrong length")
    .to_string();
    assert!(err.contains("coordinates_to_rank"), "{err}");
}
