//! The importer's graph inputs and initializers: each input's element type
//! and dims (fixed by the options, or named), the shapes declared for opaque
//! operators, the known values defined from initializers and supplied
//! inputs, and the check that every named dim the options give exists.
//! Used by [`crate::import`].

use std::collections::HashSet;
use std::path::Path;

use crate::dims::{check_given, missing_dims_message, resolve_dims, DefaultedDim};
use crate::error::OnnxError;
use crate::import::{graph_err, Options};
use crate::lower::{Kind, Known, Lower, NodeError, Src};
use crate::opaque;
use crate::tensor::{decode, Data, Elem};

/// Element type and dims (value, or name / None for dynamic) of a graph input.
#[allow(clippy::type_complexity)]
pub(crate) fn input_type(
    vi: &onnx_protobuf::ValueInfoProto,
) -> Result<(Elem, Vec<Result<usize, Option<String>>>), String> {
    let Some(tp) = vi.type_.as_ref() else {
        return Err("has no type".into());
    };
    if !tp.has_tensor_type() {
        return Err("is not a tensor (sequences, maps and optionals are not supported)".into());
    }
    let tt = tp.tensor_type();
    let elem = Elem::from_code(tt.elem_type).ok_or_else(|| {
        format!(
            "has element type {}, which tofu does not read",
            crate::tensor::type_name(tt.elem_type)
        )
    })?;
    let Some(shape) = tt.shape.as_ref() else {
        return Err("has no shape (rank unknown); give it with an input shape".into());
    };
    let dims = shape
        .dim
        .iter()
        .map(|d| {
            if d.has_dim_value() && d.dim_value() > 0 {
                Ok(d.dim_value() as usize)
            } else if d.has_dim_value() && d.dim_value() == 0 {
                Ok(0)
            } else if !d.dim_param().is_empty() {
                Err(Some(d.dim_param().to_string()))
            } else {
                Err(None)
            }
        })
        .collect();
    Ok((elem, dims))
}

/// The static shapes the model declares for values (`value_info`, graph
/// outputs; a dynamic axis 0 takes the batch size, a static one the export's
/// batch re-batched by `--batch`), for opaque nodes' specs.
pub(crate) fn declared_shapes(
    graph: &onnx_protobuf::GraphProto,
    opts: &Options,
) -> opaque::OpaqueSpecs {
    let mut specs = opaque::OpaqueSpecs::default();
    let old = crate::batch::export_batch(graph, opts);
    for vi in graph.value_info.iter().chain(&graph.output) {
        if let Ok((_, dims)) = input_type(vi) {
            let batch = opts.dims.batch.unwrap_or(crate::dims::DEFAULT_BATCH);
            let shape: Option<Vec<usize>> = dims
                .iter()
                .enumerate()
                .map(|(a, d)| match d {
                    Ok(v) if a == 0 && old == Some(*v) => Some(batch),
                    Ok(v) => Some(*v),
                    Err(_) if a == 0 => Some(batch),
                    Err(_) => None,
                })
                .collect();
            match shape {
                Some(shape) => {
                    specs.declared.insert(vi.name.clone(), shape);
                }
                None => {
                    let partial = dims.iter().map(|d| d.as_ref().ok().copied()).collect();
                    specs.partial.insert(vi.name.clone(), partial);
                }
            }
        }
    }
    specs
}

/// Initializers → known values (float: weights; others: constants); external
/// data is referenced, not read. Gives the initializers' names.
pub(crate) fn define_initializers(
    l: &mut Lower,
    graph: &onnx_protobuf::GraphProto,
    path: &Path,
) -> Result<HashSet<String>, OnnxError> {
    let unreadable = |message: String| OnnxError::Unreadable {
        path: path.to_path_buf(),
        message,
    };
    let mut init_names = HashSet::new();
    for t in &graph.initializer {
        let (elem, shape, src) = if crate::external::is_external(t) {
            let dir = path.parent().unwrap_or(Path::new("."));
            let (elem, shape, x) =
                crate::external::ExternalRef::new(t, dir).map_err(&unreadable)?;
            (elem, shape, Src::External(Box::new(x)))
        } else {
            let d = decode(t).map_err(&unreadable)?;
            (d.elem, d.shape.clone(), Src::Dense(d))
        };
        init_names.insert(t.name.clone());
        let kind = if elem.is_integer() {
            Kind::Constant
        } else {
            Kind::Weight
        };
        l.define_known(
            &t.name,
            Known {
                elem,
                shape,
                src,
                kind,
            },
        );
    }
    if !graph.sparse_initializer.is_empty() {
        return Err(unreadable(
            "the model has sparse initializers, which tofu does not read".into(),
        ));
    }
    Ok(init_names)
}

