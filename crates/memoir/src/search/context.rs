//! Opening a hit in context: which messages surround a `seq`.

use std::ops::Range;

/// The index range of the messages within `n` of the message written at
/// `seq` (`message_seqs` ascending, as [`crate::transcript::Transcript`] has
/// them). When no message has exactly that `seq` (it was compacted away),
/// the range centres on the first message after it.
pub fn around(message_seqs: &[u64], seq: u64, n: usize) -> Range<usize> {
    let at = message_seqs.partition_point(|&s| s < seq);
    let at = at.min(message_seqs.len().saturating_sub(1));
    let start = at.saturating_sub(n);
    let end = (at + n + 1).min(message_seqs.len());
    start..end.max(start)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_range_is_clamped_and_finds_the_nearest_later_message() {
        let seqs = [1, 2, 3, 7, 8, 9];
        assert_eq!(around(&seqs, 3, 1), 1..4);
        assert_eq!(around(&seqs, 1, 2), 0..3);
        assert_eq!(
            around(&seqs, 5, 0),
            3..4,
            "seq 5 was compacted away: show 7"
        );
        assert_eq!(around(&seqs, 99, 1), 4..6);
        assert_eq!(around(&[], 3, 2), 0..0);
    }
}
