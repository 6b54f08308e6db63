//! Snapshot tests of the diagnostics a spec writer sees: one small,
//! realistic spec per mistake, checked through [`tdl::Library::from_sources`]
//! (so per-file and cross-op checks both run) and rendered with
//! [`tdl::Diagnostics::render`]. Every diagnostic must carry a
//! `file:line:col` header, a caret under the offending text and a hint.
//!
//! Update with `INSTA_UPDATE=always cargo test -p tdl --test diagnostics`,
//! then review the `.snap` files under `tests/snapshots/` by eye.

/// Check `src` as the file `{name}.tdl`, require that it fails, and snapshot
/// every rendered diagnostic under `name`.
fn check(name: &str, src: &str) {
    let file = format!("{name}.tdl");
    let errors = match tdl::Library::from_sources(&[(file.clone(), src.to_string())]) {
        Ok(lib) => panic!("`{name}` should not check, but gave {} op(s)", lib.len()),
        Err(d) => d,
    };
    assert!(
        !errors.errors.is_empty(),
        "`{name}`: an error without diagnostics"
    );
    for d in &errors.errors {
        assert_eq!(d.file, file, "`{name}`: diagnostic names the wrong file");
        assert!(d.line >= 1 && d.column >= 1, "`{name}`: no position");
        let help = d.help.as_deref().unwrap_or("");
        assert!(
            !help.trim().is_empty(),
            "`{name}`: `{}` has no hint",
            d.message
        );
    }
    let rendered = errors.render();
    assert!(
        rendered.contains(&format!("{file}:")),
        "`{name}`: no file:line:col\n{rendered}"
    );
    assert!(
        rendered.contains('^') || rendered.contains('─'),
        "`{name}`: no caret\n{rendered}"
    );
    assert!(rendered.contains("help:"), "`{name}`: no hint\n{rendered}");
    insta::assert_snapshot!(name, rendered);
}

// ------------------------------------------------------------------ names

#[test]
fn unknown_tensor() {
    check(
        "unknown_tensor",
        "/// Elementwise sum.\n\
         op add(a[N], b[N]) -> c[N] {\n    c[i] = a[i] + bb[i];\n}\n",
    );
}

#[test]
fn unbound_index_variable() {
    check(
        "unbound_index_variable",
        "/// Row sums.\n\
         op row_sum(x[M, N]) -> y[M] {\n    y[m] = x[m, n];\n}\n",
    );
}

#[test]
fn reduction_variable_shadows_output_variable() {
    check(
        "reduction_variable_shadows_output_variable",
        "/// Matrix product.\n\
         op matmul(a[M, K], b[K, N]) -> c[M, N] {\n    c[m, n] = Sum(m: a[m, m] * b[m, n]);\n}\n",
    );
}

#[test]
fn index_variable_named_like_a_dim() {
    check(
        "index_variable_named_like_a_dim",
        "/// Copy.\n\
         op copy(x[N]) -> y[N] {\n    y[N] = x[N];\n}\n",
    );
}

#[test]
fn unknown_function() {
    check(
        "unknown_function",
        "/// Gaussian error linear unit.\n\
         op gelu(x[N]) -> y[N] {\n    y[i] = x[i] * normal_cdf(x[i]);\n}\n",
    );
}

#[test]
fn tensor_used_without_indices() {
    check(
        "tensor_used_without_indices",
        "/// Scale by a scalar tensor.\n\
         op scale(x[N], s[]) -> y[N] {\n    y[i] = x[i] * s;\n}\n",
    );
}

#[test]
fn unknown_output_in_statement() {
    check(
        "unknown_output_in_statement",
        "/// Two-step computation.\n\
         op twice(x[N]) -> y[N] {\n    t[i] = 2.0 * x[i];\n    y[i] = x[i];\n}\n",
    );
}

// ------------------------------------------------------------------ arity and rank

#[test]
fn builtin_wrong_arity() {
    check(
        "builtin_wrong_arity",
        "/// Clipped activation.\n\
         op clip(x[N]) -> y[N] {\n    y[i] = max(x[i]);\n}\n",
    );
}

