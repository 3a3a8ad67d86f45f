// A receive's buffer cannot be used, written or read, while the receive is
// pending: the peer writes into it.
use myriad::traits::*;

fn main() {
    myriad::run(2, |universe| {
        let world = universe.world();
        let mut buf = [0u64; 4];
        myriad::request::scope(|scope| {
            let request = world
                .process_at_rank(0)
                .immediate_receive_into(scope, &mut buf);
            buf[0] += 1;
            request.wait();
        });
    })
    .unwrap();
}
