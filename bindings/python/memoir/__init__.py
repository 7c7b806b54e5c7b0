"""memoir: durable, forkable, searchable session memory for LLM agents.

The native core (``memoir._memoir``, the Rust library through PyO3) is
re-exported here: :class:`Store` and the exception hierarchy rooted at
:class:`MemoirError`. The SDK adapters live in submodules:
``memoir.claude_agent_sdk`` (the Claude Agent SDK ``SessionStore``).
"""

from ._memoir import (
    ConflictError,
    CorruptError,
    InvalidInputError,
    MemoirError,
    NotFoundError,
    Store,
    UnavailableError,
    UnsupportedError,
    __version__,
)

__all__ = [
    "Store",
    "MemoirError",
    "InvalidInputError",
    "NotFoundError",
    "ConflictError",
    "UnavailableError",
    "UnsupportedError",
    "CorruptError",
    "__version__",
]
