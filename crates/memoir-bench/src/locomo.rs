//! LoCoMo retrieval recall, through the library's own
//! harness (`memoir::view::eval`, the one behind `memoir eval locomo`).
//!
//! ```text
//! cargo run --release -p memoir-bench -- locomo [--file PATH] [--embedders hash,minilm,mpnet]
//!     [--modes hybrid,vector,lexical] [--holdout N] [--vector-weight W] [--vector-neighbors N]
//! ```
//!
//! LoCoMo is non-commercial and never copied into the repository: the file
//! is an argument (`--file`, else `$MEMOIR_LOCOMO`, else the synthetic
//! `testdata/locomo-synthetic.json`, whose figures mean nothing). The last
//! `--holdout` conversations (default 2 when the file has at least 4) are
//! reported apart from the others: anything tuned should be tuned on the
//! first part only, and the held-out part shows whether it carries over.
//! The peer is a reference BM25 figure (rank-bm25 over the same dev split)
//! and memoir's own lexical-only mode measured in the same run.

use std::path::{Path, PathBuf};

use memoir::embed::{EmbeddingProvider, HashEmbedder, MiniLm, MiniLmOptions};
use memoir::view::eval::{
    evaluate, load_locomo, CategoryRecall, Conversation, EvalOptions, EvalReport,
};
use memoir::view::{RetrievalMode, ViewConfig};

struct Args {
    file: PathBuf,
    embedders: Vec<String>,
    modes: Vec<RetrievalMode>,
    holdout: Option<usize>,
    vector_weight: Option<f32>,
    vector_neighbors: Option<usize>,
}

fn parse_args() -> Args {
    let synthetic =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/locomo-synthetic.json");
    let mut a = Args {
        file: std::env::var_os("MEMOIR_LOCOMO").map_or(synthetic, PathBuf::from),
        embedders: vec!["hash".into(), "minilm".into()],
        modes: vec![
            RetrievalMode::Hybrid,
            RetrievalMode::Vector,
            RetrievalMode::Lexical,
        ],
        holdout: None,
        vector_weight: None,
        vector_neighbors: None,
    };
    let mut it = crate::args().skip(1);
    while let Some(arg) = it.next() {
        let mut val = || it.next().unwrap_or_default();
        match arg.as_str() {
            "--file" => a.file = PathBuf::from(val()),
            "--embedders" => a.embedders = val().split(',').map(str::to_string).collect(),
            "--modes" => {
                a.modes = val().split(',').filter_map(|m| m.parse().ok()).collect();
            }
            "--holdout" => a.holdout = val().parse().ok(),
            "--vector-weight" => a.vector_weight = val().parse().ok(),
            "--vector-neighbors" => a.vector_neighbors = val().parse().ok(),
            _ => {}
        }
    }
    a
}

fn embedder(name: &str) -> Result<Box<dyn EmbeddingProvider>, String> {
    match name {
        "hash" => Ok(Box::new(HashEmbedder::new(384))),
        "minilm" => MiniLm::discover(&MiniLmOptions::default())
            .map(|m| Box::new(m) as Box<dyn EmbeddingProvider>)
            .map_err(|e| e.to_string()),
        // all-mpnet-base-v2: `$MEMOIR_MPNET_MODEL_DIR`, else where
        // `memoir models install` put it.
        "mpnet" => {
            let dir = std::env::var_os("MEMOIR_MPNET_MODEL_DIR")
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
                .or_else(|| {
                    memoir::embed::models::installed_dir(&memoir::embed::models::MPNET_BASE_V2)
                })
                .ok_or(
                    "all-mpnet-base-v2 is not installed (memoir models install all-mpnet-base-v2)",
                )?;
            MiniLm::load_with(&dir, &MiniLmOptions::default())
                .map(|m| Box::new(m) as Box<dyn EmbeddingProvider>)
                .map_err(|e| e.to_string())
        }
        other => Err(format!("unknown embedder {other}")),
    }
}

fn row(label: &str, r: &EvalReport) {
    let at = |k: usize| r.recall.iter().find(|x| x.0 == k).map_or(0.0, |x| x.1);
    println!(
        "| {label} | {} | {:.3} | {:.3} | **{:.3}** | {:.3} | {:.2} | {:.2} |",
        r.questions,
        at(1),
        at(5),
        at(10),
        at(20),
        r.query_p50_ms,
        r.search_p50_ms
    );
}

fn categories(label: &str, r: &EvalReport) {
    for (cat, n, per_k) in &r.recall_by_category {
        let name = match cat {
            1 => "multi-hop",
            2 => "temporal",
            3 => "open-domain",
            4 => "single-hop",
            _ => "other",
        };
        let cells: Vec<String> = per_k.iter().map(|(_, v)| format!("{v:.3}")).collect();
        println!("| {label} | {cat} {name} | {n} | {} |", cells.join(" | "));
    }
}

