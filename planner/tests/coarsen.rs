//! Coarsening rules (Tofu §4.2.1) through the rule list: the RNN rule keys on
//! the graph's step metadata, so an unrolled RNN whose graph file uses none
//! of the zoo's `t<digits>` names is coarsened by time step exactly as the
//! zoo's named RNN is (the oracle: the name-keyed clusters of the same
//! graph); and the check after every rule names a rule that breaks the
//! clusters.

use interval::cache::StrategyCache;
use planner::graph::{format, Graph, Optimizer};
use planner::plan::coarsen::{coarsen, coarsen_checked, Cluster, Context, Rule, RULES};
use planner::plan::model::Model;
use planner::zoo::{self, RnnConfig};
use tdl::Library;

fn lib() -> Library {
    Library::shipped().expect("shipped specs load")
}

/// The zoo's tiny RNN training graph (zoo names, no step metadata).
fn zoo_rnn(lib: &Library) -> Graph {
    zoo::Model::Rnn(RnnConfig::tiny())
        .training(lib, &Optimizer::Sgd { lr: 0.1 })
        .unwrap()
}

/// The time step in a zoo name (`…t3…`), read by the test only.
fn zoo_step(name: &str) -> Option<u32> {
    name.split(['.', '/'])
        .find(|s| s.len() > 1 && s.starts_with('t') && s[1..].bytes().all(|b| b.is_ascii_digit()))
        .map(|s| s[1..].parse().unwrap())
}

/// The same graph as a graph file with arbitrary names (`n1`, `n2`, …)
/// and each forward op, input and activation of a time step marked with its
/// `step` (what an importer unrolling an RNN writes).
fn renamed_with_steps(graph: &Graph, dir: &std::path::Path) -> Graph {
    let mut v: serde_json::Value = serde_json::from_str(&format::to_json(graph)).unwrap();
    let mut n = 0;
    let mut fresh = || {
        n += 1;
        format!("n{n}")
    };
    for t in v["tensors"].as_array_mut().unwrap() {
        let step = zoo_step(t["name"].as_str().unwrap());
        if let (Some(s), "input" | "activation") = (step, t["role"].as_str().unwrap()) {
            t["step"] = s.into();
        }
        t["name"] = fresh().into();
    }
    for op in v["ops"].as_array_mut().unwrap() {
        let step = zoo_step(op["name"].as_str().unwrap());
        if let (Some(s), "forward") = (step, op["role"].as_str().unwrap()) {
            op["step"] = s.into();
        }
        op["name"] = fresh().into();
    }
    let path = dir.join("rnn-renamed.graph.json");
    std::fs::write(&path, serde_json::to_string_pretty(&v).unwrap()).unwrap();
    format::load(&path).unwrap()
}

/// A cluster's op slots, tensor slots (ids) and tied-axis flag.
type Slots = (Vec<Vec<u32>>, Vec<Vec<u32>>, bool);

/// The clusters' slots, names left out.
fn slots(clusters: &[Cluster]) -> Vec<Slots> {
    clusters
        .iter()
        .map(|c| {
            (
                c.op_slots
                    .iter()
                    .map(|s| s.iter().map(|o| o.0).collect())
                    .collect(),
                c.tensor_slots
                    .iter()
                    .map(|s| s.iter().map(|t| t.0).collect())
                    .collect(),
                c.tied_axis,
            )
        })
        .collect()
}

#[test]
fn rnn_from_a_graph_file_without_zoo_names_is_coarsened_by_time_step() {
    let lib = lib();
    let cache = StrategyCache::new();
    let named = zoo_rnn(&lib);
    let dir = std::env::temp_dir().join(format!("tofu-coarsen-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let renamed = renamed_with_steps(&named, &dir);
    assert!(renamed.ops().iter().all(|o| zoo_step(&o.name).is_none()));
    assert!(renamed
        .tensors()
        .iter()
        .all(|t| zoo_step(&t.name).is_none()));

    let oracle = coarsen(&named, &Model::new(&named, &lib, &cache).unwrap());
    let got = coarsen(&renamed, &Model::new(&renamed, &lib, &cache).unwrap());
    assert_eq!(slots(&got), slots(&oracle));

    // The time steps were coalesced: some cluster holds ops of all 3 steps.
    let steps = RnnConfig::tiny().steps;
    assert!(got
        .iter()
        .any(|c| c.op_slots.iter().any(|s| s.len() == steps)));
    // Without the metadata, the arbitrary names alone coalesce nothing.
    let mut v: serde_json::Value = serde_json::from_str(&format::to_json(&renamed)).unwrap();
    for x in ["ops", "tensors"] {
        for item in v[x].as_array_mut().unwrap() {
            item.as_object_mut().unwrap().remove("step");
        }
    }
    let bare = format::from_json(&v.to_string()).unwrap();
    let plain = coarsen(&bare, &Model::new(&bare, &lib, &cache).unwrap());
    assert!(plain.len() > got.len());
    assert!(plain
        .iter()
        .all(|c| c.op_slots.iter().all(|s| s.len() == 1)));
    std::fs::remove_dir_all(&dir).ok();
}

/// A rule that puts the first cluster in twice.
struct Duplicate;
impl Rule for Duplicate {
    fn name(&self) -> &'static str {
        "duplicate"
    }
    fn apply(&self, _cx: &Context, mut clusters: Vec<Cluster>) -> Vec<Cluster> {
        clusters.push(clusters[0].clone());
        clusters
    }
}

/// A rule that drops every cluster.
struct Drop;
impl Rule for Drop {
    fn name(&self) -> &'static str {
        "drop"
    }
    fn apply(&self, _cx: &Context, _clusters: Vec<Cluster>) -> Vec<Cluster> {
        Vec::new()
    }
}

#[test]
fn the_check_after_each_rule_names_the_rule_that_broke_the_clusters() {
    let lib = lib();
    let graph = zoo_rnn(&lib);
    let model = Model::new(&graph, &lib, &StrategyCache::new()).unwrap();
    let all = coarsen_checked(&graph, &model, RULES).unwrap();
    let covered: usize = all.iter().map(|c| c.ops().count()).sum();
    assert_eq!(covered, graph.ops().len());

    let dup = coarsen_checked(&graph, &model, &[RULES[0], &Duplicate]).unwrap_err();
    assert_eq!(dup.rule, "duplicate");
    assert!(dup.what.contains("in two clusters"), "{}", dup.what);

    let lost = coarsen_checked(&graph, &model, &[RULES[0], &Drop]).unwrap_err();
    assert_eq!(lost.rule, "drop");
    assert!(lost.what.contains("in no cluster"), "{}", lost.what);

    // Rule 1 alone leaves the tensors to rule 2: the last rule must cover all.
    let partial = coarsen_checked(&graph, &model, &RULES[..1]).unwrap_err();
    assert_eq!(partial.rule, "forward_backward");
}
