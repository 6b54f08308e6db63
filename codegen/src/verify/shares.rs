//! Shares: every compute names an operator of the graph with its spec,
//! attributes and input shapes; its index box is the rank's share of the op
//! under the plan; its input buffers hold the regions the share reads (a
//! windowed kernel: exactly them; a local kernel: at least them) and its
//! output buffers exactly the boxes it writes. Its data flow is checked
//! with it (each input's reads after that input's check, as one pass).

use crate::program::{BufId, Instr, KernelMode};

use super::Walk;

impl Walk<'_, '_> {
    /// A compute instruction `ins` (anything else passes): its op, its
    /// share and its buffers as the module doc says, then its data flow.
    pub(super) fn compute(&mut self, ins: &Instr) -> Result<(), String> {
        let Instr::Compute {
            op,
            spec,
            attrs,
            shapes,
            var_box,
            inputs,
            outputs,
            mode,
        } = ins
        else {
            return Ok(());
        };
        let (graph, p) = (self.graph(), self.p);
        if op.index() >= graph.ops().len() {
            return Err(format!("compute of op {} of {}", op.0, graph.ops().len()));
        }
        let o = graph.op(*op);
        let spec_name = p.specs.get(*spec as usize).map(|s| s.name.as_str());
        if spec_name != Some(o.spec.as_str())
            || *attrs != o.attrs
            || *shapes != graph.input_shapes(o)
        {
            return Err(format!(
                "compute of `{}` carries spec {spec_name:?}, attributes {attrs:?} and input shapes {shapes:?}; the graph has `{}`, {:?}, {:?}",
                o.name,
                o.spec,
                o.attrs,
                graph.input_shapes(o)
            ));
        }
        let want = self.cm.op_box(*op, &self.d.ops[op.index()], &self.dig);
        if *var_box != want {
            return Err(format!(
                "compute of `{}` over {var_box:?}, but this rank's share is {want:?}",
                o.name
            ));
        }
        if inputs.len() != o.inputs.len() || outputs.len() != o.outputs.len() {
            return Err(format!(
                "compute of `{}` with the wrong number of buffers",
                o.name
            ));
        }
        for (slot, &b) in inputs.iter().enumerate() {
            self.compute_input(*op, slot, b, var_box, *mode)?;
        }
        for (slot, &b) in outputs.iter().enumerate() {
            let buf = &p.buffers[b as usize];
            let (region, _) = self.cm.model().op(*op).access.output_region(slot, var_box);
            if buf.tensor != o.outputs[slot] || buf.region != region {
                return Err(format!(
                    "compute of `{}`: output {slot} buffer holds {:?}, the share writes {:?}",
                    o.name, buf.region.0, region.0
                ));
            }
            self.flow.computed(b);
        }
        Ok(())
    }

    /// Input `slot` of a compute of `op` over `var_box` in `mode`: buffer `b`
    /// holds the input's tensor and the region the share reads; then its
    /// data flow (a local kernel reads its whole buffer, which may be a tile
    /// holding more than the share needs).
    fn compute_input(
        &mut self,
        op: planner::graph::OpId,
        slot: usize,
        b: BufId,
        var_box: &[(i64, i64)],
        mode: KernelMode,
    ) -> Result<(), String> {
        let o = self.graph().op(op);
        let buf = &self.p.buffers[b as usize];
        let need = self.cm.model().op(op).access.input_region(slot, var_box);
        let fits = match mode {
            KernelMode::Window => buf.region == need,
            KernelMode::Local => need.intersect(&buf.region) == need,
        };
        if buf.tensor != o.inputs[slot] || !fits {
            return Err(format!(
                "compute of `{}`: input {slot} buffer holds `{}` {:?}, the share reads {:?}",
                o.name,
                self.name(b),
                buf.region.0,
                need.0
            ));
        }
        let read = match mode {
            KernelMode::Window => &need,
            KernelMode::Local => &buf.region,
        };
        self.flow
            .read(self.p, b, read)
            .map_err(|e| format!("compute of `{}`: {e}", o.name))
    }
}
