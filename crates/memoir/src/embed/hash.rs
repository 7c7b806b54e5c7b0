//! `hash`: the offline default embedder — deterministic signed feature hashing.
//!
//! A text is lowercased and split into words (maximal runs of alphanumeric
//! characters). Three kinds of features are hashed into a vector of any width:
//!
//! | feature | weight |
//! |---|---|
//! | word unigram | 1.0 (0.25 for a short list of English function words) |
//! | word bigram (adjacent words) | 0.3 (skipped when both are function words) |
//! | character 3-gram of `<word>` (with boundary marks) | 0.8 (none for function words) |
//!
//! Each feature's 64-bit hash picks a component (multiply-shift range
//! reduction) and a sign (one hash bit), so colliding features cancel rather
//! than pile up (the "signed hashing trick"). The sum is L2-normalised. Texts
//! with no word at all (only punctuation or spaces) hash their trimmed
//! characters as a single feature, so every vector is unit length.
//!
//! The weights were chosen on the LoCoMo development split (retrieval of
//! dialogue turns by question, `docs/BENCHMARKS.md`): character 3-grams
//! matter most (recall@5 0.23 without them, 0.34 with), and function words
//! must not contribute them.
//!
//! The vector has no learnt semantics: texts that share words, word stems
//! (through the character 3-grams) or phrases score higher than texts that do
//! not. It is fast (hundreds of thousands of short texts per second on one
//! core) and identical on every machine; its identity is `hash-v1@<dims>`,
//! and any change to the features or weights must bump the version.

use super::{l2_normalize, EmbeddingError, EmbeddingProvider};

/// The default width of [`HashEmbedder`].
pub const DEFAULT_DIMS: usize = 384;

const W_UNIGRAM: f32 = 1.0;
const W_STOP_UNIGRAM: f32 = 0.25;
const W_BIGRAM: f32 = 0.3;
const W_TRIGRAM: f32 = 0.8;

const SEED_UNIGRAM: u64 = 0x9e37_79b9_7f4a_7c15;
const SEED_BIGRAM: u64 = 0xc2b2_ae3d_27d4_eb4f;
const SEED_TRIGRAM: u64 = 0x1656_67b1_9e37_79f9;
const SEED_WHOLE: u64 = 0x27d4_eb2f_1656_67c5;

/// Frequent English function words: they carry little topical signal, so
/// their unigrams are down-weighted and bigrams of two of them are skipped.
/// Sorted, for binary search.
const STOPWORDS: &[&str] = &[
    "a", "about", "after", "all", "also", "am", "an", "and", "any", "are", "as", "at", "be",
    "been", "but", "by", "can", "could", "did", "do", "does", "for", "from", "had", "has", "have",
    "he", "her", "him", "his", "i", "if", "in", "into", "is", "it", "its", "just", "me", "my",
    "no", "not", "of", "on", "or", "our", "she", "so", "than", "that", "the", "their", "them",
    "then", "there", "they", "this", "to", "us", "was", "we", "were", "what", "when", "which",
    "who", "will", "with", "would", "you", "your",
];

/// Deterministic feature-hashing embedder; see the [module docs](self).
#[derive(Debug, Clone)]
pub struct HashEmbedder {
    dims: usize,
}

impl Default for HashEmbedder {
    fn default() -> Self {
        Self { dims: DEFAULT_DIMS }
    }
}

impl HashEmbedder {
    /// An embedder producing `dims`-wide vectors (`dims` = 0 is treated as 1).
    pub fn new(dims: usize) -> Self {
        Self { dims: dims.max(1) }
    }

    /// Embed synchronously (the trait methods call this; it is cheap
    /// enough to run on an executor thread).
    pub fn embed_sync(&self, text: &str) -> Vec<f32> {
        let mut out = vec![0.0f32; self.dims];
        self.embed_into(text, &mut out);
        out
    }

