//! Tokenisation for the lexical index: lowercase, split on anything that is
//! not a letter or digit, drop one-letter words and (optionally) English stop
//! words, and (optionally) reduce each word to its Snowball English stem.

use std::collections::HashSet;
use std::sync::OnceLock;

use rust_stemmers::{Algorithm, Stemmer};

/// How text is cut into terms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TokenizerConfig {
    /// Reduce words to their Snowball English stem ("walking" → "walk").
    pub stem: bool,
    /// Drop common English function words ("the", "did", "what").
    pub stopwords: bool,
    /// Also emit each pair of adjacent kept terms as one term (`support_group`).
    pub bigrams: bool,
    /// Code-aware terms: an identifier (`read_file`, `readFile`,
    /// `Foo::bar`, `file.rs`, `--no-verify`) gives its parts (camelCase
    /// split too) and then the whole identifier as one more term, its parts
    /// joined (`readfil`, stemmed): an exact identifier is found by that term,
    /// a paraphrase by the parts. See [`identifier_runs`].
    pub identifiers: bool,
}

impl Default for TokenizerConfig {
    fn default() -> Self {
        TokenizerConfig {
            stem: true,
            stopwords: true,
            bigrams: false,
            identifiers: false,
        }
    }
}

impl TokenizerConfig {
    /// The cross-session search index's terms: the defaults plus
    /// [`TokenizerConfig::identifiers`].
    pub fn code() -> Self {
        TokenizerConfig {
            identifiers: true,
            ..TokenizerConfig::default()
        }
    }
}

/// Characters that join the parts of an identifier when they stand between
/// two letters or digits (`read_file`, `file.rs`, `Foo::bar`, `no-verify`).
fn is_joiner(c: char) -> bool {
    matches!(c, '_' | '.' | ':' | '-')
}

/// The identifier runs of `text`, as byte ranges: maximal runs of letters
/// and digits, joined across [`is_joiner`] characters that have a letter or
/// digit on both sides (`a::b` joins: a run of joiners counts). Without
/// `identifiers`, the plain runs of letters and digits.
pub fn identifier_runs(text: &str, identifiers: bool) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut start: Option<usize> = None;
    let mut end = 0;
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if c.is_alphanumeric() {
            start.get_or_insert(i);
            end = i + c.len_utf8();
            continue;
        }
        if identifiers && start.is_some() && is_joiner(c) {
            // Joiners between two alphanumerics keep the run going.
            let mut rest = text[i..].char_indices();
            let next_word = rest
                .find(|&(_, ch)| !is_joiner(ch))
                .is_some_and(|(_, ch)| ch.is_alphanumeric());
            if next_word {
                while chars.peek().is_some_and(|&(_, ch)| is_joiner(ch)) {
                    chars.next();
                }
                continue;
            }
        }
        if let Some(s) = start.take() {
            out.push((s, end));
        }
    }
    if let Some(s) = start {
        out.push((s, end));
    }
    out
}

/// `s` lowercased a character at a time (no final-sigma rule: the same
/// term wherever a word stands).
fn lower(s: &str) -> String {
    s.chars().flat_map(char::to_lowercase).collect()
}

/// The parts of one identifier run: split at joiners and at camelCase
/// boundaries (`getHTTPResponse` → `get`, `HTTP`, `Response`); digits stay
/// with their letters.
fn identifier_parts(run: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    for seg in run.split(|c: char| !c.is_alphanumeric()) {
        if seg.is_empty() {
            continue;
        }
        let chars: Vec<(usize, char)> = seg.char_indices().collect();
        let mut from = 0;
        for k in 1..chars.len() {
            let (i, c) = chars[k];
            let prev = chars[k - 1].1;
            let next = chars.get(k + 1).map(|x| x.1);
            let boundary = c.is_uppercase()
                && (prev.is_lowercase()
                    || (prev.is_uppercase() && next.is_some_and(char::is_lowercase)));
            if boundary {
                parts.push(&seg[from..i]);
                from = i;
            }
        }
        parts.push(&seg[from..]);
    }
    parts
}

/// Common English function words (articles, pronouns, auxiliaries,
/// prepositions, question words). Content words are never on it.
const STOPWORDS: &[&str] = &[
    "a",
    "about",
    "above",
    "after",
    "again",
    "against",
    "all",
    "am",
    "an",
    "and",
    "any",
    "are",
    "as",
    "at",
    "be",
    "because",
    "been",
    "before",
    "being",
    "below",
    "between",
    "both",
    "but",
    "by",
    "can",
    "could",
    "did",
    "do",
    "does",
    "doing",
    "down",
    "during",
    "each",
    "few",
    "for",
    "from",
    "further",
    "had",
    "has",
    "have",
    "having",
    "he",
    "her",
    "here",
    "hers",
    "herself",
    "him",
    "himself",
    "his",
    "how",
    "i",
    "if",
    "in",
    "into",
    "is",
    "it",
    "its",
    "itself",
    "just",
    "me",
    "more",
    "most",
    "my",
    "myself",
    "no",
    "nor",
    "not",
    "now",
    "of",
    "off",
    "on",
    "once",
    "only",
    "or",
    "other",
    "our",
    "ours",
    "ourselves",
    "out",
    "over",
    "own",
    "same",
    "she",
    "should",
    "so",
    "some",
    "such",
    "than",
    "that",
    "the",
    "their",
    "theirs",
    "them",
    "themselves",
    "then",
    "there",
    "these",
    "they",
    "this",
    "those",
    "through",
    "to",
    "too",
    "under",
    "until",
    "up",
    "very",
    "was",
    "we",
    "were",
    "what",
    "when",
    "where",
    "which",
    "while",
    "who",
    "whom",
    "why",
    "will",
    "with",
    "would",
    "you",
    "your",
    "yours",
    "yourself",
    "yourselves",
    "ll",
    "re",
    "ve",
    "don",
    "didn",
    "doesn",
    "isn",
    "wasn",
    "im",
    "ive",
    "also",
];

