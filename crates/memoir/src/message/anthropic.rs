//! Conversion between [`crate::message::Message`] and the Anthropic messages shape.
