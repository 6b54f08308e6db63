//! Robustness of the TDL front end: valid specs (every file of the shipped
//! `specs/` plus a few inline ones) are mutated at random — characters and
//! tokens deleted, inserted, duplicated and swapped, identifiers replaced,
//! text truncated, random Unicode inserted — and fed to
//! [`tdl::parse_file`] and [`tdl::Library::from_sources`]. Whatever the
//! input, checking and rendering the diagnostics must never panic, and every
//! diagnostic must point inside the text.
//!
//! `PROPTEST_CASES` raises the number of cases (default 512).

use proptest::prelude::*;
use proptest::test_runner::Config;

/// Inline seeds covering constructs the shipped specs may not use.
const INLINE: &[&str] = &[
    "/// Matrix product.\n\
     op matmul(a[M, K], b[K, N]) -> c[M, N] {\n    c[m, n] = Sum(k: a[m, k] * b[k, n]);\n    grad a = matmul_nt(grad(c), b);\n    grad b = matmul(a, grad(c));\n}\n\n\
     /// Transposed product.\n\
     op matmul_nt(a[M, K], b[N, K]) -> c[M, N] {\n    c[m, n] = Sum(k: a[m, k] * b[n, k]);\n}\n",
    "/// Conv.\n\
     op conv1d<stride: int = 1, pad: int = 0, dilation: int = 1, eps: float = 1e-5>(\n    padded x[B, CI, X], w[CO, CI, DX]\n) -> y[B, CO, (X + 2 * pad - dilation * (DX - 1) - 1) // stride + 1] {\n    \
     y[b, co, o] = Sum(ci, dx: x[b, ci, o * stride + dx * dilation - pad] * w[co, ci, dx]) + eps;\n}\n",
    "/// Softmax.\n\
     op softmax(x[..., N]) -> y[..., N] {\n    let mx[...] = Max(j: x[..., j]);\n    let e[..., i] = exp(x[..., i] - mx[...]);\n    let s[...] = Sum(j: e[..., j]);\n    y[..., i] = e[..., i] / s[...];\n}\n\n\
     /// Bias gradient.\n\
     op sum_leading(dy[..., N]) -> db[N] {\n    db[n] = Sum(...: dy[..., n]);\n}\n",
    "/// Two outputs, selects, temporaries with explicit ranges.\n\
     op lstm_piece<clip: float>(g[B, H4], c0[B, H]) -> (h[B, H], c[B, H]) {\n    \
     let t[b in B, j in H] = sigmoid(g[b, j]) * tanh(g[b, j + H]);\n    \
     c[b, j] = select(abs(t[b, j]) > clip, clip, t[b, j]) + c0[b, j];\n    \
     h[b, j] = tanh(c[b, j]) * (g[b, j] >= 0.0 && !(g[b, j] != 1.0) || 0);\n}\n",
    "/// Opaque and data-dependent reads.\n\
     op chol(m[B, N, N], idx[B], table[V, D]) -> (l[B, N, N], e[B, D]) {\n    \
     l[b, i, j] = cholesky(m[b, :, :])[i, j];\n    e[b, d] = table[idx[b], d];\n}\n",
];

/// Characters that are meaningful in TDL, or awkward for byte/char
/// arithmetic (multi-byte, zero-width, control, combining, astral).
const CHARS: &[char] = &[
    '[',
    ']',
    '(',
    ')',
    '{',
    '}',
    '<',
    '>',
    ':',
    ';',
    ',',
    '.',
    '=',
    '+',
    '-',
    '*',
    '/',
    '%',
    '#',
    '!',
    '&',
    '|',
    '_',
    ' ',
    '\n',
    '\t',
    '\r',
    '0',
    '9',
    'e',
    'a',
    'N',
    'é',
    'Σ',
    'λ',
    '∑',
    '→',
    '…',
    '😀',
    '\u{0}',
    '\u{7f}',
    '\u{200b}',
    '\u{feff}',
    '\u{301}',
    '\u{10ffff}',
    '漢',
];

/// Tokens worth inserting.
const TOKENS: &[&str] = &[
    "...",
    ":",
    "//",
    "///",
    "#",
    "op",
    "let",
    "grad",
    "in",
    "padded",
    "int",
    "float",
    "->",
    "[",
    "]",
    "(",
    ")",
    "{",
    "}",
    "<",
    ">",
    ";",
    ",",
    "=",
    "Sum(",
    "Max(k:",
    "grad(",
    "cholesky(",
    "select(",
    "99999999999999999999",
    "9223372036854775807",
    "-9223372036854775808",
    "1e999",
    "0.0",
    "1.5",
    "-",
    "--",
    "!",
    "x[]",
    "y[...]",
    "::",
    "é",
    "Σ",
    " ",
    "\n",
    "/// doc\n",
    "\u{0}",
];