/// Graph inputs (initializers excepted) → graph inputs of the shapes the
/// options give or [`resolve_dims`] resolves (a static batch dim set to
/// `--batch`, [`crate::batch::rebatch`]), or known values the caller
/// supplies; every input whose dynamic dims have no value is named in one error.
pub(crate) fn define_inputs(
    l: &mut Lower,
    graph: &onnx_protobuf::GraphProto,
    init_names: &HashSet<String>,
    opts: &Options,
    path: &Path,
    defaulted: &mut Vec<DefaultedDim>,
) -> Result<(), OnnxError> {
    let options_err = |message: String| OnnxError::Options {
        path: path.to_path_buf(),
        message,
    };
    let unreadable = |message: String| OnnxError::Unreadable {
        path: path.to_path_buf(),
        message,
    };
    let given = opts
        .input_shapes
        .keys()
        .map(|n| ("--input-shape", n))
        .chain(opts.fixed_inputs.keys().map(|n| ("--input-value", n)));
    for (flag, name) in given {
        if !graph
            .input
            .iter()
            .any(|vi| &vi.name == name && !init_names.contains(name))
        {
            let names: Vec<&str> = graph
                .input
                .iter()
                .map(|vi| vi.name.as_str())
                .filter(|n| !init_names.contains(*n))
                .collect();
            return Err(options_err(format!(
                "{flag} names `{name}`, which is not a graph input; the inputs are {}",
                names.join(", ")
            )));
        }
    }
    let mut missing = Vec::new();
    let old_batch = crate::batch::export_batch(graph, opts);
    for (idx, vi) in graph.input.iter().enumerate() {
        if init_names.contains(&vi.name) {
            continue;
        }
        let (elem, mut dims) =
            input_type(vi).map_err(|m| unreadable(format!("graph input `{}`: {m}", vi.name)))?;
        if let (Some(old), Some(new)) = (old_batch, opts.dims.batch) {
            if !opts.input_shapes.contains_key(&vi.name)
                && !opts.fixed_inputs.contains_key(&vi.name)
            {
                dims = crate::batch::rebatch(&dims, old, new);
            }
        }
        if let Some(v) = opts.fixed_inputs.get(&vi.name) {
            let given = opts.input_shapes.get(&vi.name).map(Vec::as_slice);
            let k = fixed_value(&vi.name, elem, &dims, given, v).map_err(options_err)?;
            l.define_known(&vi.name, k);
            continue;
        }
        let shape = match opts.input_shapes.get(&vi.name) {
            // Values the caller supplies (conformance cases) fix the shape as they are.
            Some(given) if opts.input_values.contains_key(&vi.name) => given.clone(),
            Some(given) => check_given(&vi.name, &dims, given).map_err(options_err)?,
            None => match resolve_dims(&vi.name, idx, &dims, &opts.dims, defaulted) {
                Ok(shape) => shape,
                Err(_) => {
                    missing.push((vi.name.clone(), dims));
                    continue;
                }
            },
        };
        if !missing.is_empty() {
            continue;
        }
        match opts.input_values.get(&vi.name) {
            Some(d) => l.define_known(
                &vi.name,
                Known {
                    elem: d.elem,
                    shape: d.shape.clone(),
                    src: Src::Dense(d.clone()),
                    kind: Kind::Input,
                },
            ),
            None => {
                l.define_input(&vi.name, &shape, elem.dtype())
                    .map_err(|e| match e {
                        NodeError::Graph(g) => graph_err(path, &vi.name, g),
                        NodeError::Unsupported(r) => unreadable(r),
                    })?;
            }
        }
    }
    if !missing.is_empty() {
        return Err(options_err(missing_dims_message(&missing)));
    }
    Ok(())
}

/// The constant a graph input is fixed to (`--input-value NAME=V,…`): of
/// input `name`'s element type `elem`, shaped by `given` (`--input-shape`),
/// the model's static `dims`, or (rank 1) the number of values. Errors: a
/// message naming the input, what does not fit and the fix.
pub(crate) fn fixed_value(
    name: &str,
    elem: Elem,
    dims: &[crate::dims::ModelDim],
    given: Option<&[usize]>,
    values: &[f64],
) -> Result<Known, String> {
    let shape = match given {
        Some(g) => check_given(name, dims, g)?,
        None if dims.len() == 1 => vec![values.len()],
        None => dims
            .iter()
            .map(|d| d.as_ref().ok().copied())
            .collect::<Option<Vec<usize>>>()
            .ok_or_else(|| {
                format!(
                    "--input-value gives input `{name}` {} values, but its shape {} has dynamic dims; give it with --input-shape {name}=D0,D1,…",
                    values.len(),
                    crate::dims::show_dims(dims)
                )
            })?,
    };
    if dims.len() == 1 {
        if let Ok(d) = dims[0] {
            if given.is_none() && d != values.len() {
                return Err(format!(
                    "--input-value gives input `{name}` {} values, but the model fixes its length to {d}",
                    values.len()
                ));
            }
        }
    }
    let numel: usize = shape.iter().product();
    if numel != values.len() {
        let give = if numel == 1 {
            "one value".to_string()
        } else {
            format!("{numel} comma-separated values")
        };
        return Err(format!(
            "--input-value gives input `{name}` {} values, but its shape {shape:?} holds {numel}; give {give}",
            values.len()
        ));
    }
    if elem.is_integer() && values.iter().any(|v| v.fract() != 0.0) {
        return Err(format!(
            "--input-value gives input `{name}` a fractional value, but it holds {elem:?} elements: give whole numbers"
        ));
    }
    Ok(Known {
        elem,
        shape: shape.clone(),
        src: Src::Dense(Data {
            elem,
            shape,
            values: values
                .iter()
                .map(|&v| crate::tensor::round_to(elem, v, false))
                .collect(),
        }),
        kind: Kind::Constant,
    })
}

/// Every `--dim NAME=V` must name a dynamic dim of a graph input: a name no
/// input has would be silently ignored (`--dim sequence=128` on a model whose
/// dim is `sequence_length`), so it is an error listing the model's dim names.
pub(crate) fn check_named_dims(
    graph: &onnx_protobuf::GraphProto,
    opts: &Options,
    path: &Path,
) -> Result<(), OnnxError> {
    let inits: HashSet<&str> = graph.initializer.iter().map(|t| t.name.as_str()).collect();
    let inputs: Vec<(String, Vec<crate::dims::ModelDim>)> = graph
        .input
        .iter()
        .filter(|vi| !inits.contains(vi.name.as_str()))
        .filter_map(|vi| Some((vi.name.clone(), input_type(vi).ok()?.1)))
        .collect();
    crate::dims::check_named(&inputs, &opts.dims).map_err(|message| OnnxError::Options {
        path: path.to_path_buf(),
        message,
    })
}
