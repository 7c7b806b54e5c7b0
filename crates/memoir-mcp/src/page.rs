//! Bounded, cursor-paginated results: a [`Page`] of at most `limit` items
//! starting at a cursor, cut further when the items would exceed
//! [`MAX_RESULT_BYTES`] of JSON, with `truncated`, `next_cursor` and a note
//! telling the model how to ask for more.

use serde_json::{json, Value};

use crate::error::ToolError;

/// Most bytes of JSON the items of one result may take.
pub const MAX_RESULT_BYTES: usize = 32 * 1024;

/// Where a page starts and how long it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Page {
    /// Items skipped (from the cursor).
    pub offset: usize,
    /// Most items returned.
    pub limit: usize,
}

/// Cursors are `o<offset>`: opaque to the client, checked on the way in.
fn parse_cursor(cursor: &str) -> Result<usize, ToolError> {
    cursor
        .strip_prefix('o')
        .and_then(|n| n.parse::<usize>().ok())
        .filter(|&n| n <= 1_000_000)
        .ok_or_else(|| {
            ToolError::invalid(format!("{cursor:?} is not a cursor from a previous result"))
        })
}

/// The offset a cursor names, unbounded (a byte offset into a resource).
pub fn offset_of(cursor: &str) -> Result<usize, ToolError> {
    cursor
        .strip_prefix('o')
        .and_then(|n| n.parse::<usize>().ok())
        .ok_or_else(|| {
            ToolError::invalid(format!("{cursor:?} is not a cursor from a previous result"))
        })
}

/// The cursor of the page starting at `offset`.
pub fn cursor_at(offset: usize) -> String {
    format!("o{offset}")
}

impl Page {
    /// The page a call asks for: `limit` (default `default`, at most `max`)
    /// items from `cursor` on.
    pub fn new(
        limit: Option<usize>,
        default: usize,
        max: usize,
        cursor: Option<&str>,
    ) -> Result<Page, ToolError> {
        let limit = limit.unwrap_or(default);
        if limit == 0 || limit > max {
            return Err(ToolError::invalid(format!("limit must be 1 to {max}")));
        }
        let offset = cursor.map(parse_cursor).transpose()?.unwrap_or(0);
        Ok(Page { offset, limit })
    }

    /// One past the last item of the page.
    pub fn end(&self) -> usize {
        self.offset + self.limit
    }

    /// `{<key>: [...], truncated, next_cursor, note?}` from the page's items
    /// (`more`: items exist after them), cut at [`MAX_RESULT_BYTES`].
    pub fn shape(&self, key: &str, items: impl Iterator<Item = Value>, more: bool) -> Value {
        let mut out = Vec::new();
        let mut bytes = 0;
        let mut cut = false;
        for item in items {
            let size = item.to_string().len();
            if bytes + size > MAX_RESULT_BYTES && !out.is_empty() {
                cut = true;
                break;
            }
            bytes += size;
            out.push(item);
        }
        let truncated = cut || more;
        let next = truncated.then(|| cursor_at(self.offset + out.len()));
        let mut v = json!({ key: out, "truncated": truncated, "next_cursor": next });
        if let Some(c) = &next {
            v["note"] = json!(format!("truncated, ask for more with cursor {c}"));
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_cut_and_point_at_the_rest() {
        let p = Page::new(Some(3), 10, 50, Some("o2")).unwrap();
        let v = p.shape("xs", (0..3).map(|i| json!(i)), true);
        assert_eq!(v["xs"], json!([0, 1, 2]));
        assert_eq!(v["next_cursor"], "o5");
        assert!(v["note"].as_str().unwrap().contains("cursor o5"));
        let last = p.shape("xs", (0..2).map(|i| json!(i)), false);
        assert_eq!(last["truncated"], false);
        assert!(last["next_cursor"].is_null());
        let big = "x".repeat(MAX_RESULT_BYTES / 2);
        let v =
            Page::new(None, 10, 50, None)
                .unwrap()
                .shape("xs", (0..5).map(|_| json!(big)), false);
        assert_eq!(v["xs"].as_array().unwrap().len(), 1);
        assert_eq!(v["next_cursor"], "o1");
        for bad in ["", "5", "o-1", "ox", "o99999999"] {
            assert!(Page::new(None, 10, 50, Some(bad)).is_err(), "{bad}");
        }
        assert!(Page::new(Some(0), 10, 50, None).is_err());
        assert!(Page::new(Some(51), 10, 50, None).is_err());
    }
}
