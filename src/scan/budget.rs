//! The scan's memory budget, and how row groups are cut into steps under it.

use crate::error::{Error, Location, Result};

/// What a scan may hold in memory at once: the one meaning of a memory limit, for every read.
///
/// - **The limit** ([`limit`](Self::limit), bytes) bounds what the whole scan holds at once, in the
///   memory its steps land in: host memory for raw chunks and host decoding, device memory for a
///   GPU decode (where, unset, it is half the GPU's free memory when the read starts, counting what the
///   device's memory pool holds unused as free: `GpuContext::available_memory`).
/// - **Steps**: a scan reads its row groups in *steps*, runs of consecutive row groups of one file,
///   and holds at most [`max_steps_in_flight`](Self::max_steps_in_flight) of them at once (being
///   read, read and waiting, being turned into their result, or handed out and not yet given back
///   by moving on to the next).
/// - **A step** is cut to at most [`per_step`](Self::per_step) bytes: the limit over the most steps
///   in flight. What a step needs is counted by what it ends in: its fetched column chunks for raw
///   chunks and host decoding; for a GPU decode its chunks plus twice their uncompressed bytes
///   (output and decompressed pages) plus temporaries per value.
/// - **A row group alone** may need at most [`per_row_group`](Self::per_row_group): the limit over
///   the fewest steps in flight, [`min_steps_in_flight`](Self::min_steps_in_flight) (two wherever a
///   step is read while another is used, one for a whole read). A row group is never split: one
///   over that is an error naming it, raised before anything is read. A step larger than
///   `per_step` (one such row group) leaves room for fewer steps in flight
///   ([`steps_in_flight_for`](Self::steps_in_flight_for)).
///
/// Without a limit, steps are cut by their other rules only (one row group per step for raw chunks
/// and host decoding), and [`max_steps_in_flight`](Self::max_steps_in_flight) are held at once.
///
/// The reads use it so: [`Reader::read`](crate::Reader::read) and
/// [`read_batches`](crate::Reader::read_batches) are one step ([`whole`](Self::whole)); a
/// [`stream`](crate::Reader::stream) or a host-decoded [`scan`](crate::Reader::scan) holds two
/// steps ([`streaming`](Self::streaming)); a GPU decode holds two to five
/// ([`Self::new`]`(limit, 2, 5)`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryBudget {
    limit: Option<u64>,
    min_steps_in_flight: usize,
    max_steps_in_flight: usize,
}

impl MemoryBudget {
    /// `limit` bytes, held by `min_steps_in_flight` to `max_steps_in_flight` steps (at least one;
    /// the most at least the fewest).
    pub fn new(limit: Option<u64>, min_steps_in_flight: usize, max_steps_in_flight: usize) -> Self {
        let min = min_steps_in_flight.max(1);
        Self {
            limit,
            min_steps_in_flight: min,
            max_steps_in_flight: max_steps_in_flight.max(min),
        }
    }

    /// A whole read: one step, which must fit in `limit`.
    pub(crate) fn whole(limit: Option<u64>) -> Self {
        Self::new(limit, 1, 1)
    }

    /// A stream: two steps, the one handed out and the one being read, each within half of `limit`.
    pub fn streaming(limit: Option<u64>) -> Self {
        Self::new(limit, 2, 2)
    }

    /// No limit: steps held `steps_in_flight` at a time.
    pub fn unlimited(steps_in_flight: usize) -> Self {
        Self::new(None, steps_in_flight, steps_in_flight)
    }

    /// The whole scan's limit, bytes (`None`: unlimited).
    pub(crate) fn limit(&self) -> Option<u64> {
        self.limit
    }

    /// Steps held at once, at most.
    pub fn max_steps_in_flight(&self) -> usize {
        self.max_steps_in_flight
    }

    /// Steps held at once, at least (what a row group alone is measured against).
    pub fn min_steps_in_flight(&self) -> usize {
        self.min_steps_in_flight
    }