/// Replacement identifiers: keywords, built-ins, reducers, names in the seeds.
const IDENTS: &[&str] = &[
    "op",
    "let",
    "grad",
    "int",
    "float",
    "in",
    "padded",
    "Sum",
    "Max",
    "Min",
    "Prod",
    "exp",
    "max",
    "select",
    "cholesky",
    "a",
    "b",
    "c",
    "x",
    "y",
    "i",
    "j",
    "k",
    "m",
    "n",
    "N",
    "M",
    "K",
    "B",
    "stride",
    "eps",
    "matmul",
    "matmul_nt",
    "unknown",
    "_",
    "é",
    "x1",
];

#[derive(Clone, Debug)]
enum Mutation {
    DeleteChar(usize),
    InsertChar(usize, char),
    InsertRandomChar(usize, char),
    DuplicateChars(usize, usize),
    SwapChars(usize, usize),
    DeleteToken(usize),
    InsertToken(usize, usize),
    DuplicateToken(usize),
    SwapTokens(usize, usize),
    ReplaceIdent(usize, usize),
    Truncate(usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let n = any::<usize>();
    prop_oneof![
        n.prop_map(Mutation::DeleteChar),
        (n, prop::sample::select(CHARS)).prop_map(|(p, c)| Mutation::InsertChar(p, c)),
        (n, any::<char>()).prop_map(|(p, c)| Mutation::InsertRandomChar(p, c)),
        (n, 1usize..12).prop_map(|(p, l)| Mutation::DuplicateChars(p, l)),
        (n, n).prop_map(|(a, b)| Mutation::SwapChars(a, b)),
        n.prop_map(Mutation::DeleteToken),
        (n, n).prop_map(|(p, t)| Mutation::InsertToken(p, t)),
        n.prop_map(Mutation::DuplicateToken),
        (n, n).prop_map(|(a, b)| Mutation::SwapTokens(a, b)),
        (n, n).prop_map(|(a, b)| Mutation::ReplaceIdent(a, b)),
        n.prop_map(Mutation::Truncate),
    ]
}

/// Split into tokens: identifier/number runs, whitespace runs, single other chars.
fn tokens(s: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let class = |c: char| {
        if c.is_alphanumeric() || c == '_' {
            0
        } else if c.is_whitespace() {
            1
        } else {
            2
        }
    };
    for c in s.chars() {
        match out.last_mut() {
            Some(last) if class(c) != 2 && last.chars().last().map(class) == Some(class(c)) => {
                last.push(c)
            }
            _ => out.push(c.to_string()),
        }
    }
    out
}

fn is_ident(t: &str) -> bool {
    t.chars()
        .next()
        .is_some_and(|c| c.is_alphabetic() || c == '_')
}

fn apply(text: &str, m: &Mutation) -> String {
    let mut chars: Vec<char> = text.chars().collect();
    let mut toks = tokens(text);
    let nc = chars.len();
    let nt = toks.len();
    match m {
        Mutation::DeleteChar(p) if nc > 0 => {
            chars.remove(p % nc);
        }
        Mutation::InsertChar(p, c) | Mutation::InsertRandomChar(p, c) => {
            chars.insert(p % (nc + 1), *c)
        }
        Mutation::DuplicateChars(p, l) if nc > 0 => {
            let s = p % nc;
            let e = (s + l).min(nc);
            let dup: Vec<char> = chars[s..e].to_vec();
            chars.splice(e..e, dup);
        }
        Mutation::SwapChars(a, b) if nc > 0 => chars.swap(a % nc, b % nc),
        Mutation::Truncate(p) => chars.truncate(p % (nc + 1)),
        Mutation::DeleteToken(p) if nt > 0 => {
            toks.remove(p % nt);
            return toks.concat();
        }
        Mutation::InsertToken(p, t) => {
            toks.insert(p % (nt + 1), TOKENS[t % TOKENS.len()].to_string());
            return toks.concat();
        }
        Mutation::DuplicateToken(p) if nt > 0 => {
            let t = toks[p % nt].clone();
            toks.insert(p % nt, t);
            return toks.concat();
        }
        Mutation::SwapTokens(a, b) if nt > 0 => {
            toks.swap(a % nt, b % nt);
            return toks.concat();
        }
        Mutation::ReplaceIdent(p, r) => {
            let idents: Vec<usize> = (0..nt).filter(|&i| is_ident(&toks[i])).collect();
            if !idents.is_empty() {
                toks[idents[p % idents.len()]] = IDENTS[r % IDENTS.len()].to_string();
            }
            return toks.concat();
        }
        _ => {}
    }
    chars.into_iter().collect()
}

/// Every seed: the shipped spec files and the inline ones.
fn seeds() -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (file, text) in tdl::shipped_sources().expect("the shipped specs") {
        let name = file.rsplit('/').next().unwrap_or(&file).to_string();
        out.push((name, text));
    }
    for (i, s) in INLINE.iter().enumerate() {
        out.push((format!("inline{i}.tdl"), s.to_string()));
    }
    out
}

