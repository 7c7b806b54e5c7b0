//! Manager conformance (filled below).
