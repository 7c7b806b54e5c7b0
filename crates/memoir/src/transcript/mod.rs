//! The per-session transcript log.
