// The same for an immediate collective: the broadcast writes into `buf`
// until it completes.
use myriad::traits::*;

fn main() {
    myriad::run(2, |universe| {
        let world = universe.world();
        let mut buf = [0u64; 4];
        myriad::request::scope(|scope| {
            let request = world
                .process_at_rank(0)
                .immediate_broadcast_into(scope, &mut buf);
            let first = &mut buf[0];
            *first = 1;
            request.wait();
        });
    })
    .unwrap();
}
