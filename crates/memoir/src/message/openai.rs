//! Conversion between [`crate::message::Message`] and the OpenAI chat-completions shape.
