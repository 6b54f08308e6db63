//! The CPU backend: memory accounting (bytes in use, peak, capacity) and
//! kernels launched on its buffers; and both traits together on threads: a
//! row-partitioned matmul whose partial results are all-gathered, and a
//! reduction-partitioned one whose partial sums are all-reduced, equal to the
//! unpartitioned product.

use runner::{
    run_ranks, Backend, BackendError, Collectives, Communicator, CpuBackend, LocalCommunicator,
    ReduceOp,
};
use tdl::{Attrs, Library};

#[test]
fn memory_is_counted_per_backend_with_peak_and_capacity() {
    let be = CpuBackend::new();
    let a = be.alloc(1000).unwrap();
    let b = be.upload(&[1.0; 500]).unwrap();
    assert_eq!(be.memory().in_use, 6000);
    assert_eq!(be.memory().buffers, 2);
    be.free(a);
    assert_eq!(be.memory().in_use, 2000);
    assert_eq!(be.memory().peak, 6000);
    drop(b);
    assert_eq!(be.memory().in_use, 0);
    be.reset_peak();
    assert_eq!(be.memory().peak, 0);

    let other = CpuBackend::new();
    let _c = other.alloc(10).unwrap();
    assert_eq!(be.memory().in_use, 0, "each backend is one rank's memory");

    let small = CpuBackend::with_capacity(4096);
    let x = small.alloc(1000).unwrap();
    let e = small.alloc(100).unwrap_err();
    assert_eq!(
        e,
        BackendError::OutOfMemory {
            requested: 400,
            in_use: 4000,
            capacity: 4096
        }
    );
    drop(x);
    assert!(small.alloc(1024).is_ok());
}

#[test]
fn kernels_launch_on_backend_buffers() {
    let lib = Library::shipped().unwrap();
    let be = CpuBackend::new();
    let k = be
        .prepare(lib.get("softmax").unwrap(), &[vec![2, 3]], &Attrs::new())
        .unwrap();
    assert_eq!(k.output_shapes(), &[vec![2, 3]]);
    let x = be.upload(&[1.0, 2.0, 3.0, 0.0, 0.0, 0.0]).unwrap();
    let mut y = be.alloc(6).unwrap();
    be.launch(&k, &[&x], &mut [&mut y]).unwrap();
    let mut host = [0.0; 6];
    be.download(&y, &mut host).unwrap();
    let s: f32 = host[..3].iter().sum();
    assert!(
        (s - 1.0).abs() < 1e-6 && (host[3] - 1.0 / 3.0).abs() < 1e-6,
        "{host:?}"
    );
    let mut short = be.alloc(5).unwrap();
    assert!(be.launch(&k, &[&x], &mut [&mut short]).is_err());
}

#[test]
fn partitioned_matmul_on_threads_equals_the_whole() {
    let lib = Library::shipped().unwrap();
    let spec = lib.get("matmul").unwrap();
    let (m, k, n) = (10, 12, 7);
    let a: Vec<f32> = (0..m * k).map(|i| ((i * 37) % 17) as f32 - 8.0).collect();
    let b: Vec<f32> = (0..k * n).map(|i| ((i * 11) % 13) as f32 - 6.0).collect();
    let whole = {
        let be = CpuBackend::new();
        let kern = be
            .prepare(spec, &[vec![m, k], vec![k, n]], &Attrs::new())
            .unwrap();
        let mut c = vec![0.0; m * n];
        kern.run(&[&a, &b], &mut [&mut c]).unwrap();
        c
    };
    for p in 1..=4 {
        // Rows of a split unevenly; results all-gathered with per-rank counts.
        let rows: Vec<usize> = (0..p).map(|r| m / p + usize::from(r < m % p)).collect();
        let counts: Vec<usize> = rows.iter().map(|r| r * n).collect();
        let out = run_ranks(LocalCommunicator::create(p), |mut comm| {
            let r = comm.rank().0;
            let be = CpuBackend::new();
            let lo: usize = rows[..r].iter().sum();
            let kern = be
                .prepare(spec, &[vec![rows[r], k], vec![k, n]], &Attrs::new())
                .unwrap();
            let x = be.upload(&a[lo * k..(lo + rows[r]) * k]).unwrap();
            let w = be.upload(&b).unwrap();
            let mut y = be.alloc(rows[r] * n).unwrap();
            be.launch(&kern, &[&x, &w], &mut [&mut y]).unwrap();
            let mut all = be.alloc(m * n).unwrap();
            comm.all_gather(y.as_slice(), all.as_mut_slice(), &counts)
                .unwrap();
            all.as_slice().to_vec()
        });
        for o in out {
            assert_eq!(o.unwrap(), whole, "row split, p={p}");
        }
        // The reduction dim split: partial products all-reduced.
        let ks: Vec<usize> = (0..p).map(|r| k / p + usize::from(r < k % p)).collect();
        let out = run_ranks(LocalCommunicator::create(p), |mut comm| {
            let r = comm.rank().0;
            let be = CpuBackend::new();
            let lo: usize = ks[..r].iter().sum();
            let kern = be
                .prepare(spec, &[vec![m, ks[r]], vec![ks[r], n]], &Attrs::new())
                .unwrap();
            let x: Vec<f32> = (0..m)
                .flat_map(|i| a[i * k + lo..i * k + lo + ks[r]].to_vec())
                .collect();
            let x = be.upload(&x).unwrap();
            let w = be.upload(&b[lo * n..(lo + ks[r]) * n]).unwrap();
            let mut y = be.alloc(m * n).unwrap();
            be.launch(&kern, &[&x, &w], &mut [&mut y]).unwrap();
            comm.all_reduce(y.as_mut_slice(), ReduceOp::Sum).unwrap();
            y.as_slice().to_vec()
        });
        for o in out {
            assert_eq!(
                o.unwrap(),
                whole,
                "reduction split, p={p} (integer data: exact)"
            );
        }
    }
}
