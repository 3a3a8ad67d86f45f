// A collection only takes requests whose buffers live as long as it does:
// a request of an inner `scope` on a buffer that dies inside the
// `multiple_scope` closure would leave the collection (which completes it
// later, or settles it when dropped) pointing at a dead buffer.
use myriad::traits::*;

fn main() {
    myriad::run(2, |universe| {
        let world = universe.world();
        let mut done = Vec::new();
        myriad::request::multiple_scope(1, |_, coll| {
            let buf = [1u64; 4];
            myriad::request::scope(|inner| {
                coll.add(world.process_at_rank(0).immediate_send(inner, &buf));
            });
            coll.wait_all(&mut done);
        });
    })
    .unwrap();
}
