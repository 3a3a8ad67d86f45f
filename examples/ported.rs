//! An rsmpi program ported to myriad: rank 0 sends a number to every other
//! rank (immediate sends completed together in a request collection), and
//! each prints what it received.
//!
//! ```text
//! MYRIAD_RANKS=3 cargo run --example ported              # like mpiexec -n 3
//! cargo run --example ported -- --ranks 3 --number 7
//! ```
//!
//! The port is two changes to the rsmpi program: the dependency
//! (`mpi = { package = "myriad" }` in `Cargo.toml`; here, inside myriad, the
//! `use myriad as mpi;` below stands in for it) and `#[mpi::main]` on `main`,
//! whose body then runs once per rank. Everything else is rsmpi code. `main`
//! may return a `Result`: an invalid `--number` makes every rank return
//! `Err`, which fails the job with exit status 1.

use myriad as mpi;

use mpi::traits::*;

/// The value of `--number N` (default 42).
fn number() -> Result<u64, std::num::ParseIntError> {
    let args: Vec<String> = std::env::args().collect();
    match args.iter().position(|a| a == "--number") {
        Some(i) => args.get(i + 1).map_or("", String::as_str).parse(),
        None => Ok(42),
    }
}

#[mpi::main]
fn main() -> Result<(), std::num::ParseIntError> {
    let number = number()?;
    let universe = mpi::initialize().unwrap();
    let world = universe.world();
    let (rank, size) = (world.rank(), world.size());
    if rank == 0 {
        // Immediate sends to every other rank, completed together.
        mpi::request::multiple_scope(size as usize, |scope, coll| {
            for other in 1..size {
                coll.add(world.process_at_rank(other).immediate_send(scope, &number));
            }
            let mut sent = Vec::new();
            coll.wait_all(&mut sent);
        });
        println!("rank 0 sent {number} to {} ranks", size - 1);
    } else {
        let (received, status) = world.process_at_rank(0).receive::<u64>();
        println!(
            "rank {rank} received {received} from rank {}",
            status.source_rank()
        );
    }
    Ok(())
}
