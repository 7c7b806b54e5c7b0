//! The index's term pipeline: exactly the view's [`Tokenizer`], with a
//! bounded cache of word → term so each distinct word is lowercased,
//! checked against the stop list and stemmed once per indexing pass rather
//! than once per occurrence (stemming was most of the per-message cost).

use std::collections::HashMap;

use foldhash::fast::RandomState;

use crate::view::lexical::Tokenizer;

/// At most this many distinct words are cached (then the cache starts over:
/// memory stays bounded whatever the store's vocabulary).
pub const MAX_CACHED_WORDS: usize = 200_000;

/// Longer words are tokenized without caching (so the cache holds at most
/// `MAX_CACHED_WORDS × MAX_CACHED_WORD_BYTES` bytes of words, whatever the input).
pub const MAX_CACHED_WORD_BYTES: usize = 48;

/// A tokenizer with a word cache. Not shared between threads: each indexing
/// thread owns one.
pub(super) struct Terms<'t> {
    tokenizer: &'t Tokenizer,
    /// Keyed with a per-process random seed (foldhash: a few times faster
    /// than SipHash on short words, and still not predictable from outside).
    cache: HashMap<Box<str>, Box<[Box<str>]>, RandomState>,
    /// Scratch for one word's terms.
    scratch: Vec<String>,
}

impl<'t> Terms<'t> {
    /// A cache in front of `tokenizer`.
    pub(super) fn new(tokenizer: &'t Tokenizer) -> Self {
        Terms {
            tokenizer,
            cache: HashMap::default(),
            scratch: Vec::new(),
        }
    }

    /// The terms of one word (a run of [`words`]), handed to `add`; one
    /// hash lookup when the word is cached.
    fn term(&mut self, word: &str, mut add: impl FnMut(&str)) {
        if let Some(terms) = self.cache.get(word) {
            for t in terms.iter() {
                add(t);
            }
            return;
        }
        if self.cache.len() >= MAX_CACHED_WORDS {
            self.cache.clear();
        }
        self.scratch.clear();
        self.tokenizer.run_terms(word, &mut self.scratch);
        for t in &self.scratch {
            add(t);
        }
        let terms: Box<[Box<str>]> = self.scratch.drain(..).map(String::into_boxed_str).collect();
        self.cache.insert(word.into(), terms);
    }

    /// The terms of `text`, space separated, into `out` (cleared first);
    /// returns how many. Equal to `tokenizer.tokens(text).join(" ")`.
    pub(super) fn joined(&mut self, text: &str, out: &mut String) -> u64 {
        out.clear();
        let mut n = 0u64;
        let identifiers = self.tokenizer.config().identifiers;
        for word in words(text, identifiers) {
            let mut add = |t: &str| {
                if !out.is_empty() {
                    out.push(' ');
                }
                out.push_str(t);
                n += 1;
            };
            if word.len() > MAX_CACHED_WORD_BYTES {
                self.scratch.clear();
                self.tokenizer.run_terms(word, &mut self.scratch);
                for t in &self.scratch {
                    add(t);
                }
            } else {
                self.term(word, add);
            }
        }
        n
    }
}

/// The words of `text` in order: maximal runs of alphanumeric characters,
/// with `identifiers` joined across `_ . : -` that stand between two of them
/// (exactly [`crate::view::lexical::tokenize::identifier_runs`]). Bytes,
/// not chars: ASCII (most of what agents log) is classified without
/// decoding, a run at a time; only a non-ASCII byte starts a decode.
fn words(text: &str, identifiers: bool) -> impl Iterator<Item = &str> {
    let bytes = text.as_bytes();
    // `at` is always a char boundary: it only ever moves by whole chars.
    let mut at = 0;
    let class = move |at: usize| -> Option<(bool, usize)> {
        let &b = bytes.get(at)?;
        if b.is_ascii() {
            Some((b.is_ascii_alphanumeric(), 1))
        } else {
            let c = text[at..].chars().next()?;
            Some((c.is_alphanumeric(), c.len_utf8()))
        }
    };
    let joiner = |b: u8| matches!(b, b'_' | b'.' | b':' | b'-');
    std::iter::from_fn(move || {
        loop {
            let (is_word, width) = class(at)?;
            if is_word {
                break;
            }
            at += width;
        }
        let start = at;
        loop {
            while let Some((true, width)) = class(at) {
                at += width;
            }
            if !identifiers {
                break;
            }
            let mut j = at;
            while bytes.get(j).copied().is_some_and(joiner) {
                j += 1;
            }
            if j > at && matches!(class(j), Some((true, _))) {
                at = j;
                continue;
            }
            break;
        }
        Some(&text[start..at])
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::view::lexical::TokenizerConfig;

    #[test]
    fn cached_terms_equal_the_tokenizers_terms() {
        for config in [TokenizerConfig::default(), TokenizerConfig::code()] {
            let tk = Tokenizer::new(config);
            let mut terms = Terms::new(&tk);
            let mut out = String::new();
            for text in [
                "Running the tests: cargo test --release; it FAILED twice.",
                "Caroline's don't x 7 42 naïve Ünïcode straße ΣΊΣΥΦΟΣ 東京 tests",
                "snake_case-and.dots/path\\back 3.14 v2 a1b2",
                "",
                "   ",
                "running running RUNNING",
                "aVeryLongIdentifierThatIsWellOverTheCacheLimitOfFortyEightBytes x",
                "read_file readFile Foo::bar --no-verify src/io_util.rs a..b x- -y 1.2.3",
                "very_long_snake_case_identifier_well_over_the_cache_limit_of_48_bytes",
            ] {
                for _ in 0..2 {
                    // Second pass: every word from the cache.
                    let n = terms.joined(text, &mut out);
                    let expected = tk.tokens(text);
                    assert_eq!(out, expected.join(" "), "{text:?}");
                    assert_eq!(n, expected.len() as u64);
                }
            }
            // The cache starts over instead of growing without bound.
            let many: String = (0..MAX_CACHED_WORDS + 10)
                .map(|i| format!("w{i} "))
                .collect();
            terms.joined(&many, &mut out);
            assert!(terms.cache.len() <= MAX_CACHED_WORDS);
            assert!(terms.cache.keys().all(|w| w.len() <= MAX_CACHED_WORD_BYTES));
            assert_eq!(out, tk.tokens(&many).join(" "));
        }
    }
}
