// Why scopes exist: a request can be leaked with `mem::forget`, so its
// destructor is no guarantee. A `LocalScope` aborts at its end if a request
// is still registered, and the buffer must outlive the whole scope: a buffer
// that dies inside it would be written by the peer after it is gone.
use myriad::traits::*;

fn main() {
    myriad::run(2, |universe| {
        let world = universe.world();
        myriad::request::scope(|scope| {
            {
                let mut buf = [0u64; 4];
                let request = world
                    .process_at_rank(0)
                    .immediate_receive_into(scope, &mut buf);
                std::mem::forget(request);
            }
            // The receive is still pending here, into a frame that is gone.
            world.barrier();
        });
    })
    .unwrap();
}
