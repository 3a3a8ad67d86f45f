// A receive buffer added to a collection stays borrowed until the
// collection hands it out: reading it before the wait would race the
// sender's write.
use myriad::traits::*;

fn main() {
    myriad::run(2, |universe| {
        let world = universe.world();
        let mut buf = [0u64; 4];
        myriad::request::multiple_scope(1, |scope, coll| {
            coll.add(world.process_at_rank(0).immediate_receive_into(scope, &mut buf));
            println!("{}", buf[0]);
            let mut done = Vec::new();
            coll.wait_all(&mut done);
        });
    })
    .unwrap();
}
