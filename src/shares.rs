//! Consecutive items cut into parts of given shares of their bytes, each item going to the part its
//! middle byte falls in: a GPU read's row groups into steps ([`crate::scan::budget`]), a dataset's
//! row groups over GPUs ([`crate::multi_device`]).

use std::ops::Range;

/// `sizes` cut into consecutive, non-empty ranges, part `j` taking about `weights[j]` over the
/// weights' sum of the bytes: an item goes to the part its middle byte falls in (the last part past
/// the end). Parts no item's middle falls in are left out; no sizes, no ranges.
pub(crate) fn by_middle(sizes: &[u64], weights: &[u64]) -> Vec<Range<usize>> {
    let total: u128 = sizes.iter().map(|&s| s as u128).sum::<u128>().max(1);
    let whole: u128 = weights.iter().map(|&w| w as u128).sum();
    let last = weights.len().saturating_sub(1);
    let mut out: Vec<Range<usize>> = Vec::new();
    let (mut before, mut current) = (0u128, None);
    for (i, &bytes) in sizes.iter().enumerate() {
        let middle = (before + bytes as u128 / 2) * whole;
        let mut bound = 0u128;
        let part = weights
            .iter()
            .position(|&w| {
                bound += w as u128 * total;
                middle < bound
            })
            .unwrap_or(last);
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
        assert_eq!(by_middle(&[100; 8], &[1; 4]), [0..2, 2..4, 4..6, 6..8]);
        // 1/7, 2/7, 4/7 of 64 equal items: 9, 18 and 37.
        assert_eq!(by_middle(&[100; 64], &[1, 2, 4]), [0..9, 9..27, 27..64]);
        // A share no middle falls in makes no range.
        assert_eq!(by_middle(&[10, 1000], &[1, 1, 1, 1]), [0..1, 1..2]);
        // Zero bytes: all in the first part.
        assert_eq!(by_middle(&[0, 0, 0], &[1, 1]), [0..3]);
        assert!(by_middle(&[], &[1, 1]).is_empty());
    }
}
