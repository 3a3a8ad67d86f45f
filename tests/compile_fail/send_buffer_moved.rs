// A send's buffer cannot be moved while the request lives: its new owner
// could free or grow it while the peer is still copying out of it.
use myriad::traits::*;

fn main() {
    myriad::run(2, |universe| {
        let world = universe.world();
        let mut buf = Some(vec![1u64; 4]);
        myriad::request::scope(|scope| {
            let data = buf.as_deref().unwrap();
            let request = world.process_at_rank(0).immediate_send(scope, data);
            let mut moved = buf.take().unwrap();
            moved.push(5);
            request.wait();
        });
    })
    .unwrap();
}