#[test]
fn rank_mismatch_on_read() {
    check(
        "rank_mismatch_on_read",
        "/// Matrix-vector product.\n\
         op matvec(a[M, K], v[K]) -> y[M] {\n    y[m] = Sum(k: a[m, k] * v[k, m]);\n}\n",
    );
}

#[test]
fn rank_mismatch_on_statement_lhs() {
    check(
        "rank_mismatch_on_statement_lhs",
        "/// Transpose.\n\
         op transpose(x[M, N]) -> y[N, M] {\n    y[n] = x[0, n];\n}\n",
    );
}

#[test]
fn opaque_result_indexed_with_wrong_rank() {
    check(
        "opaque_result_indexed_with_wrong_rank",
        "/// Batched Cholesky.\n\
         op chol(m[B, N, N]) -> l[B, N, N] {\n    l[b, i, j] = cholesky(m[b, :, :])[i];\n}\n",
    );
}

// ------------------------------------------------------------------ types and indices

#[test]
fn float_attribute_used_as_index() {
    check(
        "float_attribute_used_as_index",
        "/// Shifted copy.\n\
         op shift<offset: float = 1.0>(padded x[N]) -> y[N] {\n    y[i] = x[i + offset];\n}\n",
    );
}

#[test]
fn real_division_in_index() {
    check(
        "real_division_in_index",
        "/// 2x downsampling.\n\
         op downsample(x[N]) -> y[N // 2] {\n    y[i] = x[i * 4 / 2];\n}\n",
    );
}

#[test]
fn real_division_in_output_shape() {
    check(
        "real_division_in_output_shape",
        "/// 2x downsampling.\n\
         op downsample(x[N]) -> y[N / 2] {\n    y[i] = x[2 * i];\n}\n",
    );
}

#[test]
fn int_attribute_default_not_an_integer() {
    check(
        "int_attribute_default_not_an_integer",
        "/// Strided copy.\n\
         op strided<stride: int = 1.5>(x[N]) -> y[N // stride] {\n    y[i] = x[i * stride];\n}\n",
    );
}

// ------------------------------------------------------------------ ellipsis and slices

#[test]
fn ellipsis_without_input_ellipsis() {
    check(
        "ellipsis_without_input_ellipsis",
        "/// Elementwise exponential.\n\
         op exp_all(x[N]) -> y[...] {\n    y[...] = exp(x[0]);\n}\n",
    );
}

#[test]
fn ellipsis_index_not_bound() {
    check(
        "ellipsis_index_not_bound",
        "/// Bias gradient.\n\
         op bias_grad(dy[..., N]) -> db[N] {\n    db[n] = Sum(k in N: dy[..., n]);\n}\n",
    );
}

#[test]
fn misplaced_ellipsis_in_read() {
    check(
        "misplaced_ellipsis_in_read",
        "/// Softmax numerator.\n\
         op softexp(x[..., N]) -> y[..., N] {\n    y[..., i] = exp(x[i, ...]);\n}\n",
    );
}

#[test]
fn colon_slice_outside_opaque_call() {
    check(
        "colon_slice_outside_opaque_call",
        "/// Row copy.\n\
         op rows(x[M, N]) -> y[M, N] {\n    y[m, n] = exp(x[m, :]);\n}\n",
    );
}

// ------------------------------------------------------------------ reductions

#[test]
fn reduction_range_cannot_be_inferred() {
    check(
        "reduction_range_cannot_be_inferred",
        "/// Sum of a strided window.\n\
         op window_sum(padded x[N]) -> y[N] {\n    y[i] = Sum(k: x[i + k]);\n}\n",
    );
}

#[test]
fn unused_reduction_variable() {
    check(
        "unused_reduction_variable",
        "/// Row sums.\n\
         op row_sum(x[M, N]) -> y[M] {\n    y[m] = Sum(n, k: x[m, n]);\n}\n",
    );
}

// ------------------------------------------------------------------ statements

#[test]
fn output_never_defined() {
    check(
        "output_never_defined",
        "/// LSTM-style pair of outputs.\n\
         op pair(x[N]) -> (h[N], c[N]) {\n    h[i] = tanh(x[i]);\n}\n",
    );
}

