// Without a `scope`, an immediate operation uses `StaticScope` and its
// buffer must be `'static`: nothing would stop the buffer from being freed
// while the request, stashed away, is still pending.
use myriad::request::StaticScope;
use myriad::traits::*;

fn main() {
    myriad::run(2, |universe| {
        let world = universe.world();
        let buf = vec![1u64; 4];
        let request = world
            .process_at_rank(0)
            .immediate_send(StaticScope, &buf[..]);
        request.wait();
    })
    .unwrap();
}
