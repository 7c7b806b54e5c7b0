"""The Python guide's snippets (docs/PYTHON.md) run as written (in a scratch directory)."""

from __future__ import annotations

import os
import re
from pathlib import Path

README = Path(__file__).resolve().parents[3] / "docs" / "PYTHON.md"


def python_blocks():
    return re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)


def test_readme_python_snippets_run(tmp_path, capsys):
    blocks = python_blocks()
    assert len(blocks) == 4
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        for code in blocks:
            exec(compile(code, str(README), "exec"), {"__name__": "__readme__"})
    finally:
        os.chdir(cwd)
    out = capsys.readouterr().out
    assert "in vault" in out and "9d1c7f4e" in out
    assert "[{'role': 'user', 'content': 'hi'}] [{'role': 'user', 'content': 'hi'}, {'role': 'assistant'" in out
    assert "{'value': 42}" in out
