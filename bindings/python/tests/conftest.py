"""Shared fixtures: every test gets its own store directory (never the
user's real store)."""

from __future__ import annotations

import pytest

import memoir


@pytest.fixture
def store_dir(tmp_path):
    """An empty directory for a file store."""
    d = tmp_path / "store"
    d.mkdir()
    return d


@pytest.fixture
def store(store_dir):
    """A file store at the default (fsync) durability."""
    return memoir.Store.open(str(store_dir))
