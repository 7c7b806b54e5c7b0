//! Snippets: the part of a message around the match, with matched words marked.
//!
//! Words are cut and stemmed exactly as the index cuts them (the view's
//! [`Tokenizer`]), so "running" in the text is marked for a query "run"; a
//! match marks its whole word (the whole identifier `read_file` for a query
//! "file", never `read_` plus a marked part). The window is the one holding
//! the most distinct query terms, the tightest on a tie; it starts and ends
//! at word boundaries where one is near; whitespace runs become one space,
//! control characters `\u{FFFD}`; `…` marks a cut.
//!
//! Plain-text form ([`Snippet::marked`]): matches between [`MARK_OPEN`]
//! and [`MARK_CLOSE`], and every `\`, `[` and `]` of the text itself escaped
//! with a backslash, so a marker never collides with the message's own
//! brackets. `--json` also gives the unescaped `text` and the matches' byte
//! ranges in it (`highlights`).

use std::collections::HashSet;

use serde::ser::SerializeStruct;

use crate::view::lexical::tokenize::identifier_runs;
use crate::view::lexical::Tokenizer;

/// Plain-text marker opening a highlighted match (in [`Snippet::marked`]).
pub const MARK_OPEN: &str = "[[";
/// Plain-text marker closing a highlighted match.
pub const MARK_CLOSE: &str = "]]";

/// Default snippet width, in bytes of the source text.
pub const DEFAULT_WIDTH: usize = 240;

/// At most this many matches are considered when choosing the window.
const MAX_MATCHES: usize = 512;

/// A cut of a message's text with the matched words located.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Snippet {
    /// The text (whitespace collapsed, `…` where cut).
    pub text: String,
    /// Byte ranges of `text` that matched, ascending, non-overlapping.
    pub highlights: Vec<(usize, usize)>,
}

impl Snippet {
    /// The plain-text form: each match between `open` and `close` (e.g.
    /// [`MARK_OPEN`] / [`MARK_CLOSE`]), the text's own `\`, `[` and `]`
    /// escaped with a backslash (see the module doc).
    pub fn marked(&self, open: &str, close: &str) -> String {
        let mut out = String::with_capacity(self.text.len() + self.highlights.len() * 4);
        let mut at = 0;
        for &(s, e) in &self.highlights {
            escape_into(&self.text[at..s], &mut out);
            out.push_str(open);
            escape_into(&self.text[s..e], &mut out);
            out.push_str(close);
            at = e;
        }
        escape_into(&self.text[at..], &mut out);
        out
    }
}

/// `text` with `\`, `[` and `]` escaped by a backslash, appended to `out`.
fn escape_into(text: &str, out: &mut String) {
    for c in text.chars() {
        if matches!(c, '\\' | '[' | ']') {
            out.push('\\');
        }
        out.push(c);
    }
}

/// Serialised as `{"text", "marked" (with the plain-text markers), "highlights"}`.
impl serde::Serialize for Snippet {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut st = s.serialize_struct("Snippet", 3)?;
        st.serialize_field("text", &self.text)?;
        st.serialize_field("marked", &self.marked(MARK_OPEN, MARK_CLOSE))?;
        st.serialize_field("highlights", &self.highlights)?;
        st.end()
    }
}

/// Byte ranges of the words of `text` (identifier runs, as the index cuts
/// them) holding a term of `terms`, with that term.
fn matches<'a>(
    text: &str,
    terms: &'a HashSet<String>,
    tokenizer: &Tokenizer,
) -> Vec<(usize, usize, &'a str)> {
    let mut out = Vec::new();
    let mut found = Vec::new();
    for (s, e) in identifier_runs(text, tokenizer.config().identifiers) {
        found.clear();
        tokenizer.run_terms(&text[s..e], &mut found);
        if let Some(t) = found.iter().find_map(|t| terms.get(t)) {
            out.push((s, e, t.as_str()));
            if out.len() >= MAX_MATCHES {
                break;
            }
        }
    }
    out
}

