// A `WaitGuard` waits when it is dropped, so it cannot outlive its buffer:
// here the buffer is declared after the guard and would be dropped first.
use myriad::request::WaitGuard;
use myriad::traits::*;

fn main() {
    myriad::run(2, |universe| {
        let world = universe.world();
        myriad::request::scope(|scope| {
            let _guard: WaitGuard<'_, [u64; 4], _>;
            let buf = [1u64; 4];
            _guard = WaitGuard::from(world.process_at_rank(0).immediate_send(scope, &buf));
        });
    })
    .unwrap();
}
