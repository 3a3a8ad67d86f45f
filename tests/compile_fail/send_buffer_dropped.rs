// A send's buffer cannot be dropped while the request lives: the peer may
// still be copying out of it.
use myriad::traits::*;

fn main() {
    myriad::run(2, |universe| {
        let world = universe.world();
        let mut buf = Some(vec![1u64; 4]);
        myriad::request::scope(|scope| {
            let data = buf.as_deref().unwrap();
            let request = world.process_at_rank(0).immediate_send(scope, data);
            buf = None; // drops the vector
            request.wait();
        });
    })
    .unwrap();
}
