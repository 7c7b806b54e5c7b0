#!/usr/bin/env bash
# The Python package, tested like a Python user: build the abi3
# wheel with maturin (lean core features: no PostgreSQL, MiniLM or search),
# install it into a fresh venv with the SDKs it adapts (pinned), and run
# pytest over bindings/python/tests/ (the SDKs' conformance suites and ours).
# Called from .ci/run after the Rust tests. Usage: .ci/python.sh
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON="${PYTHON:-python3}"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

"$PYTHON" -m venv "$WORK/venv"
VENV_PY="$WORK/venv/bin/python"
PIP=("$VENV_PY" -m pip install --quiet --disable-pip-version-check)

# Build tools and the SDKs, pinned (bindings/python/pyproject.toml lists the
# same packages as extras, unpinned).
"${PIP[@]}" \
  maturin==1.16.0 \
  pytest==9.2.0 \
  pytest-asyncio==1.5.0 \
  claude-agent-sdk==0.2.184 \
  openai-agents==0.24.0 \
  langgraph==1.2.22 \
  langgraph-checkpoint-conformance==0.0.2 langgraph-checkpoint-sqlite==3.1.2

# The wheel, built once (release: the tests and benchmarks run optimised code).
"$WORK/venv/bin/maturin" build --release --quiet \
  --manifest-path bindings/python/Cargo.toml --out "$WORK/dist"
"${PIP[@]}" --no-deps "$WORK"/dist/memoir-*.whl

# Import from the installed wheel, not from the source tree.
cd "$WORK"
"$VENV_PY" -c 'import memoir, memoir.claude_agent_sdk; print("memoir", memoir.__version__, "from", memoir.__file__)'
"$VENV_PY" -m pytest -q -p no:cacheprovider \
  -c "$OLDPWD/bindings/python/pyproject.toml" --rootdir "$OLDPWD/bindings/python" \
  "$OLDPWD/bindings/python/tests"
