//! `memoir ui`: the store's sessions in a local web view
//! (`memoir_server::ui`), on 127.0.0.1 with a per-run token in the URL it
//! prints. Behind the cargo feature `ui`; a build without it names the
//! feature (`exit::missing_feature`).

use std::process::ExitCode;

use super::store::StoreArgs;

/// Arguments of `memoir ui`.
#[derive(clap::Args)]
pub struct Args {
    /// Port on 127.0.0.1 (default: any free port).
    #[arg(long, default_value_t = 0)]
    pub port: u16,
    /// Open the URL in the default browser.
    #[arg(long)]
    pub open: bool,
    #[command(flatten)]
    pub store: StoreArgs,
}

/// Run `memoir ui` until Ctrl-C or SIGTERM.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    use anyhow::Context as _;
    use memoir::store::file::FileStore;
    use memoir::store::Durability;
    use memoir_server::ui;

    let resolved = args.store.resolve()?;
    if !resolved.dir.is_dir() {
        return Err(crate::exit::CliError::NotFoundIn {
            what: "no session store".into(),
            store: resolved.dir.display().to_string(),
        }
        .into());
    }
    let store = std::sync::Arc::new(FileStore::new(&resolved.dir, Durability::Fsync));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the runtime")?;
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", args.port))
            .await
            .with_context(|| format!("listening on 127.0.0.1:{}", args.port))?;
        let port = listener.local_addr()?.port();
        let token = ui::new_token();
        let url = ui::start_url(port, &token);
        crate::outln!("{url}");
        eprintln!(
            "memoir ui: {} on http://127.0.0.1:{port}/ (open the URL above: it carries this run's token); Ctrl-C stops",
            resolved.dir.display()
        );
        if args.open {
            open_browser(&url);
        }
        let config = ui::UiConfig {
            store,
            token,
            port,
            home: memoir::paths::memoir_home().ok(),
        };
        ui::serve(listener, config, memoir_server::shutdown_signal()).await?;
        anyhow::Ok(())
    })?;
    Ok(ExitCode::SUCCESS)
}

/// Ask the desktop to open `url`; a failure is reported, not fatal.
fn open_browser(url: &str) {
    let opener = if cfg!(target_os = "macos") {
        "open"
    } else {
        "xdg-open"
    };
    if let Err(e) = std::process::Command::new(opener)
        .arg(url)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
    {
        eprintln!("memoir ui: could not start {opener} ({e}); open the URL yourself");
    }
}
