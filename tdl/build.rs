//! Embeds the shipped operator library (`../specs/*.tdl`, the workspace's
//! `specs/` directory) into the crate: writes `$OUT_DIR/shipped_specs.rs`, a
//! sorted list of `("specs/NAME.tdl", include_str!(…))` pairs that
//! `Library::shipped` parses, so a `tofu` binary needs no files at run time.

use std::path::Path;

fn main() {
    let manifest = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let dir = Path::new(&manifest).join("..").join("specs");
    // A directory here makes cargo rerun the script when any file under it
    // changes (a spec added or removed); include_str! tracks each file.
    println!("cargo:rerun-if-changed={}", dir.display());
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot read the shipped specs at {}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "tdl"))
        .collect();
    files.sort();
    let mut out =
        String::from("/// The shipped `.tdl` files: `(\"specs/NAME.tdl\", text)`, sorted.\n");
    out.push_str("pub(crate) static SHIPPED: &[(&str, &str)] = &[\n");
    for f in &files {
        let name = f
            .file_name()
            .and_then(|n| n.to_str())
            .expect("a UTF-8 file name");
        let abs = f.canonicalize().expect("a spec file path");
        out.push_str(&format!(
            "    ({:?}, include_str!({:?})),\n",
            format!("specs/{name}"),
            abs
        ));
    }
    out.push_str("];\n");
    let out_dir = std::env::var("OUT_DIR").expect("cargo sets OUT_DIR");
    std::fs::write(Path::new(&out_dir).join("shipped_specs.rs"), out)
        .expect("write shipped_specs.rs");
}
