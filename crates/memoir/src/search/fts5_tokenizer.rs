//! The FTS5 tokenizer of the terms table, [`NAME`]: it splits a body at
//! its spaces and nothing else, because the body already is memoir's terms
//! (`super::terms`), lowercased, stemmed and space-separated. FTS5's own
//! tokenizers classify, fold and copy every byte again: `unicode61` also
//! split some of memoir's terms (at combining marks), and even `ascii` cost
//! a tenth of an indexing pass's CPU (docs/BENCHMARKS.md, "Search").
//!
//! FTS5 looks a table's tokenizer up by name on each connection, so every
//! connection to the index calls [`register`] (`super::engine` does it for
//! the connections it opens); without it the terms table does not open
//! ("no such tokenizer"). Another program that reads `terms.sqlite`
//! registers it the same way (docs/FORMAT.md).

use std::ffi::{c_char, c_int, c_void, CStr};
use std::ptr;

use rusqlite::{ffi, Connection};

/// The tokenizer's name as the C string FTS5 is given.
const C_NAME: &CStr = c"memoir_terms";

/// The tokenizer's name in `CREATE VIRTUAL TABLE ... tokenize=...`.
pub const NAME: &str = match C_NAME.to_str() {
    Ok(name) => name,
    Err(_) => panic!("the tokenizer's name is ASCII"),
};

/// The one (stateless) tokenizer instance FTS5 is handed: it only needs a
/// pointer that is not null, never reads through it.
static INSTANCE: u8 = 0;

/// Register [`NAME`] on `conn` (idempotent: a second call replaces the
/// first with the same functions).
pub fn register(conn: &Connection) -> rusqlite::Result<()> {
    let api = fts5_api(conn)?;
    let mut tokenizer = ffi::fts5_tokenizer {
        xCreate: Some(create),
        xDelete: Some(delete),
        xTokenize: Some(tokenize),
    };
    // SAFETY: `api` is the connection's live FTS5 global (checked non-null
    // and of version 2 or later by `fts5_api`, which has
    // `xCreateTokenizer`); `C_NAME` is NUL-terminated and FTS5 copies it;
    // `xCreateTokenizer` copies the `fts5_tokenizer` struct (fts5_main.c,
    // `pNew->x1 = *pTokenizer`), so a stack value is enough; no user data,
    // so no destructor.
    let rc = unsafe {
        match (*api).xCreateTokenizer {
            Some(create_tokenizer) => {
                create_tokenizer(api, C_NAME.as_ptr(), ptr::null_mut(), &mut tokenizer, None)
            }
            None => ffi::SQLITE_MISUSE,
        }
    };
    check(rc, "registering the terms tokenizer")
}

/// The connection's `fts5_api` (the documented way: `SELECT fts5(?1)` with
/// a pointer bound under the type "fts5_api_ptr").
fn fts5_api(conn: &Connection) -> rusqlite::Result<*mut ffi::fts5_api> {
    let mut api: *mut ffi::fts5_api = ptr::null_mut();
    let mut stmt: *mut ffi::sqlite3_stmt = ptr::null_mut();
    // SAFETY: `conn.handle()` is the open connection's handle, used on this
    // thread only while `conn` is borrowed. The statement is prepared from
    // a NUL-terminated literal, bound with a pointer to `api` (a local that
    // outlives the statement: it is finalized before this block ends) and
    // the static type name FTS5 expects; `sqlite3_finalize` accepts the
    // null statement a failed prepare leaves.
    let rc = unsafe {
        let db = conn.handle();
        let mut rc = ffi::sqlite3_prepare_v2(
            db,
            c"SELECT fts5(?1)".as_ptr(),
            -1,
            &mut stmt,
            ptr::null_mut(),
        );
        if rc == ffi::SQLITE_OK {
            rc = ffi::sqlite3_bind_pointer(
                stmt,
                1,
                (&mut api as *mut *mut ffi::fts5_api).cast::<c_void>(),
                c"fts5_api_ptr".as_ptr(),
                None,
            );
        }
        if rc == ffi::SQLITE_OK {
            rc = match ffi::sqlite3_step(stmt) {
                ffi::SQLITE_ROW | ffi::SQLITE_DONE => ffi::SQLITE_OK,
                other => other,
            };
        }
        ffi::sqlite3_finalize(stmt);
        rc
    };
    check(rc, "finding FTS5")?;
    // SAFETY: a non-null `api` points at the connection's FTS5 global,
    // which lives as long as the connection.
    if api.is_null() || unsafe { (*api).iVersion } < 2 {
        return Err(failure(
            ffi::SQLITE_MISUSE,
            "finding FTS5 (version 2 or later)",
        ));
    }
    Ok(api)
}

/// `Ok` for `SQLITE_OK`, else the failure of `what`.
fn check(rc: c_int, what: &str) -> rusqlite::Result<()> {
    if rc == ffi::SQLITE_OK {
        Ok(())
    } else {
        Err(failure(rc, what))
    }
}

fn failure(rc: c_int, what: &str) -> rusqlite::Error {
    rusqlite::Error::SqliteFailure(ffi::Error::new(rc), Some(what.to_string()))
}