#[test]
fn output_defined_twice() {
    check(
        "output_defined_twice",
        "/// Rectifier.\n\
         op relu(x[N]) -> y[N] {\n    y[i] = max(x[i], 0.0);\n    y[i] = x[i];\n}\n",
    );
}

#[test]
fn read_before_definition() {
    check(
        "read_before_definition",
        "/// Normalise by the total.\n\
         op normalise(x[N]) -> y[N] {\n    let s[] = Sum(j: y[j]);\n    y[i] = x[i] / s[];\n}\n",
    );
}

#[test]
fn temporary_read_before_its_let() {
    check(
        "temporary_read_before_its_let",
        "/// Normalise by the total.\n\
         op normalise(x[N]) -> y[N] {\n    y[i] = x[i] / s[];\n    let s[] = Sum(j: x[j]);\n}\n",
    );
}

#[test]
fn assignment_to_an_input() {
    check(
        "assignment_to_an_input",
        "/// In-place scale (not allowed).\n\
         op scale_(x[N]) -> y[N] {\n    x[i] = 2.0 * x[i];\n    y[i] = x[i];\n}\n",
    );
}

#[test]
fn duplicate_op_name() {
    check(
        "duplicate_op_name",
        "/// Rectifier.\n\
         op relu(x[N]) -> y[N] {\n    y[i] = max(x[i], 0.0);\n}\n\n\
         /// Rectifier again.\n\
         op relu(x[N]) -> y[N] {\n    y[i] = select(x[i] > 0.0, x[i], 0.0);\n}\n",
    );
}

#[test]
fn duplicate_input_name() {
    check(
        "duplicate_input_name",
        "/// Elementwise product.\n\
         op mul(a[N], a[N]) -> c[N] {\n    c[i] = a[i] * a[i];\n}\n",
    );
}

// ------------------------------------------------------------------ gradients

#[test]
fn unknown_gradient_op() {
    check(
        "unknown_gradient_op",
        "/// Hyperbolic tangent.\n\
         op tanh_op(x[N]) -> y[N] {\n    y[i] = tanh(x[i]);\n    grad x = tanh_backward(y, grad(y));\n}\n",
    );
}

#[test]
fn unknown_attribute_in_grad_declaration() {
    check(
        "unknown_attribute_in_grad_declaration",
        "/// Scale by a constant.\n\
         op scale<alpha: float = 1.0>(x[N]) -> y[N] {\n    y[i] = alpha * x[i];\n    grad x = scale(grad(y); beta = alpha);\n}\n",
    );
}

#[test]
fn grad_op_wrong_arity() {
    check(
        "grad_op_wrong_arity",
        "/// Elementwise product.\n\
         op mul(a[N], b[N]) -> c[N] {\n    c[i] = a[i] * b[i];\n    grad a = mul(grad(c));\n}\n",
    );
}

#[test]
fn grad_of_something_not_an_input() {
    check(
        "grad_of_something_not_an_input",
        "/// Exponential.\n\
         op exp_op(x[N]) -> y[N] {\n    y[i] = exp(x[i]);\n    grad z = mul(grad(x), y);\n}\n\n\
         /// Elementwise product.\n\
         op mul(a[N], b[N]) -> c[N] {\n    c[i] = a[i] * b[i];\n}\n",
    );
}

// ------------------------------------------------------------------ syntax

#[test]
fn missing_semicolon() {
    check(
        "missing_semicolon",
        "/// Elementwise sum.\n\
         op add(a[N], b[N]) -> c[N] {\n    c[i] = a[i] + b[i]\n}\n",
    );
}

#[test]
fn missing_semicolon_between_statements() {
    check(
        "missing_semicolon_between_statements",
        "/// Softplus.\n\
         op softplus(x[N]) -> y[N] {\n    let e[i] = exp(x[i])\n    y[i] = log(1.0 + e[i]);\n}\n",
    );
}

#[test]
fn missing_arrow() {
    check(
        "missing_arrow",
        "/// Elementwise sum.\n\
         op add(a[N], b[N]) c[N] {\n    c[i] = a[i] + b[i];\n}\n",
    );
}