/// The question-weighted combination of reports on disjoint conversation
/// sets (what one report over their union would say, latencies aside).
fn combine(parts: &[EvalReport]) -> Option<EvalReport> {
    let biggest = parts.iter().max_by_key(|r| r.questions)?;
    let total: usize = parts.iter().map(|r| r.questions).sum();
    let weighted = |f: &dyn Fn(&EvalReport) -> f64, n: &dyn Fn(&EvalReport) -> usize| {
        let count: usize = parts.iter().map(n).sum();
        parts.iter().map(|r| f(r) * n(r) as f64).sum::<f64>() / count.max(1) as f64
    };
    let recall = biggest
        .recall
        .iter()
        .enumerate()
        .map(|(i, &(k, _))| (k, weighted(&|r| r.recall[i].1, &|r| r.questions)))
        .collect();
    let mut cats: Vec<u32> = parts
        .iter()
        .flat_map(|r| r.recall_by_category.iter().map(|c| c.0))
        .collect();
    cats.sort_unstable();
    cats.dedup();
    let cat_of = |r: &EvalReport, c: u32| r.recall_by_category.iter().find(|x| x.0 == c).cloned();
    let recall_by_category: Vec<CategoryRecall> = cats
        .iter()
        .map(|&c| {
            let n = |r: &EvalReport| cat_of(r, c).map_or(0, |x| x.1);
            let per_k = biggest
                .recall
                .iter()
                .enumerate()
                .map(|(i, &(k, _))| (k, weighted(&|r| cat_of(r, c).map_or(0.0, |x| x.2[i].1), &n)))
                .collect();
            (c, parts.iter().map(n).sum(), per_k)
        })
        .collect();
    Some(EvalReport {
        conversations: parts.iter().map(|r| r.conversations).sum(),
        turns: parts.iter().map(|r| r.turns).sum(),
        questions: total,
        recall,
        recall10_by_category: recall_by_category
            .iter()
            .map(|(c, n, per_k)| {
                (
                    *c,
                    *n,
                    per_k.iter().find(|x| x.0 == 10).map_or(0.0, |x| x.1),
                )
            })
            .collect(),
        recall_by_category,
        index_secs: parts.iter().map(|r| r.index_secs).sum(),
        ..biggest.clone()
    })
}

/// Run this benchmark (`memoir-bench locomo ...`).
pub fn main() {
    let args = parse_args();
    let convs: Vec<Conversation> = match load_locomo(&args.file) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("locomo: cannot read {}: {e}", args.file.display());
            std::process::exit(1);
        }
    };
    let holdout = args
        .holdout
        .unwrap_or(if convs.len() >= 4 { 2 } else { 0 })
        .min(convs.len());
    let (tune, held) = convs.split_at(convs.len() - holdout);
    let ids = |c: &[Conversation]| {
        c.iter()
            .map(|c| c.sample_id.as_str())
            .collect::<Vec<_>>()
            .join(",")
    };
    println!(
        "## locomo: {} ({} conversations: tuning part [{}], held-out part [{}])",
        args.file.display(),
        convs.len(),
        ids(tune),
        ids(held)
    );
    println!(
        "reference (BM25 with rank-bm25, all 5 dev conversations): R@1 0.248, R@5 0.446, \
         R@10 0.526, R@20 0.603; target R@10 >= 0.80 held out"
    );
    println!("| embedder / mode / part | questions | R@1 | R@5 | R@10 | R@20 | query p50 ms | search p50 ms |");
    println!("|---|---|---|---|---|---|---|---|");
    let mut by_cat = Vec::new();
    for name in &args.embedders {
        let e = match embedder(name) {
            Ok(e) => e,
            Err(msg) => {
                println!("{name}: SKIPPED: {msg}");
                continue;
            }
        };
        for &mode in &args.modes {
            if mode == RetrievalMode::Lexical && name != &args.embedders[0] {
                continue; // the lexical side does not depend on the embedder
            }
            let mut opts = EvalOptions {
                mode,
                view: ViewConfig {
                    mode,
                    ..ViewConfig::default()
                },
                ..EvalOptions::default()
            };
            if let Some(w) = args.vector_weight {
                opts.view.hybrid.vector_weight = w;
            }
            if let Some(n) = args.vector_neighbors {
                opts.style.vector_neighbors = n;
            }
            let label = if mode == RetrievalMode::Lexical {
                "bm25 (memoir lexical)".to_string()
            } else {
                format!("{} / {mode}", e.model_id())
            };
            // Each part is indexed once; "all" is their question-weighted
            // combination (latencies: the larger part's).
            let mut parts = Vec::new();
            for (part, set) in [("tuning", tune), ("held-out", held)] {
                if set.is_empty() {
                    continue;
                }
                match evaluate(set, e.as_ref(), &opts) {
                    Ok(r) => {
                        if holdout > 0 {
                            row(&format!("{label} / {part}"), &r);
                        }
                        parts.push(r);
                    }
                    Err(err) => println!("{label} / {part}: FAILED: {err}"),
                }
            }
            if let Some(all) = combine(&parts) {
                row(&format!("{label} / all"), &all);
                by_cat.push((label.clone(), all));
            }
        }
    }
    println!("\nby category (all conversations):\n");
    println!("| embedder / mode | category | questions | R@1 | R@5 | R@10 | R@20 |");
    println!("|---|---|---|---|---|---|---|");
    for (label, r) in &by_cat {
        categories(label, r);
    }
}
