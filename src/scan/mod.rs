//! The one scan: how a read plans its steps under a memory budget and fetches them.
//!
//! Every host read ([`crate::Reader::read`], [`crate::Reader::read_batches`],
//! [`crate::Reader::stream`]) cuts its row groups into steps through [`MemoryBudget::plan_steps`],
//! and every stepped fetch (a GPU decode's, the benchmark's) goes through [`fetch_steps`].

use std::sync::Arc;

use crate::error::{Error, Location, Result};
use crate::io::select::{AnyBackend, AnyBuffer};
use crate::metadata::ParquetSource;
use crate::plan::ReadPlan;
use crate::reader::{ColumnChunks, fetch, pack_consecutive};

/// What a read may hold in memory at once.
///
/// Its one meaning: a read holds at most [`steps_in_flight`](Self::steps_in_flight) steps at once
/// (fetched, being fetched or handed out), and a step — a run of consecutive row groups — holds at
/// most [`per_step`](Self::per_step) bytes of fetched column chunks, so the read never holds more
/// than [`limit`](Self::limit). A row group is never split: one whose chunks alone need more than
/// [`per_row_group`](Self::per_row_group) (the same as `per_step`) is an error naming it, raised
/// before anything is read. Without a limit every row group is a step of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryBudget {
    limit: Option<u64>,
    steps_in_flight: usize,
}

impl MemoryBudget {
    /// No limit: steps are single row groups, held `steps_in_flight` at a time.
    pub fn unlimited(steps_in_flight: usize) -> Self {
        Self {
            limit: None,
            steps_in_flight: steps_in_flight.max(1),
        }
    }

    /// `limit` bytes shared among `steps_in_flight` steps (at least one).
    pub fn new(limit: Option<u64>, steps_in_flight: usize) -> Self {
        Self {
            limit,
            steps_in_flight: steps_in_flight.max(1),
        }
    }

    /// The whole read's limit, bytes (`None`: unlimited).
    pub fn limit(&self) -> Option<u64> {
        self.limit
    }

    /// Steps held at once.
    pub fn steps_in_flight(&self) -> usize {
        self.steps_in_flight
    }

    /// The most bytes of column chunks one step may hold: the limit over the steps in flight.
    pub fn per_step(&self) -> Option<u64> {
        self.limit.map(|l| l / self.steps_in_flight as u64)
    }

    /// The most bytes one row group alone may need (a step holds at least one row group).
    pub fn per_row_group(&self) -> Option<u64> {
        self.per_step()
    }

    /// `(row group, bytes)` in read order cut into steps of consecutive row groups, each within
    /// [`per_step`](Self::per_step); a row group over [`per_row_group`](Self::per_row_group) is an
    /// error at `location` with that row group.
    pub(crate) fn plan_steps(&self, per_group: Vec<(usize, u64)>, location: &Location) -> Result<Vec<Vec<usize>>> {
        let Some(per_step) = self.per_step() else {
            return Ok(per_group.into_iter().map(|(rg, _)| vec![rg]).collect());
        };
        if let Some(&(rg, bytes)) = per_group.iter().find(|(_, bytes)| *bytes > per_step) {
            let limit = self.limit.unwrap_or(0);
            let share = match self.steps_in_flight {
                1 => "the memory limit".to_string(),
                n => format!("a {n}th of the memory limit of {limit} bytes ({n} steps are held at once)"),
            };
            return Err(Error::InvalidRequest {
                location: Location {
                    row_group: Some(rg),
                    ..location.clone()
                },
                message: format!(
                    "this row group's selected column chunks need {bytes} bytes, over {share}; a row group is never split"
                ),
            });
        }
        Ok(pack_consecutive(per_group, per_step))
    }
}

/// Fetches `plans` in order, as a GPU decode's reading thread does: `admit(k)` is called before step
/// `k` is read (it may wait for memory; `false` stops), and each step read goes to `deliver`. On the
/// staged backend the same workers read every step ([`StagedBackend::fetch_steps`]): a step is
/// delivered, from one of them and in no set order, once its copies are queued (work on its buffer's
/// stream comes after them); a failed step is delivered as its error and stops the rest. Other
/// backends, or `per_call`, fetch one step per call, in order, delivered as each call returns.
///
/// [`StagedBackend::fetch_steps`]: crate::io::staged::StagedBackend::fetch_steps
pub(crate) fn fetch_steps(
    io: &AnyBackend,
    source: &ParquetSource,
    plans: &[Arc<ReadPlan>],
    threads: usize,
    per_call: bool,
    admit: &mut dyn FnMut(usize) -> bool,
    deliver: &(dyn Fn(usize, Result<ColumnChunks>) + Sync),
) {
    let stepped = !per_call;
    let Some(staged) = io.staged().filter(|_| stepped) else {
        for (k, plan) in plans.iter().enumerate() {
            if !admit(k) {
                return;
            }
            let r = fetch(io, source, plan.clone(), threads);
            let failed = r.is_err();
            deliver(k, r);
            if failed {
                return;
            }
        }
        return;
    };
    let chunks = |k: usize, f: crate::io::staged::SteppedFetch| {
        let mut log = f.log;
        io.note_choice(&mut log);
        ColumnChunks::read(
            source,
            plans[k].clone(),
            AnyBuffer::Device(f.buffer),
            log,
            f.queued,
            threads,
        )
    };
    staged.fetch_steps(source, plans, admit, &|k, r| deliver(k, r.and_then(|f| chunks(k, f))));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_stay_within_the_share_of_the_limit() {
        let sizes = vec![(0, 40), (1, 40), (2, 40), (3, 90)];
        let budget = MemoryBudget::new(Some(200), 2);
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
        let budget = MemoryBudget::new(Some(100), 2);
        let e = budget
            .plan_steps(vec![(0, 10), (5, 60)], &Location::default())
            .unwrap_err()
            .to_string();
        assert!(e.contains("60 bytes") && e.contains("row group 5"), "{e}");
    }

    #[test]
    fn without_a_limit_each_row_group_is_a_step() {
        let steps = MemoryBudget::unlimited(2)
            .plan_steps(vec![(3, 1 << 40), (7, 1)], &Location::default())
            .unwrap();
        assert_eq!(steps, vec![vec![3], vec![7]]);
    }
}
