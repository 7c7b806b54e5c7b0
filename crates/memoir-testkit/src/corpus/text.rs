//! Plausible filler text: prompts, answers, code and tool output.

use crate::rng::Rng;

const WORDS: &[&str] = &[
    "the",
    "function",
    "returns",
    "error",
    "when",
    "index",
    "module",
    "test",
    "fails",
    "because",
    "config",
    "value",
    "is",
    "missing",
    "from",
    "build",
    "step",
    "cache",
    "struct",
    "field",
    "parser",
    "reads",
    "each",
    "line",
    "and",
    "writes",
    "result",
    "into",
    "buffer",
    "then",
    "checks",
    "length",
    "session",
    "store",
    "import",
    "handler",
    "request",
    "response",
    "retry",
    "timeout",
    "path",
    "file",
    "directory",
    "schema",
    "migration",
    "query",
    "row",
    "column",
    "thread",
    "lock",
    "async",
    "await",
    "future",
    "stream",
    "token",
    "usage",
    "model",
    "client",
];

const CODE: &[&str] = &[
    "fn",
    "let",
    "mut",
    "match",
    "impl",
    "struct",
    "pub",
    "use",
    "return",
    "Ok(())",
    "Err(e)",
    "self",
    "&str",
    "Vec<u8>",
    "String",
    "Option<T>",
    "if",
    "else",
    "for",
    "in",
    "=>",
    "{",
    "}",
    "const",
    "async",
    "def",
    "import",
    "class",
    "await",
    "None",
    "True",
    "0",
    "1",
    "x",
    "len",
];

const PROMPTS: &[&str] = &[
    "Fix the failing test in",
    "Explain how the parser handles",
    "Refactor the retry logic of",
    "Add a regression test for",
    "Why does the build break in",
    "Review the error handling of",
    "Speed up the query in",
    "Write docs for",
    "Find where the cache is invalidated in",
    "Rename the config field used by",
];

const FILES: &[&str] = &[
    "src/lib.rs",
    "src/store/mod.rs",
    "src/import/parser.rs",
    "src/server/routes.rs",
    "tests/integration.rs",
    "app/models/user.py",
    "web/src/components/Table.tsx",
    "Cargo.toml",
    "docs/GUIDE.md",
    "scripts/release.sh",
];

/// A source file path.
pub fn file(rng: &mut Rng) -> &'static str {
    FILES[rng.below(FILES.len())]
}

/// A prompt that is unique in the corpus (`tag` makes it so).
pub fn prompt(rng: &mut Rng, tag: &str) -> String {
    let mut s = format!("{} {}", rng.pick(PROMPTS), file(rng));
    if rng.chance(0.5) {
        s.push_str(": ");
        let n = rng.range(40, 400) as usize;
        s.push_str(&prose(rng, n));
    }
    s.push_str(&format!(" (ref {tag})"));
    s
}

/// About `n` bytes of sentences.
pub fn prose(rng: &mut Rng, n: usize) -> String {
    words(rng, n, WORDS, ". ")
}

/// About `n` bytes of code-like lines.
pub fn code(rng: &mut Rng, n: usize) -> String {
    words(rng, n, CODE, "\n")
}

fn words(rng: &mut Rng, n: usize, vocab: &[&str], end: &str) -> String {
    let mut s = String::with_capacity(n + 16);
    let mut in_sentence = 0;
    while s.len() < n {
        s.push_str(vocab[rng.below(vocab.len())]);
        in_sentence += 1;
        if in_sentence > 6 && rng.chance(0.15) {
            s.push_str(end);
            in_sentence = 0;
        } else {
            s.push(' ');
        }
    }
    s
}

/// About `n` bytes of base64 text (image data, encrypted reasoning).
pub fn base64(rng: &mut Rng, n: usize) -> String {
    const A: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut s = String::with_capacity(n + 4);
    let mut bits = 0u64;
    for i in 0..n.div_ceil(4) * 4 {
        if i % 10 == 0 {
            bits = rng.next_u64();
        }
        s.push(A[(bits & 63) as usize] as char);
        bits >>= 6;
    }
    s
}
