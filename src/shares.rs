//! Consecutive items cut into parts of given shares of their bytes, each item going to the part its
//! middle byte falls in: a GPU read's row groups into steps ([`crate::scan::budget`]), a dataset's
//! row groups over GPUs ([`crate::multi_device`]).

use std::ops::Range;

/// `sizes` cut into at most `parts` consecutive, non-empty ranges of about equal bytes: an item goes
/// to the part its middle byte falls in ([`share_of_middle`]). Parts no item's middle falls in are
/// left out; no sizes, no ranges; zero bytes in all, one range.
pub(crate) fn by_middle(sizes: &[u64], parts: usize) -> Vec<Range<usize>> {
    let total: u128 = sizes.iter().map(|&s| s as u128).sum();
    let mut out: Vec<Range<usize>> = Vec::new();
    let (mut before, mut current) = (0u128, None);
    for (i, &bytes) in sizes.iter().enumerate() {
        let part = share_of_middle(before, bytes, total, parts).unwrap_or(0);
        match out.last_mut() {
            Some(r) if current == Some(part) => r.end = i + 1,
            _ => {
                out.push(i..i + 1);
                current = Some(part);
            }
        }
        before += bytes as u128;
    }
    out
}

/// Which of `groups` equal shares of `total` bytes holds the middle byte of `bytes` bytes that start
/// `before` bytes in (the last share at most); `None` when `total` is 0.
pub(crate) fn share_of_middle(before: u128, bytes: u64, total: u128, groups: usize) -> Option<usize> {
    let middle = before + bytes as u128 / 2;
    (middle * groups.max(1) as u128)
        .checked_div(total)
        .map(|k| (k as usize).min(groups.max(1) - 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_go_to_the_share_their_middle_byte_falls_in() {
        assert_eq!(by_middle(&[100; 8], 4), [0..2, 2..4, 4..6, 6..8]);
        // A share no middle falls in makes no range.
        assert_eq!(by_middle(&[10, 1000], 4), [0..1, 1..2]);
        // Zero bytes: all in the first part.
        assert_eq!(by_middle(&[0, 0, 0], 2), [0..3]);
        assert!(by_middle(&[], 2).is_empty());
    }
}
