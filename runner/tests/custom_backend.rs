//! A backend is a new room, not an edit of the executor: a backend defined
//! here (the CPU backend wrapped to count every call) runs a planned tiny
//! MLP through [`run_programs_on`] and gives exactly what the CPU runner
//! gives, with every kind of backend call made.

mod partition;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use comm::ReduceOp;
use interval::cache::StrategyCache;
use partition::{lib, SEED};
use planner::graph::Optimizer;
use planner::plan::{PlanOptions, SearchKind};
use planner::zoo::{self, MlpConfig};
use runner::backend::Bounds;
use runner::{
    run_programs, run_programs_on, Backend, BackendError, CpuBackend, CpuBuffer, LocalCommunicator,
    MemoryStats, OpKernel, RunOptions, Window,
};
use tdl::{Attrs, OpSpec};

/// Calls per method: alloc, upload, download, workspace, copy, launch, prepare.
#[derive(Default)]
struct Calls([AtomicUsize; 7]);

struct Counting {
    inner: CpuBackend,
    calls: Arc<Calls>,
}

impl Counting {
    fn hit(&self, i: usize) {
        self.calls.0[i].fetch_add(1, Ordering::SeqCst);
    }
}

impl Backend for Counting {
    type Buffer = CpuBuffer;
    type Kernel = OpKernel;

    fn name(&self) -> &'static str {
        "counting"
    }
    fn alloc(&self, elems: usize) -> Result<CpuBuffer, BackendError> {
        self.hit(0);
        self.inner.alloc(elems)
    }
    fn upload(&self, host: &[f32]) -> Result<CpuBuffer, BackendError> {
        self.hit(1);
        self.inner.upload(host)
    }
    fn download(&self, buf: &CpuBuffer, host: &mut [f32]) -> Result<(), BackendError> {
        self.hit(2);
        self.inner.download(buf, host)
    }
    fn alloc_workspace(&self, elems: usize) -> Result<CpuBuffer, BackendError> {
        self.hit(3);
        self.inner.alloc_workspace(elems)
    }
    fn copy_region(
        &self,
        src: &CpuBuffer,
        src_r: &Bounds,
        dst: &mut CpuBuffer,
        dst_r: &Bounds,
        region: &Bounds,
        op: Option<ReduceOp>,
    ) -> Result<(), BackendError> {
        self.hit(4);
        self.inner.copy_region(src, src_r, dst, dst_r, region, op)
    }
    fn free(&self, buf: CpuBuffer) {
        self.inner.free(buf)
    }
    fn buffer_len(&self, buf: &CpuBuffer) -> usize {
        self.inner.buffer_len(buf)
    }
    fn memory(&self) -> MemoryStats {
        self.inner.memory()
    }
    fn reset_peak(&self) {
        self.inner.reset_peak()
    }
    fn prepare(
        &self,
        spec: &OpSpec,
        input_shapes: &[Vec<usize>],
        attrs: &Attrs,
    ) -> Result<OpKernel, BackendError> {
        self.hit(6);
        self.inner.prepare(spec, input_shapes, attrs)
    }
    fn prepare_window(
        &self,
        spec: &OpSpec,
        input_shapes: &[Vec<usize>],
        attrs: &Attrs,
        window: &Window,
    ) -> Result<OpKernel, BackendError> {
        self.hit(6);
        self.inner.prepare_window(spec, input_shapes, attrs, window)
    }
    fn launch(
        &self,
        kernel: &OpKernel,
        inputs: &[&CpuBuffer],
        outputs: &mut [&mut CpuBuffer],
    ) -> Result<(), BackendError> {
        self.hit(5);
        self.inner.launch(kernel, inputs, outputs)
    }
}

#[test]
fn a_backend_defined_in_a_test_runs_a_plan_through_the_generic_executor() {
    let g = zoo::Model::Mlp(MlpConfig::tiny())
        .training(lib(), &Optimizer::default())
        .unwrap();
    let cache = StrategyCache::new();
    let progs = partition::compiled(
        &g,
        &cache,
        4,
        SearchKind::CriticalDp,
        PlanOptions::default(),
    );
    let opts = RunOptions {
        steps: 2,
        seed: SEED,
    };
    let calls = Arc::new(Calls::default());
    let ranks = LocalCommunicator::create(4)
        .into_iter()
        .map(|c| {
            let b = Counting {
                inner: CpuBackend::new(),
                calls: calls.clone(),
            };
            (b, c)
        })
        .collect();
    let custom = run_programs_on(&progs.programs, opts, None, ranks).unwrap();
    let cpu = run_programs(&progs.programs, opts, None).unwrap();
    assert_eq!(custom.outputs, cpu.outputs);
    assert_eq!(custom.bytes_sent, cpu.bytes_sent);
    let n: Vec<usize> = calls.0.iter().map(|c| c.load(Ordering::SeqCst)).collect();
    // Every kind of call happened: uploads of fills, downloads of kept
    // tiles, exchange staging, region copies, kernel launches, preparation.
    for (i, what) in [
        (1, "upload"),
        (2, "download"),
        (3, "workspace"),
        (4, "copy_region"),
        (5, "launch"),
        (6, "prepare"),
    ] {
        assert!(n[i] > 0, "no {what} call: {n:?}");
    }
}
