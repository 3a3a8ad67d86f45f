// A request of a `LocalScope` cannot be stored somewhere that outlives the
// scope.
use myriad::request::Request;
use myriad::traits::*;

fn main() {
    myriad::run(2, |universe| {
        let world = universe.world();
        let buf = [1u64; 4];
        let mut stash: Vec<Request<'_, [u64; 4], _>> = Vec::new();
        myriad::request::scope(|scope| {
            stash.push(world.process_at_rank(0).immediate_send(scope, &buf));
        });
        for request in stash {
            request.wait();
        }
    })
    .unwrap();
}
