//! Running one function over many items on a few scoped threads (the
//! machine's parallelism, at most [`MAX_THREADS`], and only as many as give
//! each thread `min_share` items), results in the items' order: what a
//! listing, a snapshot load and a usage report use to rebuild or parse many
//! small things at once.

/// At most this many threads.
const MAX_THREADS: usize = 8;

/// `f` of every item, in order, on several threads when there are at least
/// `2 * min_share` items. A panic in `f` is the caller's panic.
pub(crate) fn map<T: Sync, R: Send>(
    items: &[T],
    min_share: usize,
    f: impl Fn(&T) -> R + Sync,
) -> Vec<R> {
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(items.len() / min_share.max(1))
        .clamp(1, MAX_THREADS);
    if threads == 1 {
        return items.iter().map(f).collect();
    }
    let share = items.len().div_ceil(threads);
    let f = &f;
    std::thread::scope(|scope| {
        let handles: Vec<_> = items
            .chunks(share)
            .map(|part| scope.spawn(move || part.iter().map(f).collect::<Vec<R>>()))
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_order_on_one_thread_and_on_many() {
        let items: Vec<u32> = (0..1000).collect();
        for min_share in [1, 7, 2000] {
            let got = map(&items, min_share, |i| i * 3);
            let want: Vec<u32> = items.iter().map(|i| i * 3).collect();
            assert_eq!(got, want, "min_share {min_share}");
        }
        assert!(map(&[] as &[u32], 1, |i| *i).is_empty());
    }

    #[test]
    fn a_panic_in_a_worker_reaches_the_caller() {
        let items: Vec<u32> = (0..256).collect();
        let caught = std::panic::catch_unwind(|| {
            map(&items, 1, |i| {
                assert!(*i != 200, "item 200");
                *i
            })
        });
        assert!(caught.is_err());
    }
}
