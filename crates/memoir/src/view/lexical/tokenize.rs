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
}

impl Default for TokenizerConfig {
    fn default() -> Self {
        TokenizerConfig {
            stem: true,
            stopwords: true,
            bigrams: false,
        }
    }
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
        let mut word = String::new();
        let flush = |word: &mut String, out: &mut Vec<String>| {
            if word.is_empty() {
                return;
            }
            let keep = (word.chars().count() > 1 || word.chars().all(|c| c.is_ascii_digit()))
                && !(self.config.stopwords && is_stopword(word));
            if keep {
                if self.config.stem {
                    out.push(self.stemmer.stem(word).into_owned());
                } else {
                    out.push(word.clone());
                }
            }
            word.clear();
        };
        for c in text.chars() {
            if c.is_alphanumeric() {
                word.extend(c.to_lowercase());
            } else if c == '\'' || c == '\u{2019}' {
                // "caroline's" → "caroline"; "don't" → "don" (a stop word).
                flush(&mut word, &mut out);
            } else {
                flush(&mut word, &mut out);
            }
        }
        flush(&mut word, &mut out);
        if self.config.bigrams && out.len() > 1 {
            let pairs: Vec<String> = out
                .windows(2)
                .map(|w| format!("{}_{}", w[0], w[1]))
                .collect();
            out.extend(pairs);
        }
        out
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
}