    /// The most bytes a step is cut to: the limit over the most steps in flight.
    pub fn per_step(&self) -> Option<u64> {
        self.limit.map(|l| l / self.max_steps_in_flight as u64)
    }

    /// The most bytes one row group alone may need: the limit over the fewest steps in flight.
    pub(crate) fn per_row_group(&self) -> Option<u64> {
        self.limit.map(|l| l / self.min_steps_in_flight as u64)
    }

    /// Steps held at once when the largest step needs `largest` bytes: as many as the limit holds,
    /// within the fewest and the most (the most without a limit).
    pub(crate) fn steps_in_flight_for(&self, largest: u64) -> usize {
        match self.limit {
            None => self.max_steps_in_flight,
            Some(l) => ((l / largest.max(1)) as usize).clamp(self.min_steps_in_flight, self.max_steps_in_flight),
        }
    }

    /// The first row group of `per_group` (`(row group, bytes it needs)`) over
    /// [`per_row_group`](Self::per_row_group), as an error at `location` naming it; `what` says what
    /// its bytes are and `hint` what to do.
    pub(crate) fn check_row_groups(
        &self,
        per_group: &[(usize, u64)],
        location: &Location,
        what: &str,
        hint: &str,
    ) -> Result<()> {
        let Some(most) = self.per_row_group() else {
            return Ok(());
        };
        let Some(&(rg, bytes)) = per_group.iter().find(|(_, bytes)| *bytes > most) else {
            return Ok(());
        };
        let limit = self.limit.unwrap_or(0);
        let share = match self.min_steps_in_flight {
            1 => format!("the memory limit of {limit} bytes"),
            2 => format!("half the memory limit of {limit} bytes (two steps are held at once)"),
            n => format!("a {n}th of the memory limit of {limit} bytes ({n} steps are held at once)"),
        };
        Err(Error::InvalidRequest {
            location: Location {
                row_group: Some(rg),
                ..location.clone()
            },
            message: format!("{what} {bytes} bytes, over {share}; a row group is never split{hint}"),
        })
    }

    /// `(row group, bytes)` in read order cut into steps of consecutive row groups, each within
    /// [`per_step`](Self::per_step) (one row group per step without a limit); a row group over
    /// [`per_row_group`](Self::per_row_group) is an error at `location` naming it.
    pub(crate) fn plan_steps(&self, per_group: Vec<(usize, u64)>, location: &Location) -> Result<Vec<Vec<usize>>> {
        self.check_row_groups(&per_group, location, "this row group's selected column chunks need", "")?;
        Ok(match self.per_step() {
            None => per_group.into_iter().map(|(rg, _)| vec![rg]).collect(),
            Some(per_step) => pack_consecutive(per_group, per_step),
        })
    }
}

/// Consecutive `(row group, bytes)` packed greedily into groups of at most `target` bytes (a group
/// holds at least one row group, whatever its size).
pub(crate) fn pack_consecutive(sizes: Vec<(usize, u64)>, target: u64) -> Vec<Vec<usize>> {
    let mut out: Vec<Vec<usize>> = Vec::new();
    let mut used = 0u64;
    for (rg, bytes) in sizes {
        match out.last_mut() {
            Some(g) if used + bytes <= target => {
                g.push(rg);
                used += bytes;
            }
            _ => {
                out.push(vec![rg]);
                used = bytes;
            }
        }
    }
    out
}

