"""Fixtures for the memoir mcp tests with the official Python client.

Everything runs against the real `memoir` binary ($MEMOIR_BIN, else
target/debug/memoir of the workspace) in temporary stores; nothing reads the
user's home or store ($HOME and $MEMOIR_HOME point into the test's tmp dir).
"""

import json
import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[4]


def memoir_bin() -> str:
    env = os.environ.get("MEMOIR_BIN")
    if env:
        return env
    target = Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target"))
    return str(target / "debug" / "memoir")


@pytest.fixture(scope="session")
def binary() -> str:
    path = memoir_bin()
    if not Path(path).is_file():
        pytest.fail(f"memoir binary not found at {path}: build it (cargo build -p memoir-cli) or set MEMOIR_BIN")
    return path


class Store:
    """A temporary shared session store with two projects, A and B."""

    def __init__(self, root: Path, binary: str):
        self.root = root
        self.binary = binary
        self.home = root / "home"
        self.dir = root / "store"
        self.a = root / "proj-a"
        self.b = root / "proj-b"
        for d in (self.home, self.dir, self.a, self.b):
            d.mkdir(parents=True, exist_ok=True)
        self.a = self.a.resolve()
        self.b = self.b.resolve()

    def env(self) -> dict:
        env = {k: v for k, v in os.environ.items() if not k.startswith("MEMOIR_")}
        env["HOME"] = str(self.home)
        env["MEMOIR_HOME"] = str(self.home / ".memoir")
        env["NO_COLOR"] = "1"
        return env

    def new_session(self, project: Path, task: str, title: str | None = None) -> str:
        args = [self.binary, "sessions", "new", task, "--dir", str(self.dir), "--json"]
        if title:
            args += ["--title", title]
        out = subprocess.run(args, cwd=project, env=self.env(), capture_output=True, text=True, check=True)
        return json.loads(out.stdout)["id"]

    def server_args(self, project: Path, *extra: str) -> list:
        return ["mcp", "--dir", str(self.dir), "--project", str(project), *extra]


@pytest.fixture()
def store(tmp_path: Path, binary: str) -> Store:
    return Store(tmp_path, binary)
