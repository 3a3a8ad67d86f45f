// A request cannot leave its `scope` closure: the scope checks, when it
// ends, that all its requests were completed.
use myriad::traits::*;

fn main() {
    myriad::run(2, |universe| {
        let world = universe.world();
        let buf = [1u64; 4];
        let request =
            myriad::request::scope(|scope| world.process_at_rank(0).immediate_send(scope, &buf));
        request.wait();
    })
    .unwrap();
}
