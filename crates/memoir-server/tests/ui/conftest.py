"""Fixtures of the web view's browser tests: a temp store with a small
realistic history, one `memoir ui` process over it, and Chromium (the
system's, through Playwright) with a directory for screenshots.

Environment: MEMOIR_BIN (the memoir binary), CHROMIUM (default
/usr/bin/chromium), AXE_JS (axe-core's axe.min.js), UI_ARTEFACTS (where
screenshots go; default a new temp directory, printed)."""

import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile

import pytest

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[3]
sys.path.insert(0, str(HERE))

import make_history  # noqa: E402


def memoir_bin():
    explicit = os.environ.get("MEMOIR_BIN")
    if explicit:
        return explicit
    target = os.environ.get("CARGO_TARGET_DIR", str(ROOT / "target"))
    return str(pathlib.Path(target) / "debug" / "memoir")


@pytest.fixture(scope="session")
def workdir():
    d = tempfile.mkdtemp(prefix="memoir-ui-test-")
    yield pathlib.Path(d)
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="session")
def env(workdir):
    e = dict(os.environ)
    e["HOME"] = str(workdir / "home")
    e["MEMOIR_HOME"] = str(workdir / "home" / ".memoir")
    for k in ("MEMOIR_SESSION_DIR", "MEMOIR_STORE", "MEMOIR_REMOTE", "MEMOIR_TOKEN"):
        e.pop(k, None)
    (workdir / "home").mkdir(exist_ok=True)
    return e


@pytest.fixture(scope="session")
def store(workdir, env):
    """A store holding the repository's real Claude Code and Codex fixtures
    and the generated editing session."""
    store = workdir / "store"
    generated = workdir / "generated"
    make_history.main(generated)
    sources = [
        str(generated),
        str(ROOT / "testdata" / "transcripts" / "claude-code"),
        str(ROOT / "testdata" / "transcripts" / "codex"),
    ]
    subprocess.run(
        [memoir_bin(), "import", *sources, "--dir", str(store)],
        env=env,
        check=True,
        capture_output=True,
        cwd=workdir,
    )
    return store


class Server:
    def __init__(self, proc, url):
        self.proc = proc
        self.url = url
        m = re.match(r"http://127\.0\.0\.1:(\d+)/\?token=([0-9a-f]+)$", url)
        assert m, url
        self.port = int(m.group(1))
        self.token = m.group(2)
        self.base = f"http://127.0.0.1:{self.port}"


@pytest.fixture(scope="session")
def server(store, env, workdir):
    proc = subprocess.Popen(
        [memoir_bin(), "ui", "--dir", str(store)],
        env=env,
        cwd=workdir,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    url = proc.stdout.readline().strip()
    if not url:
        proc.kill()
        raise RuntimeError("memoir ui printed no URL: " + proc.stderr.read())
    yield Server(proc, url)
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()


@pytest.fixture(scope="session")
def artefacts():
    d = os.environ.get("UI_ARTEFACTS") or tempfile.mkdtemp(prefix="memoir-ui-shots-")
    path = pathlib.Path(d)
    path.mkdir(parents=True, exist_ok=True)
    print(f"\nmemoir ui screenshots: {path}", file=sys.stderr)
    return path


@pytest.fixture(scope="session")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(
            executable_path=os.environ.get("CHROMIUM", "/usr/bin/chromium"),
            headless=True,
            args=["--no-sandbox"],
        )
        yield b
        b.close()


@pytest.fixture()
def page(browser, server):
    """A page logged in through the printed URL, recording every request
    and every console message (CSP violations land there)."""
    ctx = browser.new_context(viewport={"width": 1400, "height": 900})
    pg = ctx.new_page()
    pg.requests_seen = []
    pg.console_seen = []
    pg.on("request", lambda r: pg.requests_seen.append(r.url))
    pg.on("console", lambda m: pg.console_seen.append(m.text))
    pg.goto(server.url)
    yield pg
    ctx.close()
