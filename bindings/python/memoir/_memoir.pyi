"""Type stubs of the native module memoir._memoir (see bindings/python/API.md)."""

import builtins
from typing import Any

__version__: str

Json = Any
"""A JSON-compatible value: dict[str, Json] | list[Json] | str | int | float | bool | None."""

SeqRange = tuple[int, int] | None

class MemoirError(Exception):
    """Base class of every error memoir raises (bare for internal I/O failures)."""

class InvalidInputError(MemoirError):
    """The caller's input is wrong: a bad id, an empty or ambiguous prefix, a malformed value."""

class NotFoundError(MemoirError):
    """No such session (or it was deleted)."""

class ConflictError(MemoirError):
    """The id is taken, another writer won a race (expected_seq), or the session is in the trash."""

class UnavailableError(MemoirError):
    """The backend cannot be reached now; retrying later may work."""

class UnsupportedError(MemoirError):
    """The backend (or this build) cannot do this at all."""

class CorruptError(MemoirError):
    """Stored data did not verify."""

class Store:
    """A memoir store and the sessions in it. Thread-safe; every call releases the GIL."""

    @staticmethod
    def open(location: str, token: str | None = None, durability: str = "fsync") -> Store:
        """Open a directory (file store), an http(s):// `memoir serve`, or postgres:// (when built with it)."""
    @staticmethod
    def memory() -> Store:
        """A store in memory, for tests."""
    @property
    def location(self) -> str: ...
    @property
    def durability(self) -> str:
        """`fsync`, `flush` or `none`."""
    def create(self, title: str | None = None, meta: dict[str, Json] | None = None, id: str | None = None) -> str:
        """Create a session; returns its id."""
    def append(self, session: str, messages: list[dict[str, Json]], expected_seq: int | None = None) -> SeqRange:
        """Append messages as one atomic batch."""
    def append_records(self, session: str, records: list[dict[str, Json]], expected_seq: int | None = None) -> SeqRange:
        """Append raw records (each with a "record" kind) as one atomic batch."""
    def load(self, session: str) -> tuple[list[dict[str, Json]], dict[str, Json]]:
        """(messages, report): a fork's prefix stitched in; the report says what did not verify."""
    def records(self, session: str, kinds: list[str] | None = None) -> tuple[list[dict[str, Json]], dict[str, Json]]:
        """(records, report): the session's own verified records, each with "record" and "seq"."""
    def header(self, session: str) -> dict[str, Json]:
        """The session's header."""
    def fork(
        self,
        session: str,
        at_seq: int | None = None,
        messages: int | None = None,
        id: str | None = None,
        title: str | None = None,
    ) -> str:
        """Fork by reference; returns the child's id."""
    def fork_state(
        self,
        session: str,
        at_seq: int | None = None,
        id: str | None = None,
        title: str | None = None,
        source: dict[str, Json] | None = None,
    ) -> str:
        """Fork the session as it was at record at_seq (later rewrites ignored), by reference; returns the child's id."""
    def revisions(self, session: str) -> list[dict[str, Json]]:
        """The states the session's rewrites replaced, oldest first: {rewrite_seq, seq, messages, after}."""
    def rewrite(self, session: str, messages: list[dict[str, Json]], expected_seq: int | None = None) -> SeqRange:
        """Replace the current messages (history kept in the log)."""
    def checkpoint(self, session: str, value: Json, expected_seq: int | None = None) -> int:
        """Record an opaque checkpoint value; returns its seq."""
    def rename(self, session: str, title: str) -> int:
        """Rename; returns the title record's seq."""
    def list(self, trash: bool = False) -> list[dict[str, Json]]:
        """Index entries of the live sessions (or of the trash), newest activity first."""
    def find(self, prefix: str) -> str:
        """The one live session id starting with prefix."""
    def delete(self, session: str) -> bool:
        """Move to the trash; False when there was no such live session."""
    def restore(self, session: str) -> dict[str, Json]:
        """Bring back from the trash; returns the index entry."""
    def purge(self, session: str) -> None:
        """Erase a trashed session for good."""
    def search(
        self,
        query: str,
        k: int = 10,
        mode: str = "hybrid",
        session: str | None = None,
        agent: str | None = None,
        project: str | None = None,
        update: bool = True,
    ) -> builtins.list[dict[str, Json]]:
        """Search every session of a directory store (its index caught up first unless update=False)."""
    def recall(self, session: str, query: str, token_budget: int = 1000) -> dict[str, Json]:
        """A token-budgeted graft block of the turns most relevant to query."""