#[test]
fn slash_slash_comment() {
    check(
        "slash_slash_comment",
        "/// Elementwise sum.\n\
         op add(a[N], b[N]) -> c[N] {\n    // add the two inputs\n    c[i] = a[i] + b[i];\n}\n",
    );
}

#[test]
fn unknown_attribute_type() {
    check(
        "unknown_attribute_type",
        "/// Optional transpose.\n\
         op maybe_t<trans: bool = 0>(x[N, N]) -> y[N, N] {\n    y[i, j] = x[i, j];\n}\n",
    );
}

#[test]
fn unclosed_bracket() {
    check(
        "unclosed_bracket",
        "/// Copy.\n\
         op copy(x[N]) -> y[N] {\n    y[i] = x[i;\n}\n",
    );
}

// ------------------------------------------------------------------ several at once

#[test]
fn multiple_errors_are_all_reported() {
    check(
        "multiple_errors_are_all_reported",
        "/// Several mistakes in one op.\n\
         op broken<eps: float = 1e-5>(x[M, N], w[N]) -> (y[M, N], z[M]) {\n    \
         y[m, n] = x[m, n] * w[n, m];\n    \
         y[m, n] = x[m, n + eps];\n    \
         let t[m] = Sum(n: x[m, n] * q[n]);\n}\n\n\
         /// A second broken op in the same file.\n\
         op also_broken(a[K]) -> b[K] {\n    b[k] = a[k / 2];\n    grad a = nowhere(grad(b));\n}\n",
    );
}

// ------------------------------------------------------------------ more mistakes

#[test]
fn output_defined_in_terms_of_itself() {
    check(
        "output_defined_in_terms_of_itself",
        "/// Running sum (not expressible this way).\n\
         op cumsum(x[N]) -> y[N] {\n    y[i] = x[i] + y[i - 1];\n}\n",
    );
}

#[test]
fn gradient_op_name_typo() {
    check(
        "gradient_op_name_typo",
        "/// Matrix product.\n\
         op matmul(a[M, K], b[K, N]) -> c[M, N] {\n    c[m, n] = Sum(k: a[m, k] * b[k, n]);\n    \
         grad a = matmul_tm(grad(c), b);\n    grad b = matmul_tn(a, grad(c));\n}\n\n\
         /// Product with the first operand transposed.\n\
         op matmul_tn(a[K, M], b[K, N]) -> c[M, N] {\n    c[m, n] = Sum(k: a[k, m] * b[k, n]);\n}\n",
    );
}

#[test]
fn brackets_nested_too_deeply() {
    let depth = 70;
    let src = format!(
        "/// Deep.\nop deep(x[N]) -> y[N] {{\n    y[i] = {}x[i]{};\n}}\n",
        "(".repeat(depth),
        ")".repeat(depth)
    );
    check("brackets_nested_too_deeply", &src);
}

#[test]
fn unexpected_end_of_file() {
    check(
        "unexpected_end_of_file",
        "/// Elementwise sum.\n\
         op add(a[N], b[N]) -> c[N] {\n    c[i] = a[i] + b[i];\n",
    );
}

#[test]
fn missing_body_brace() {
    check(
        "missing_body_brace",
        "/// Copy.\n\
         op copy(x[N]) -> y[N]\n    y[i] = x[i];\n}\n",
    );
}

/// A mistake in one file does not make ops of other files that name its ops
/// as gradients fail with "not defined" as well.
#[test]
fn broken_gradient_op_is_not_reported_twice() {
    let a = "/// Tanh.\nop tanh_op(x[N]) -> y[N] {\n    y[i] = tanh(x[i]);\n    grad x = tanh_grad(y, grad(y));\n}\n";
    let b = "/// Tanh gradient.\nop tanh_grad(y[N], dy[N]) -> dx[N] {\n    dx[i] = dy[i] * (1.0 - y[i] * y[j]);\n}\n";
    let d = tdl::Library::from_sources(&[("a.tdl".into(), a.into()), ("b.tdl".into(), b.into())])
        .expect_err("b.tdl is broken");
    assert_eq!(d.errors.len(), 1, "{}", d.render());
    assert_eq!(
        (
            d.errors[0].file.as_str(),
            d.errors[0].line,
            d.errors[0].column
        ),
        ("b.tdl", 3, 37)
    );
}