/// Consecutive `(row group, bytes)` cut into at most `groups` groups of about equal bytes: each row
/// group goes to the group its middle byte falls in. Unlike [`pack_consecutive`] with a target of
/// the total over `groups`, uneven row groups never spill into one more, small, group (a step with a
/// compressed page costs about as much however small it is).
pub(crate) fn split_balanced(sizes: &[(usize, u64)], groups: usize) -> Vec<Vec<usize>> {
    let bytes: Vec<u64> = sizes.iter().map(|s| s.1).collect();
    crate::shares::by_middle(&bytes, groups)
        .into_iter()
        .map(|r| sizes[r].iter().map(|s| s.0).collect())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sizes(bytes: &[u64]) -> Vec<(usize, u64)> {
        bytes.iter().copied().enumerate().collect()
    }

    #[test]
    fn steps_stay_within_the_share_of_the_limit() {
        let sizes = vec![(0, 40), (1, 40), (2, 40), (3, 90)];
        let budget = MemoryBudget::streaming(Some(200));
        assert_eq!(budget.per_step(), Some(100));
        let steps = budget.plan_steps(sizes.clone(), &Location::default()).unwrap();
        assert_eq!(steps, vec![vec![0, 1], vec![2], vec![3]]);
        for step in &steps {
            let bytes: u64 = step.iter().map(|rg| sizes[*rg].1).sum();
            assert!(bytes <= 100, "step {step:?} holds {bytes}");
        }
    }

    #[test]
    fn a_row_group_over_its_share_is_an_error_naming_it() {
        let budget = MemoryBudget::streaming(Some(100));
        let e = budget
            .plan_steps(vec![(0, 10), (5, 60)], &Location::default())
            .unwrap_err()
            .to_string();
        assert!(e.contains("60 bytes") && e.contains("row group 5"), "{e}");
    }

    #[test]
    fn a_gpu_budget_cuts_steps_to_a_fifth_and_row_groups_to_half() {
        let budget = MemoryBudget::new(Some(1000), 2, 5);
        assert_eq!(budget.per_step(), Some(200));
        assert_eq!(budget.per_row_group(), Some(500));
        // Larger steps leave room for fewer of them, two at least and five at most.
        assert_eq!(budget.steps_in_flight_for(150), 5);
        assert_eq!(budget.steps_in_flight_for(300), 3);
        assert_eq!(budget.steps_in_flight_for(480), 2);
        assert_eq!(MemoryBudget::new(None, 2, 5).steps_in_flight_for(1 << 40), 5);
        let e = budget
            .check_row_groups(&[(0, 400), (1, 501)], &Location::default(), "decoding it needs", "")
            .unwrap_err()
            .to_string();
        assert!(e.contains("row group 1") && e.contains("half the memory limit"), "{e}");
    }

    #[test]
    fn without_a_limit_each_row_group_is_a_step() {
        let steps = MemoryBudget::unlimited(2)
            .plan_steps(vec![(3, 1 << 40), (7, 1)], &Location::default())
            .unwrap();
        assert_eq!(steps, vec![vec![3], vec![7]]);
    }

    #[test]
    fn balanced_splits_give_the_groups_asked_for_in_order() {
        // Fifty slightly uneven row groups in two: two groups, not the three a greedy packing to
        // half the total gives.
        let uneven: Vec<u64> = (0..50).map(|i| 32_000_000 + (i % 3) * 100_000).collect();
        let total: u64 = uneven.iter().sum();
        assert_eq!(pack_consecutive(sizes(&uneven), total / 2).len(), 3);
        let two = split_balanced(&sizes(&uneven), 2);
        assert_eq!(two.len(), 2);
        assert_eq!(two.concat(), (0..50).collect::<Vec<_>>());
        assert!(two[0].len().abs_diff(two[1].len()) <= 1, "{two:?}");
        // Never more groups than asked, nor than row groups; every row group once, in order.
        for groups in 1..12 {
            let cut = split_balanced(&sizes(&[5, 1, 1, 1, 9, 2, 2]), groups);
            assert!(cut.len() <= groups.min(7), "{groups}: {cut:?}");
            assert_eq!(cut.concat(), (0..7).collect::<Vec<_>>());
            assert!(cut.iter().all(|g| !g.is_empty()));
        }
        // Empty row groups and an empty file.
        assert_eq!(split_balanced(&sizes(&[0, 0, 0]), 2), vec![vec![0, 1, 2]]);
        assert!(split_balanced(&[], 3).is_empty());
    }
}