fn stopword_set() -> &'static HashSet<&'static str> {
    static SET: OnceLock<HashSet<&'static str>> = OnceLock::new();
    SET.get_or_init(|| STOPWORDS.iter().copied().collect())
}

/// Whether `word` (lowercase) is on the stop list.
pub fn is_stopword(word: &str) -> bool {
    stopword_set().contains(word)
}

/// A configured tokenizer. Cheap to clone; `Send + Sync`.
pub struct Tokenizer {
    config: TokenizerConfig,
    stemmer: Stemmer,
}

impl std::fmt::Debug for Tokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tokenizer")
            .field("config", &self.config)
            .finish()
    }
}

impl Tokenizer {
    /// A tokenizer with this configuration.
    pub fn new(config: TokenizerConfig) -> Self {
        Tokenizer {
            config,
            stemmer: Stemmer::create(Algorithm::English),
        }
    }

    /// The configuration.
    pub fn config(&self) -> TokenizerConfig {
        self.config
    }

    /// The terms of `text`, in order (repeats kept).
    pub fn tokens(&self, text: &str) -> Vec<String> {
        let mut out = Vec::new();
        for (s, e) in identifier_runs(text, self.config.identifiers) {
            self.run_terms(&text[s..e], &mut out);
        }
        if self.config.bigrams && out.len() > 1 {
            let pairs: Vec<String> = out
                .windows(2)
                .map(|w| format!("{}_{}", w[0], w[1]))
                .collect();
            out.extend(pairs);
        }
        out
    }

    /// The terms of one run of [`identifier_runs`] (no bigrams), appended
    /// to `out`.
    pub fn run_terms(&self, run: &str, out: &mut Vec<String>) {
        if !self.config.identifiers {
            self.push_word(&lower(run), out);
            return;
        }
        let parts = identifier_parts(run);
        for p in &parts {
            self.push_word(&lower(p), out);
        }
        if parts.len() > 1 {
            let whole: String = lower(&parts.concat());
            self.push_word(&whole, out);
        }
    }

    /// One lowercase word's term, unless dropped (one letter, stop word).
    fn push_word(&self, word: &str, out: &mut Vec<String>) {
        if word.is_empty() {
            return;
        }
        let keep = (word.chars().count() > 1 || word.chars().all(|c| c.is_ascii_digit()))
            && !(self.config.stopwords && is_stopword(word));
        if keep {
            if self.config.stem {
                out.push(self.stemmer.stem(word).into_owned());
            } else {
                out.push(word.to_string());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lowercases_splits_stems_and_drops_stopwords() {
        let t = Tokenizer::new(TokenizerConfig::default());
        assert_eq!(
            t.tokens("When did Caroline's dogs go RUNNING in 2023?"),
            vec!["carolin", "dog", "go", "run", "2023"]
        );
        let plain = Tokenizer::new(TokenizerConfig {
            stem: false,
            stopwords: false,
            bigrams: false,
            identifiers: false,
        });
        assert_eq!(plain.tokens("the cat, 7 x"), vec!["the", "cat", "7"]);
        let pairs = Tokenizer::new(TokenizerConfig {
            bigrams: true,
            ..TokenizerConfig::default()
        });
        assert_eq!(
            pairs.tokens("support groups"),
            vec!["support", "group", "support_group"]
        );
    }

    #[test]
    fn identifiers_give_their_parts_then_the_whole() {
        let t = Tokenizer::new(TokenizerConfig::code());
        assert_eq!(t.tokens("read_file"), vec!["read", "file", "readfil"]);
        assert_eq!(t.tokens("readFile"), t.tokens("read_file"));
        assert_eq!(
            t.tokens("see src/io_util.rs"),
            vec!["see", "src", "io", "util", "rs", "ioutilr"]
        );
        assert_eq!(t.tokens("Foo::bar"), vec!["foo", "bar", "foobar"]);
        assert_eq!(
            t.tokens("git commit --no-verify"),
            vec!["git", "commit", "verifi", "noverifi"]
        );
        assert_eq!(
            t.tokens("getHTTPResponse"),
            vec!["get", "http", "respons", "gethttprespons"]
        );
        // Prose punctuation is no joiner; numbers stay.
        assert_eq!(t.tokens("the end. Then - 42"), vec!["end", "42"]);
        assert_eq!(t.tokens("E0502"), vec!["e0502"]);
        // Without the option, runs of letters and digits as before.
        let plain = Tokenizer::new(TokenizerConfig::default());
        assert_eq!(
            plain.tokens("read_file readFile"),
            vec!["read", "file", "readfil"]
        );
    }
}
