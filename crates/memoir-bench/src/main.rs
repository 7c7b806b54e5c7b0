//! `memoir-bench`: run one of memoir's benchmarks, or all of them.
//!
//! ```text
//! cargo run --release -p memoir-bench -- transcript|manager|embed|view|load|locomo|search|catchup|history|ui [ARGS]
//! cargo run --release -p memoir-bench -- all [--quick]
//! ```
//!
//! `all` runs each benchmark in its own child process (so one that fails or
//! needs a missing peer does not stop the others) and ends non-zero when any
//! failed; `--quick` passes small sizes. It prints each benchmark's wall
//! time and the total at the end (the `--quick` run is meant to stay under
//! ten minutes).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::{Command, ExitCode};

/// The `memoir` binary's allocator (its peers measured in this process run
/// on it too).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn usage() -> ExitCode {
    let names: Vec<&str> = memoir_bench::BENCHES.iter().map(|(n, _)| *n).collect();
    eprintln!(
        "usage: memoir-bench <{}> [ARGS]\n       memoir-bench all [--quick]",
        names.join("|")
    );
    ExitCode::from(2)
}

fn run_all(quick: bool) -> ExitCode {
    let exe = match std::env::current_exe() {
        Ok(e) => e,
        Err(e) => {
            eprintln!("memoir-bench: cannot find my own executable: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut failed = Vec::new();
    let mut times = Vec::new();
    let started = std::time::Instant::now();
    for (name, _) in memoir_bench::BENCHES {
        let t = std::time::Instant::now();
        println!(
            "\n# memoir-bench {name}{}\n",
            if quick { " (quick)" } else { "" }
        );
        let mut cmd = Command::new(&exe);
        cmd.arg(name);
        if quick {
            let (args, env) = memoir_bench::quick(name);
            cmd.args(args).envs(env);
        }
        match cmd.status() {
            Ok(s) if s.success() => {}
            Ok(s) => failed.push(format!("{name} ({s})")),
            Err(e) => failed.push(format!("{name} ({e})")),
        }
        times.push(format!("{name} {:.0} s", t.elapsed().as_secs_f64()));
    }
    println!(
        "\n# memoir-bench all{}: {:.0} s in total ({})",
        if quick { " --quick" } else { "" },
        started.elapsed().as_secs_f64(),
        times.join(", ")
    );
    if failed.is_empty() {
        ExitCode::SUCCESS
    } else {
        eprintln!("memoir-bench: failed: {}", failed.join(", "));
        ExitCode::FAILURE
    }
}

fn main() -> ExitCode {
    let mut args = std::env::args();
    let program = args.next().unwrap_or_else(|| "memoir-bench".into());
    let Some(sub) = args.next() else {
        return usage();
    };
    let rest: Vec<String> = args.collect();
    if sub == memoir_bench::history::TRAMPOLINE {
        return memoir_bench::history::trampoline(&rest);
    }
    if sub == "all" {
        return run_all(rest.iter().any(|a| a == "--quick"));
    }
    let Some((_, bench)) = memoir_bench::BENCHES.iter().find(|(n, _)| *n == sub) else {
        return usage();
    };
    memoir_bench::set_args(std::iter::once(program).chain(rest).collect());
    // Children measured with `history::measure` are forked by a fresh
    // `memoir-bench` process, never by this one (whose RSS high-water mark
    // they would inherit).
    if let Ok(exe) = std::env::current_exe() {
        memoir_bench::history::set_trampoline(exe);
    }
    bench();
    ExitCode::SUCCESS
}
