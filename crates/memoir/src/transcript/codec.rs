//! Compatibility path for the line codec, which moved below both the store and
//! the transcript: framing on bytes in [`crate::frame`], typed lines in
//! [`crate::store::line`]. New code should use those directly.

pub use crate::frame::{hash_bytes, hex, Hash, LineError, HASH_LEN, RESERVED_KEYS, ZERO_HASH};
pub use crate::store::line::{decode, encode_into, Decoded};
