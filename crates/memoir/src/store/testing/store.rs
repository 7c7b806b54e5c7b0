//! Store conformance (filled below).
