//! Write a graph-only LLaMA-like decoder (see `onnx::synth`) to an `.onnx`
//! file, its weights as external data that is never written:
//!
//! ```text
//! cargo run -p tofu-onnx --example decoder -- /tmp/llama7b.onnx [LAYERS]
//! tofu plan /tmp/llama7b.onnx --input-shape input_ids=1,2048 -k 8
//! ```

fn main() {
    let mut args = std::env::args().skip(1);
    let Some(path) = args.next() else {
        eprintln!("usage: decoder OUT.onnx [LAYERS]");
        std::process::exit(2);
    };
    let mut cfg = onnx::synth::DecoderConfig::llama_7b();
    if let Some(l) = args.next() {
        match l.parse() {
            Ok(l) => cfg.layers = l,
            Err(_) => {
                eprintln!("LAYERS must be a number, got `{l}`");
                std::process::exit(2);
            }
        }
    }
    let bytes = onnx::synth::to_bytes(&onnx::synth::decoder(&cfg));
    if let Err(e) = std::fs::write(&path, &bytes) {
        eprintln!("cannot write {path}: {e}");
        std::process::exit(1);
    }
    println!(
        "wrote {path}: {} bytes, {} parameters (external data `{}` not written)",
        bytes.len(),
        cfg.parameters(),
        cfg.data_file
    );
}