/// Check one text both alone and inside a library; render everything.
fn exercise(name: &str, text: &str, others: &[(String, String)]) {
    if let Err(d) = tdl::parse_file(name, text) {
        assert!(!d.errors.is_empty(), "an error without diagnostics");
        validate(&d, name, text);
    }
    let mut files = others.to_vec();
    files.push((name.to_string(), text.to_string()));
    if let Err(d) = tdl::Library::from_sources(&files) {
        assert!(!d.errors.is_empty(), "an error without diagnostics");
        for e in &d.errors {
            let src = files
                .iter()
                .find(|(n, _)| *n == e.file)
                .map(|(_, t)| t.as_str());
            let src = src.unwrap_or_else(|| panic!("diagnostic names unknown file `{}`", e.file));
            validate(
                &tdl::Diagnostics {
                    errors: vec![e.clone()],
                },
                &e.file,
                src,
            );
        }
        let _ = d.render();
    }
}

fn validate(d: &tdl::Diagnostics, name: &str, text: &str) {
    let rendered = d.render();
    let _ = format!("{d}{d:?}");
    for e in &d.errors {
        let (off, len) = (e.span.offset(), e.span.len());
        assert!(
            off + len <= text.len(),
            "span {off}+{len} outside the {}-byte text",
            text.len()
        );
        assert!(
            text.is_char_boundary(off) && text.is_char_boundary(off + len),
            "span splits a char"
        );
        let lines = text[..off].matches('\n').count() + 1;
        assert_eq!(e.line, lines, "line of `{}`", e.message);
        assert!(
            rendered.contains(&format!("{name}:{}:{}", e.line, e.column)),
            "header missing"
        );
        let _ = e.render();
    }
}

fn config() -> Config {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(512);
    Config {
        cases,
        ..Config::default()
    }
}

proptest! {
    #![proptest_config(config())]

    /// Random mutations of a random seed never panic.
    #[test]
    fn mutated_specs_never_panic(
        seed in any::<prop::sample::Index>(),
        muts in prop::collection::vec(mutation(), 1..8),
    ) {
        let seeds = seeds();
        let (name, text) = seed.get(&seeds).clone();
        let mut text = text;
        for m in &muts {
            text = apply(&text, m);
        }
        let others: Vec<(String, String)> = seeds.iter().filter(|(n, _)| *n != name).cloned().collect();
        exercise(&name, &text, &others);
    }

    /// Arbitrary text (mostly TDL-ish characters) never panics.
    #[test]
    fn arbitrary_text_never_panics(
        toks in prop::collection::vec(
            prop_oneof![
                prop::sample::select(TOKENS).prop_map(str::to_string),
                prop::sample::select(IDENTS).prop_map(str::to_string),
                any::<char>().prop_map(|c| c.to_string()),
            ],
            0..80,
        ),
    ) {
        let text = toks.join(" ");
        exercise("arbitrary.tdl", &text, &[]);
    }
}

/// Every prefix and every one-character deletion of the inline seeds.
#[test]
fn every_prefix_and_deletion_of_inline_seeds() {
    for (i, seed) in INLINE.iter().enumerate() {
        let name = format!("inline{i}.tdl");
        let chars: Vec<char> = seed.chars().collect();
        for cut in 0..=chars.len() {
            let prefix: String = chars[..cut].iter().collect();
            exercise(&name, &prefix, &[]);
            let mut del = chars.clone();
            if cut < del.len() {
                del.remove(cut);
                exercise(&name, &del.iter().collect::<String>(), &[]);
            }
        }
    }
}

/// The seeds themselves are valid (otherwise the fuzzing tests little).
#[test]
fn inline_seeds_are_valid() {
    for (i, s) in INLINE.iter().enumerate() {
        if let Err(d) = tdl::parse_file(&format!("inline{i}.tdl"), s) {
            panic!("{}", d.render());
        }
    }
}

/// Deep nesting is reported, not a stack overflow, even on a 2 MiB stack
/// (the default for spawned threads; debug builds have the largest frames).
#[test]
fn deeply_nested_expression_does_not_overflow() {
    for depth in [30usize, 62, 63, 64, 65, 2_000, 200_000] {
        let text = format!(
            "/// Deep.\nop deep(x[N]) -> y[N] {{\n    y[i] = {}x[i]{};\n}}\n",
            "(".repeat(depth),
            ")".repeat(depth)
        );
        let name = format!("deep{depth}.tdl");
        let handle = std::thread::Builder::new()
            .stack_size(2 << 20)
            .spawn(move || {
                let _ = tdl::parse_file(&name, &text).map_err(|d| d.render());
            })
            .unwrap();
        handle
            .join()
            .unwrap_or_else(|_| panic!("depth {depth} panicked"));
    }
}
