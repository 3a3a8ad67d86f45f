//! Feature `complex`: `num_complex::Complex<f32>` and `Complex<f64>` are
//! `Equivalence` types (rsmpi's feature), with complex sum and product in
//! reductions and clear errors for what MPI does not define on them.

use myriad::collective::SystemOperation;
use myriad::traits::*;
use num_complex::Complex;

#[test]
fn complex_values_travel_and_reduce_as_complex_numbers() {
    for ranks in [1usize, 2, 3, 4, 7, 64] {
        let out = myriad::run(ranks, |universe| {
            let world = universe.world();
            let (me, n) = (world.rank(), world.size());
            // Point to point around the ring.
            let z = Complex::new(me as f64, -(me as f64));
            let next = world.process_at_rank((me + 1) % n);
            let prev = world.process_at_rank((me + n - 1) % n);
            let got = myriad::request::scope(|sc| {
                let send = next.immediate_send(sc, &z);
                let (got, _) = prev.receive::<Complex<f64>>();
                send.wait();
                got
            });
            assert_eq!(
                got,
                Complex::new(((me + n - 1) % n) as f64, -(((me + n - 1) % n) as f64))
            );
            // Sum: component-wise. Product of i on every rank: i^n, which
            // a component-wise product (0 * 0 = 0 real part, 1 imaginary)
            // would get wrong.
            let mut sum = Complex::new(0f32, 0f32);
            world.all_reduce_into(
                &Complex::new(1f32, me as f32),
                &mut sum,
                SystemOperation::sum(),
            );
            let mut product = Complex::new(0f64, 0f64);
            world.all_reduce_into(
                &Complex::new(0f64, 1f64),
                &mut product,
                SystemOperation::product(),
            );
            (sum, product)
        })
        .unwrap();
        let n = ranks as f32;
        let i_to_the_n = [
            Complex::new(1.0, 0.0),
            Complex::new(0.0, 1.0),
            Complex::new(-1.0, 0.0),
            Complex::new(0.0, -1.0),
        ][ranks % 4];
        for (sum, product) in out {
            assert_eq!(sum, Complex::new(n, n * (n - 1.0) / 2.0), "{ranks} ranks");
            assert_eq!(product, i_to_the_n, "{ranks} ranks");
        }
    }
}

#[test]
fn complex_bad_input_fails_clearly() {
    // MPI defines no order on complex numbers.
    let err = myriad::run(2, |universe| {
        let mut max = Complex::new(0f64, 0f64);
        universe.world().all_reduce_into(
            &Complex::new(1f64, 2f64),
            &mut max,
            SystemOperation::max(),
        );
    })
    .unwrap_err()
    .to_string();
    assert!(err.contains("Complex<f64>"), "{err}");
    assert!(err.contains("MPI_MAX is not defined"), "{err}");

    // A complex number is not two floats: the type signatures differ.
    let err = myriad::run(2, |universe| {
        let world = universe.world();
        let peer = world.process_at_rank(1 - world.rank());
        if world.rank() == 0 {
            peer.send(&Complex::new(1f32, 2f32));
        } else {
            let _ = peer.receive::<[f32; 2]>();
        }
    })
    .unwrap_err()
    .to_string();
    assert!(err.contains("Complex<f32>") && err.contains("f32"), "{err}");
}