    /// Embed into `out`, whose length is the width used (it is overwritten).
    pub fn embed_into(&self, text: &str, out: &mut [f32]) {
        out.fill(0.0);
        if out.is_empty() {
            return;
        }
        let mut acc = Acc { out };
        let mut word = WordBuf::default();
        let mut prev: Option<(u64, bool)> = None;
        let mut any_word = false;

        let flush = |word: &mut WordBuf, acc: &mut Acc, prev: &mut Option<(u64, bool)>| {
            if word.chars.is_empty() {
                return;
            }
            let h = word.hash;
            let stop = word.is_stopword();
            acc.add(
                h ^ SEED_UNIGRAM,
                if stop { W_STOP_UNIGRAM } else { W_UNIGRAM },
            );
            if let Some((ph, pstop)) = *prev {
                if !(stop && pstop) {
                    acc.add(ph.rotate_left(17) ^ h ^ SEED_BIGRAM, W_BIGRAM);
                }
            }
            // Character 3-grams of "<word>": boundary marks make prefixes and
            // suffixes distinct features.
            let c = &word.chars;
            let n = c.len();
            let at = |i: usize| -> u32 {
                if i == 0 {
                    0x02 // start-of-word mark
                } else if i == n + 1 {
                    0x03 // end-of-word mark
                } else {
                    c[i - 1] as u32
                }
            };
            // Function words get no character grams: they would only add noise.
            if n >= 2 && !stop {
                for i in 0..n {
                    let g =
                        (at(i) as u64) | ((at(i + 1) as u64) << 21) | ((at(i + 2) as u64) << 42);
                    acc.add(g ^ SEED_TRIGRAM, W_TRIGRAM);
                }
            }
            *prev = Some((h, stop));
            word.clear();
        };

        for ch in text.chars() {
            if ch.is_ascii() {
                if ch.is_ascii_alphanumeric() {
                    word.push(ch.to_ascii_lowercase());
                    any_word = true;
                } else {
                    flush(&mut word, &mut acc, &mut prev);
                }
            } else if ch.is_alphanumeric() {
                for lc in ch.to_lowercase() {
                    word.push(lc);
                }
                any_word = true;
            } else {
                flush(&mut word, &mut acc, &mut prev);
            }
        }
        flush(&mut word, &mut acc, &mut prev);

        if !any_word {
            // No word: hash the trimmed text itself (empty text included), so
            // the vector is still unit length and still deterministic.
            let mut h = SEED_WHOLE;
            for b in text.trim().bytes() {
                h = step(h, b as u32);
            }
            acc.add(h, 1.0);
        }
        if !l2_normalize(acc.out) {
            // Every feature cancelled out (possible at tiny widths): fall
            // back to one signed component picked by the whole text's hash.
            let mut h = SEED_WHOLE;
            for b in text.bytes() {
                h = step(h, b as u32);
            }
            acc.out.fill(0.0);
            acc.add(h, 1.0);
            l2_normalize(acc.out);
        }
    }
}

/// The signed accumulator.
struct Acc<'a> {
    out: &'a mut [f32],
}

impl Acc<'_> {
    #[inline(always)]
    fn add(&mut self, h: u64, w: f32) {
        let h = mix(h);
        // Multiply-shift range reduction on the high 32 bits; sign from bit 0.
        let idx = (((h >> 32) * self.out.len() as u64) >> 32) as usize;
        let sign = if h & 1 == 0 { w } else { -w };
        // idx < len because (h>>32) < 2^32.
        if let Some(slot) = self.out.get_mut(idx) {
            *slot += sign;
        }
    }
}

/// The current word: its characters and a running hash.
struct WordBuf {
    chars: Vec<char>,
    hash: u64,
}

impl Default for WordBuf {
    fn default() -> Self {
        Self {
            chars: Vec::with_capacity(32),
            hash: SEED_UNIGRAM,
        }
    }
}

impl WordBuf {
    #[inline(always)]
    fn push(&mut self, c: char) {
        self.chars.push(c);
        self.hash = step(self.hash, c as u32);
    }

    fn clear(&mut self) {
        self.chars.clear();
        self.hash = SEED_UNIGRAM;
    }

    fn is_stopword(&self) -> bool {
        if self.chars.len() > 5 {
            return false;
        }
        let mut buf = [0u8; 20];
        let mut len = 0;
        for &c in &self.chars {
            let mut tmp = [0u8; 4];
            let s = c.encode_utf8(&mut tmp);
            if len + s.len() > buf.len() {
                return false;
            }
            buf[len..len + s.len()].copy_from_slice(s.as_bytes());
            len += s.len();
        }
        match std::str::from_utf8(&buf[..len]) {
            Ok(w) => STOPWORDS.binary_search(&w).is_ok(),
            Err(_) => false,
        }
    }
}

/// One step of the running hash (multiply-rotate).
#[inline(always)]
fn step(h: u64, c: u32) -> u64 {
    (h ^ c as u64)
        .wrapping_mul(0x0000_0100_0000_01b3)
        .rotate_left(23)
        ^ 0x5851_f42d_4c95_7f2d
}

