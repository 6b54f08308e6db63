//! Attribute and tensor-name helpers of library kernels: what a kernel
//! reads from a bound op ([`tdl::Binding`]) to decide whether it handles
//! the instance. Shared by both backends' recognisers.

use tdl::Binding;

/// The value of an int attribute of a bound op, `None` if the spec has no
/// attribute of that name.
pub(crate) fn int_attr(b: &Binding, name: &str) -> Option<i64> {
    float_attr(b, name).map(|v| v as i64)
}

/// The value of a float (or int) attribute of a bound op, `None` if the
/// spec has no attribute of that name.
pub(crate) fn float_attr(b: &Binding, name: &str) -> Option<f64> {
    b.spec.attr(name).map(|id| b.attrs[id.0 as usize].as_f64())
}

/// Whether the op's inputs have these names, in order (a library kernel
/// declines a spec whose tensors it cannot place).
pub(crate) fn inputs_named(b: &Binding, names: &[&str]) -> bool {
    b.spec
        .inputs
        .iter()
        .map(|t| t.name.as_str())
        .eq(names.iter().copied())
}

/// Whether the op's outputs have these names, in order.
pub(crate) fn outputs_named(b: &Binding, names: &[&str]) -> bool {
    b.spec
        .outputs
        .iter()
        .map(|t| t.name.as_str())
        .eq(names.iter().copied())
}

/// Whether every attribute of the spec is one of `known` (library kernels
/// decline specs with attributes they do not understand).
pub(crate) fn only_attrs(b: &Binding, known: &[&str]) -> bool {
    b.spec
        .attrs
        .iter()
        .all(|a| known.contains(&a.name.as_str()))
}