/// `xCreate`: every table gets the same stateless instance; arguments
/// after the name are refused (there are none to give).
unsafe extern "C" fn create(
    _user_data: *mut c_void,
    _args: *mut *const c_char,
    n_args: c_int,
    out: *mut *mut ffi::Fts5Tokenizer,
) -> c_int {
    if n_args != 0 {
        return ffi::SQLITE_ERROR;
    }
    // SAFETY: FTS5 passes a valid place for the instance pointer.
    unsafe { *out = (&INSTANCE as *const u8).cast_mut().cast() };
    ffi::SQLITE_OK
}

/// `xDelete`: nothing was allocated.
unsafe extern "C" fn delete(_instance: *mut ffi::Fts5Tokenizer) {}

/// The callback FTS5 gives `xTokenize` for each token.
type TokenCallback =
    unsafe extern "C" fn(*mut c_void, c_int, *const c_char, c_int, c_int, c_int) -> c_int;

/// `xTokenize`: each maximal run of bytes other than a space is a token,
/// handed over as it is (no folding: memoir's terms are lowercase already);
/// the callback's first non-OK answer stops the walk and is returned.
unsafe extern "C" fn tokenize(
    _instance: *mut ffi::Fts5Tokenizer,
    ctx: *mut c_void,
    _flags: c_int,
    text: *const c_char,
    n_text: c_int,
    token: Option<TokenCallback>,
) -> c_int {
    let (Some(token), Ok(len)) = (token, usize::try_from(n_text)) else {
        return ffi::SQLITE_ERROR;
    };
    if text.is_null() || len == 0 {
        return ffi::SQLITE_OK;
    }
    // SAFETY: FTS5 passes `n_text` readable bytes at `text`, alive for
    // this call.
    let bytes = unsafe { std::slice::from_raw_parts(text.cast::<u8>(), len) };
    for (start, end) in spans(bytes) {
        // Offsets fit in c_int: they are at most `n_text`.
        let (s, e) = (start as c_int, end as c_int);
        // SAFETY: the token is `bytes[start..end]`, inside the text FTS5
        // gave; `ctx` is its own context, passed back unchanged.
        let rc = unsafe { token(ctx, 0, text.add(start), e - s, s, e) };
        if rc != ffi::SQLITE_OK {
            return rc;
        }
    }
    ffi::SQLITE_OK
}

/// The byte ranges of the space-separated tokens of `bytes`: the gaps
/// between its spaces (found a vector at a time by `memchr_iter`), empty
/// gaps skipped.
fn spans(bytes: &[u8]) -> impl Iterator<Item = (usize, usize)> + '_ {
    let mut start = 0;
    memchr::memchr_iter(b' ', bytes)
        .chain(std::iter::once(bytes.len()))
        .filter_map(move |end| {
            let span = (start, end);
            start = end + 1;
            (span.0 < span.1).then_some(span)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_the_runs_between_spaces() {
        let got: Vec<&[u8]> = spans(b"  run test  x86 64 na\xc3\xafv ")
            .map(|(s, e)| &b"  run test  x86 64 na\xc3\xafv "[s..e])
            .collect();
        assert_eq!(
            got,
            vec![&b"run"[..], b"test", b"x86", b"64", "naïv".as_bytes()]
        );
        assert_eq!(spans(b"").count(), 0);
        assert_eq!(spans(b"   ").count(), 0);
    }

    /// Through SQLite: a table made with the tokenizer holds exactly the
    /// space-separated words (any script, no folding), finds a phrase, and
    /// a connection without the registration cannot open it.
    #[test]
    fn a_table_with_the_tokenizer_holds_the_words_between_spaces() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.sqlite");
        let conn = Connection::open(&path).unwrap();
        register(&conn).unwrap();
        register(&conn).unwrap();
        conn.execute_batch(&format!(
            "CREATE VIRTUAL TABLE t USING fts5(body, tokenize='{NAME}');
             CREATE VIRTUAL TABLE v USING fts5vocab(t, 'row');
             INSERT INTO t(rowid, body) VALUES (1, 'नमस त\u{947} İx run'), (2, 'run test x-y');"
        ))
        .unwrap();
        let vocab: Vec<String> = conn
            .prepare("SELECT term FROM v ORDER BY term")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        let mut expected = vec!["run", "test", "x-y", "नमस", "त\u{947}", "İx"];
        expected.sort();
        assert_eq!(vocab, expected);
        let phrase: i64 = conn
            .query_row(
                "SELECT rowid FROM t WHERE t MATCH '\"run test\"'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(phrase, 2);
        let other = Connection::open(&path).unwrap();
        let err = other
            .query_row("SELECT count(*) FROM t WHERE t MATCH 'run'", [], |r| {
                r.get::<_, i64>(0)
            })
            .unwrap_err();
        assert!(err.to_string().contains("tokenizer"), "{err}");
        assert!(
            conn.execute_batch(&format!(
                "CREATE VIRTUAL TABLE w USING fts5(body, tokenize='{NAME} x')"
            ))
            .is_err(),
            "arguments are refused"
        );
    }
}