/// A 64-bit finaliser (splitmix64's), so nearby inputs land far apart.
#[inline(always)]
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl EmbeddingProvider for HashEmbedder {
    fn embed(&self, text: &str) -> Result<Vec<f32>, EmbeddingError> {
        Ok(self.embed_sync(text))
    }

    fn embed_batch(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbeddingError> {
        Ok(texts.iter().map(|t| self.embed_sync(t)).collect())
    }

    fn dimensions(&self) -> usize {
        self.dims
    }

    fn model_id(&self) -> String {
        format!("hash-v1@{}", self.dims)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::embed::cosine;

    #[test]
    fn stopwords_are_sorted() {
        let mut sorted = STOPWORDS.to_vec();
        sorted.sort_unstable();
        assert_eq!(sorted, STOPWORDS);
    }

    #[test]
    fn deterministic_unit_vectors_of_any_width() {
        for dims in [1, 7, 64, 384, 1024] {
            let e = HashEmbedder::new(dims);
            let a = e.embed_sync("The quick brown fox");
            let b = e.embed_sync("The quick brown fox");
            assert_eq!(a, b);
            assert_eq!(a.len(), dims);
            let n: f32 = a.iter().map(|x| x * x).sum();
            assert!((n - 1.0).abs() < 1e-5, "dims {dims}: norm² {n}");
        }
    }

    #[test]
    fn case_and_punctuation_do_not_matter() {
        let e = HashEmbedder::default();
        let a = e.embed_sync("Hello, World!");
        let b = e.embed_sync("hello world");
        assert!(cosine(&a, &b) > 0.999);
    }

    #[test]
    fn empty_and_symbol_only_texts_are_unit_and_distinct() {
        let e = HashEmbedder::new(64);
        let empty = e.embed_sync("");
        let bang = e.embed_sync("!!!");
        let q = e.embed_sync("???");
        for v in [&empty, &bang, &q] {
            let n: f32 = v.iter().map(|x| x * x).sum();
            assert!((n - 1.0).abs() < 1e-5);
        }
        assert_ne!(bang, q);
        assert_eq!(e.embed_sync("   "), empty);
    }

    #[test]
    fn related_texts_score_higher_than_unrelated() {
        let e = HashEmbedder::default();
        let cases = [
            (
                "fix the flaky test in the transcript module",
                "the transcript test is flaky and fails randomly",
                "we had pasta with tomato sauce for dinner",
            ),
            (
                "When did Melanie paint a sunrise?",
                "Melanie painted a sunrise over the lake last year",
                "Caroline went to the support group on Tuesday",
            ),
            (
                "embedding cache eviction policy",
                "how the embeddings cache evicts old entries",
                "borrow of moved value in session handling",
            ),
        ];
        for (q, related, unrelated) in cases {
            let (vq, vr, vu) = (
                e.embed_sync(q),
                e.embed_sync(related),
                e.embed_sync(unrelated),
            );
            let (sr, su) = (cosine(&vq, &vr), cosine(&vq, &vu));
            assert!(sr > su + 0.1, "{q:?}: related {sr} vs unrelated {su}");
        }
    }

    #[test]
    fn stems_share_character_grams() {
        let e = HashEmbedder::default();
        let a = e.embed_sync("painting");
        let b = e.embed_sync("painted");
        let c = e.embed_sync("stadium");
        assert!(cosine(&a, &b) > cosine(&a, &c) + 0.2);
    }

    #[test]
    fn non_ascii_words_are_features() {
        let e = HashEmbedder::default();
        let a = e.embed_sync("Die Katze sitzt auf der Matte");
        let b = e.embed_sync("die KATZE schläft");
        let c = e.embed_sync("東京は日本の首都です");
        assert!(cosine(&a, &b) > cosine(&a, &c));
        assert!(cosine(&c, &e.embed_sync("東京")) > 0.0);
    }

    proptest::proptest! {
        #[test]
        fn any_text_gives_a_deterministic_unit_vector(text in "\\PC{0,80}", dims in 1usize..600) {
            let e = HashEmbedder::new(dims);
            let v = e.embed_sync(&text);
            proptest::prop_assert_eq!(v.len(), dims);
            let n: f32 = v.iter().map(|x| x * x).sum();
            proptest::prop_assert!((n - 1.0).abs() < 1e-4, "norm² {}", n);
            proptest::prop_assert_eq!(v, e.embed_sync(&text));
        }
    }

    #[test]
    fn cancelling_features_still_give_a_unit_vector() {
        // At width 1 every feature lands on the same component. Two function
        // words give two ±0.25 unigrams and nothing else, so about half of
        // these pairs cancel exactly and take the fallback.
        let e = HashEmbedder::new(1);
        for a in STOPWORDS {
            for b in STOPWORDS {
                let t = format!("{a} {b}");
                let v = e.embed_sync(&t);
                assert!((v[0].abs() - 1.0).abs() < 1e-6, "{t}: {v:?}");
            }
        }
    }

    #[test]
    fn model_id_names_version_and_width() {
        assert_eq!(HashEmbedder::new(256).model_id(), "hash-v1@256");
        assert_eq!(HashEmbedder::default().dimensions(), 384);
    }
}
