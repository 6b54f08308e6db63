//! A Graphviz picture of the coarsened graph, coloured by the first level's
//! decision (`tofu plan --dot`).
//!
//! Takes a [`CoarseGraph`]; gives DOT text: one node per cluster, labelled
//! with its name, member counts and decision; nodes with the same decision
//! share a colour; a legend lists the decisions.

use std::collections::BTreeMap;
use std::fmt::Write;

use super::coarse::CoarseGraph;

const PALETTE: [&str; 10] = [
    "#8dd3c7", "#ffffb3", "#bebada", "#fb8072", "#80b1d3", "#fdb462", "#b3de69", "#fccde5",
    "#d9d9d9", "#bc80bd",
];

/// DOT text for the coarsened graph (see the module doc).
pub fn to_dot(g: &CoarseGraph, title: &str) -> String {
    let mut colours: BTreeMap<&str, &str> = BTreeMap::new();
    for l in &g.labels {
        let n = colours.len();
        colours
            .entry(l.as_str())
            .or_insert(PALETTE[n % PALETTE.len()]);
    }
    let esc = |s: &str| s.replace('\\', "\\\\").replace('"', "\\\"");
    let mut out = String::new();
    let _ = writeln!(out, "digraph plan {{\n  label=\"{}\";\n  labelloc=t;\n  node [shape=box, style=filled, fontname=\"Helvetica\"];", esc(title));
    for (i, name) in g.names.iter().enumerate() {
        let label = g.labels.get(i).map(String::as_str).unwrap_or("");
        let (ops, ts) = g.sizes.get(i).copied().unwrap_or((0, 0));
        let colour = colours.get(label).copied().unwrap_or("white");
        let _ = writeln!(
            out,
            "  n{i} [label=\"{}\\n{ops} ops, {ts} tensors\\n{}\", fillcolor=\"{colour}\"];",
            esc(name),
            esc(label)
        );
    }
    for (a, b) in &g.edges {
        let _ = writeln!(out, "  n{a} -> n{b};");
    }
    let _ = writeln!(
        out,
        "  subgraph cluster_legend {{\n    label=\"decision at level 0\";"
    );
    for (i, (l, c)) in colours.iter().enumerate() {
        let _ = writeln!(
            out,
            "    legend{i} [label=\"{}\", fillcolor=\"{c}\"];",
            esc(l)
        );
    }
    out.push_str("  }\n}\n");
    out
}
