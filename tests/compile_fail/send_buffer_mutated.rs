// A send's buffer cannot be written while the request lives: the peer may
// be copying out of it.
use myriad::traits::*;

fn main() {
    myriad::run(2, |universe| {
        let world = universe.world();
        let mut buf = vec![1u64; 4];
        myriad::request::scope(|scope| {
            let request = world.process_at_rank(0).immediate_send(scope, &buf[..]);
            buf[0] = 2;
            request.wait();
        });
    })
    .unwrap();
}
