//! Storage backends for transcripts.