fn floor_boundary(text: &str, mut i: usize) -> usize {
    i = i.min(text.len());
    while !text.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// Where a window `start..end` should end: `end` itself at the text's end
/// or between two words, else the last whitespace in its final fifth (so
/// a word is not cut), else `end`.
fn word_end(text: &str, start: usize, end: usize) -> usize {
    if end >= text.len() || !text[end..].starts_with(|c: char| !c.is_whitespace()) {
        return end;
    }
    let floor = floor_boundary(text, end - (end - start) / 5).max(start);
    match text[floor..end].rfind(char::is_whitespace) {
        Some(ws) => floor + ws,
        None => end,
    }
}

/// Cut `text` around the best match of `terms` (index terms, as the
/// tokenizer produces them), about `width` bytes wide.
pub fn cut(text: &str, terms: &HashSet<String>, tokenizer: &Tokenizer, width: usize) -> Snippet {
    let found = matches(text, terms, tokenizer);
    // The window starting at the match that covers the most distinct terms,
    // the tightest such cluster on a tie.
    let mut best = (0usize, usize::MAX, 0usize); // (distinct terms, span, match index)
    for (i, &(s, _, _)) in found.iter().enumerate() {
        let mut seen: HashSet<&str> = HashSet::new();
        let mut span = 0;
        for &(_, e2, t) in found[i..].iter().take_while(|m| m.1 <= s + width) {
            if seen.insert(t) {
                span = e2 - s;
            }
        }
        if seen.len() > best.0 || (seen.len() == best.0 && span < best.1) {
            best = (seen.len(), span, i);
        }
    }
    let (start, end) = match found.get(best.2) {
        Some(&(s, _, _)) => {
            let lead = width / 5;
            let mut start = floor_boundary(text, s.saturating_sub(lead));
            // Start at a word boundary when one is near.
            if start > 0 {
                if let Some(ws) = text[start..s].find(char::is_whitespace) {
                    start += ws + 1;
                }
            }
            (
                start,
                word_end(text, start, floor_boundary(text, start + width)),
            )
        }
        None => (0, word_end(text, 0, floor_boundary(text, width))),
    };
    let mut out = Snippet::default();
    if start > 0 {
        out.text.push('…');
    }
    let mut pending = found
        .iter()
        .filter(|m| m.0 >= start && m.1 <= end)
        .peekable();
    let mut open_at: Option<(usize, usize)> = None; // (source end, output start)
    let mut last_space = true;
    for (i, c) in text[start..end].char_indices() {
        let i = i + start;
        if let Some((src_end, out_start)) = open_at {
            if i == src_end {
                out.highlights.push((out_start, out.text.len()));
                open_at = None;
            }
        }
        if let Some(m) = pending.peek() {
            if m.0 == i {
                open_at = Some((m.1, out.text.len()));
                pending.next();
            }
        }
        if c.is_whitespace() {
            if !last_space {
                out.text.push(' ');
            }
            last_space = true;
        } else if c.is_control() {
            out.text.push('\u{FFFD}');
            last_space = false;
        } else {
            out.text.push(c);
            last_space = false;
        }
    }
    if let Some((_, out_start)) = open_at {
        out.highlights.push((out_start, out.text.len()));
    }
    if end < text.len() {
        let trimmed = out.text.trim_end().len();
        out.text.truncate(trimmed);
        out.highlights.retain(|h| h.1 <= trimmed);
        out.text.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::view::lexical::TokenizerConfig;

    #[test]
    fn the_window_holds_the_most_terms_and_stemmed_words_are_marked() {
        let tk = Tokenizer::new(TokenizerConfig::default());
        let terms: HashSet<String> = tk.tokens("running tests").into_iter().collect();
        let filler = "lorem ipsum ".repeat(40);
        let text = format!("a test here. {filler}\n\nthen   we RUN the Tests again. {filler}");
        let s = cut(&text, &terms, &tk, 80);
        assert!(s.text.starts_with('…') && s.text.ends_with('…'), "{s:?}");
        assert!(
            s.marked(MARK_OPEN, MARK_CLOSE)
                .contains("we [[RUN]] the [[Tests]] again"),
            "{}",
            s.marked(MARK_OPEN, MARK_CLOSE)
        );
        let json = serde_json::to_value(&s).unwrap();
        assert_eq!(json["highlights"].as_array().unwrap().len(), 2);
        let none = cut("nothing to see", &terms, &tk, 80);
        assert_eq!(none.text, "nothing to see");
        assert!(none.highlights.is_empty());
    }

    #[test]
    fn brackets_of_the_text_never_collide_with_the_markers() {
        let tk = Tokenizer::new(TokenizerConfig::code());
        let terms: HashSet<String> = tk.tokens("matrix").into_iter().collect();
        let s = cut("let m = [[matrix]] and x[[0]]\\n", &terms, &tk, 80);
        let marked = s.marked(MARK_OPEN, MARK_CLOSE);
        assert_eq!(
            marked,
            "let m = \\[\\[[[matrix]]\\]\\] and x\\[\\[0\\]\\]\\\\n"
        );
        // Unescaping the text outside the markers gives the text back.
        let mut plain = String::new();
        let unmarked = marked.replace(MARK_OPEN, "").replace(MARK_CLOSE, "");
        let mut it = unmarked.chars();
        while let Some(c) = it.next() {
            plain.push(if c == '\\' { it.next().unwrap() } else { c });
        }
        assert_eq!(plain, s.text);
        assert_eq!(&s.text[s.highlights[0].0..s.highlights[0].1], "matrix");
    }

    #[test]
    fn a_match_marks_its_whole_word_and_the_window_ends_between_words() {
        let tk = Tokenizer::new(TokenizerConfig::code());
        let terms: HashSet<String> = tk.tokens("file").into_iter().collect();
        let s = cut("call read_file(path) then done", &terms, &tk, 80);
        assert_eq!(
            s.marked(MARK_OPEN, MARK_CLOSE),
            "call [[read_file]](path) then done"
        );
        let long = format!("file {}", "alpha beta gamma delta ".repeat(10));
        let s = cut(&long, &terms, &tk, 50);
        assert!(s.text.ends_with('…'));
        let last = s.text.trim_end_matches('…').split(' ').next_back().unwrap();
        assert!(["alpha", "beta", "gamma", "delta"].contains(&last), "{s:?}");
        // Multi-byte characters near the cut (no char boundary is split).
        let arrows = format!("file {}", "1→use x ".repeat(30));
        for w in 20..60 {
            let s = cut(&arrows, &terms, &tk, w);
            assert!(s.text.starts_with("file"), "{s:?}");
        }
        // Control characters (terminal escapes in tool output) are shown as U+FFFD.
        let s = cut("\u{1b}[31mfile\u{1b}[0m", &terms, &tk, 80);
        assert!(!s.text.chars().any(char::is_control), "{s:?}");
    }
}
