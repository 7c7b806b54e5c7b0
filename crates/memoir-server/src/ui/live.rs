//! Live updates of an open session: `GET /api/sessions/{id}/events?from=N`,
//! a Server-Sent Events stream of the messages appended after the first `N`
//! (an agent writing through the library, `memoir import --watch`, an SDK
//! adapter).
//!
//! Each stream checks its session once per [`POLL`]: a `stat` of the log
//! file (size and modification time) where the store has one, and replays
//! the session only when that changed. Nothing runs while no stream is
//! open. At most [`MAX_STREAMS`] streams are open at once (more are 503);
//! a stream ends when its client goes away (the next write fails; a
//! keep-alive comment is written every [`KEEP_ALIVE`]) and when the server
//! shuts down.
//!
//! Events (`data` is JSON):
//! - `messages`: `{"from", "count", "last_seq", "messages"}`, the messages
//!   `from..count` shaped like `GET /api/sessions/{id}`'s; the event id is
//!   `count`, so a reconnecting `EventSource` resumes after it
//!   (`Last-Event-ID` wins over `?from=`).
//! - `reset`: `{"count"}`, the session now has fewer messages than the page
//!   holds (a rewrite): the page reloads it.
//! - `gone`: the session can no longer be read; the stream ends.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{Path, Query};
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::json;
use tokio::sync::{watch, OwnedSemaphorePermit};

use super::api::{manager, slim_message};
use super::{Scoped, Ui};
use crate::error::{ApiError, ApiResult};

/// How often an open stream looks at its session.
pub const POLL: Duration = Duration::from_secs(1);
/// How often an idle stream writes a comment (how a departed client is noticed).
pub const KEEP_ALIVE: Duration = Duration::from_secs(5);
/// Most live streams open at once.
pub const MAX_STREAMS: usize = 16;

/// The query of the events route.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct EventParams {
    from: Option<usize>,
}

/// What says a session's log may have changed: its size and modification
/// time (`None` where the store keeps no file: then every poll replays).
type Stamp = Option<(u64, Option<SystemTime>)>;

fn stamp(st: &Ui, id: &str) -> Stamp {
    let meta = std::fs::metadata(st.store.location(id)).ok()?;
    meta.is_file().then(|| (meta.len(), meta.modified().ok()))
}

/// One open stream.
struct Live {
    st: Ui,
    id: String,
    /// Messages the page holds.
    sent: usize,
    last: Stamp,
    first: bool,
    done: bool,
    closing: watch::Receiver<bool>,
    _permit: OwnedSemaphorePermit,
}

/// What one look at the session found.
enum Found {
    Nothing,
    Event(Event),
    Gone(Event),
}

fn look(st: &Ui, id: &str, sent: &mut usize) -> Found {
    let t = match manager(st).read_session(id) {
        Ok(t) => t,
        Err(e) => {
            let data = json!({"message": e.to_string()}).to_string();
            return Found::Gone(Event::default().event("gone").data(data));
        }
    };
    let count = t.messages.len();
    if count < *sent {
        *sent = count;
        let data = json!({ "count": count }).to_string();
        return Found::Event(Event::default().event("reset").data(data));
    }
    if count == *sent {
        return Found::Nothing;
    }
    let from = *sent;
    let messages: Vec<_> = (from..count)
        .map(|i| slim_message(i, t.message_seqs.get(i).copied(), &t.messages[i]))
        .collect();
    *sent = count;
    let data = json!({
        "from": from,
        "count": count,
        "last_seq": t.last_seq,
        "messages": messages,
    })
    .to_string();
    Found::Event(
        Event::default()
            .event("messages")
            .id(count.to_string())
            .data(data),
    )
}

/// The next event of a stream, after as many polls as it takes.
async fn next(mut live: Live) -> Option<(Result<Event, Infallible>, Live)> {
    if live.done {
        return None;
    }
    loop {
        if !live.first {
            tokio::select! {
                _ = tokio::time::sleep(POLL) => {}
                _ = live.closing.wait_for(|closing| *closing) => return None,
            }
        }
        live.first = false;
        let now = stamp(&live.st, &live.id);
        if now.is_some() && now == live.last {
            continue;
        }
        let (st, id, mut sent) = (live.st.clone(), live.id.clone(), live.sent);
        let found = tokio::task::spawn_blocking(move || {
            let found = look(&st, &id, &mut sent);
            (found, sent)
        })
        .await;
        let Ok((found, sent)) = found else {
            return None;
        };
        live.sent = sent;
        live.last = now;
        match found {
            Found::Nothing => continue,
            Found::Event(e) => return Some((Ok(e), live)),
            Found::Gone(e) => {
                live.done = true;
                return Some((Ok(e), live));
            }
        }
    }
}

/// The message count a reconnecting `EventSource` last saw.
fn last_event_id(headers: &HeaderMap) -> Option<usize> {
    headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse().ok())
}

/// `GET /api/sessions/{id}/events?from=N`.
pub(crate) async fn events(
    Scoped(st): Scoped,
    path: Result<Path<String>, PathRejection>,
    params: Result<Query<EventParams>, QueryRejection>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let Path(id) = path?;
    memoir::id::validate(&id).map_err(ApiError::from)?;
    let params = params
        .map(|Query(p)| p)
        .map_err(|e| ApiError::bad_request(e.body_text()))?;
    let from = last_event_id(&headers).or(params.from).unwrap_or(0);
    let permit = st.streams.clone().try_acquire_owned().map_err(|_| {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "too_many_streams",
            format!("at most {MAX_STREAMS} live sessions are followed at once"),
        )
    })?;
    // An unknown session is a 404 now, not an event later.
    let exists = {
        let (st, id) = (st.clone(), id.clone());
        tokio::task::spawn_blocking(move || st.store.read_header(&id))
            .await
            .ok()
    };
    match exists {
        Some(Ok(Some(_))) => {}
        Some(Err(e)) => return Err(e.into()),
        _ => {
            return Err(ApiError::new(
                StatusCode::NOT_FOUND,
                "not_found",
                format!("no session {id}"),
            ))
        }
    }
    let live = Live {
        closing: st.closing.subscribe(),
        st,
        id,
        sent: from,
        last: None,
        first: true,
        done: false,
        _permit: permit,
    };
    let stream = futures_util::stream::unfold(live, next);
    Ok(Sse::new(stream)
        .keep_alive(KeepAlive::new().interval(KEEP_ALIVE))
        .into_response())
}

/// The stream cap's semaphore.
pub(crate) fn stream_slots() -> Arc<tokio::sync::Semaphore> {
    Arc::new(tokio::sync::Semaphore::new(MAX_STREAMS))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reconnect_resumes_after_the_last_event_id() {
        let mut h = HeaderMap::new();
        assert_eq!(last_event_id(&h), None);
        h.insert("last-event-id", "42".parse().unwrap());
        assert_eq!(last_event_id(&h), Some(42));
        h.insert("last-event-id", "x".parse().unwrap());
        assert_eq!(last_event_id(&h), None);
    }
}
