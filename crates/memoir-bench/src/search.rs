//! The cross-session search benchmark (issue 13) lives with the library, in
//! `crates/memoir/benches/search.rs` (it shares the integration tests'
//! corpus generator); this entry runs it through cargo so that
//! `memoir-bench all` covers it too.
//!
//! ```text
//! cargo run --release -p memoir-bench -- search [--sessions N] [--messages M] [--queries Q]
//! ```
//!
//! The arguments go to the bench unchanged. cargo is `$CARGO` (set by
//! `cargo run`), else `cargo` on the `PATH`; the bench is built in the
//! `bench` profile (optimised) the first time.

use std::process::Command;

/// Run this benchmark (`memoir-bench search ...`).
pub fn main() {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let manifest = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../memoir/Cargo.toml");
    let pass: Vec<String> = crate::args().skip(1).collect();
    println!(
        "## search: cargo bench -p memoir --features search --bench search -- {}",
        pass.join(" ")
    );
    let status = Command::new(cargo)
        .arg("bench")
        .arg("--quiet")
        .arg("--manifest-path")
        .arg(&manifest)
        .args(["--features", "search", "--bench", "search", "--"])
        .args(&pass)
        .status();
    match status {
        Ok(s) if s.success() => {}
        Ok(s) => {
            eprintln!("search bench failed: {s}");
            std::process::exit(1);
        }
        Err(e) => {
            eprintln!("search bench not run (cargo: {e})");
            std::process::exit(1);
        }
    }
}
