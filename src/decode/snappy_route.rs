//! Which GPU Snappy decoder takes each body of a step: a pure choice over the bodies' lengths.
//!
//! The one-warp decoders (the pre-check then nvCOMP, or `gp_unsnap`) give a body one warp (or block),
//! which walks its chain of elements one window after another: a step costs them at least the walk of
//! its longest compressing body, however few bytes the step has, and beyond that their throughput.
//! The wide decoder (`kernels/snappy_wide.cu`) spreads a body over a warp per 2 KiB segment: no such
//! floor, but about four times their GPU time per output byte. So the longest bodies go wide when,
//! and only as far as, that lowers the step's estimated time: the 1 MB dictionary pages of a step of
//! 160 kB data pages do; a step of many equally long pages keeps them all, unless their throughput
//! rather than their walk bounds it (a whole file in one step): then the wide decoder, beside them,
//! takes a share.

/// GPU time per compressed byte of a body walked by one warp, measured on the H200 (snappy benchmark
/// file, ncu, the whole file in one step with every body on the one-warp decoders, its longest body
/// 972,546 bytes): nvCOMP's Snappy 15.78 ms and the pre-check 11.50 ms (2026-12-02, after the
/// pre-check's walk went to 32-bit arithmetic; 16.11 ms before, 24.7 ms before it staged its bytes in
/// shared memory). The step model (`device_read`) bounds a step's GPU time with them too.
pub(crate) const NVCOMP_NS_PER_BYTE: f64 = 16.0;
/// The pre-check's walk (see [`NVCOMP_NS_PER_BYTE`]). Left at 12 since its walk got shorter: the
/// 64-byte interior windows (2026-12-03) took the longest walk of a row group from 9.10 to 6.86 ms
/// (ncu), about 9 ns a byte, and a route with 9 instead of 12, tried before them, read no faster.
pub(crate) const PRECHECK_NS_PER_BYTE: f64 = 12.0;
/// The same for `gp_unsnap` (a block per body): 42.2 ms of ncu time for that file in one step, whose
/// longest body is 972,546 bytes (2026-12-01).
pub(crate) const UNSNAP_NS_PER_BYTE: f64 = 43.0;
/// A one-warp walk's cost per byte by default: the pre-check, then nvCOMP.
pub(crate) const CHAIN_NS_PER_BYTE_PRECHECKED: f64 = NVCOMP_NS_PER_BYTE + PRECHECK_NS_PER_BYTE;
/// ... nvCOMP alone (trusted files).
pub(crate) const CHAIN_NS_PER_BYTE_NVCOMP: f64 = NVCOMP_NS_PER_BYTE;
/// ... `gp_unsnap` (where nvCOMP did not load, or when chosen).
pub(crate) const CHAIN_NS_PER_BYTE_UNSNAP: f64 = UNSNAP_NS_PER_BYTE;
/// The one-warp decoders' throughput once the GPU is full, per output byte: the pre-check and nvCOMP
/// took 14.96 + 12.98 ms for the benchmark file's 1.85 GB of output outside its dictionary pages.
const ONE_WARP_NS_PER_OUT_BYTE: f64 = 0.015;
/// The wide decoder's GPU time per output byte: 10.4 ms of its kernels for the file's 150 dictionary
/// pages of 1 MiB (157 MB), 74 ms for 1.4 GB of bodies over 64 KiB.
const WIDE_NS_PER_OUT_BYTE: f64 = 0.06;
/// Bodies shorter than this stay on the one-warp decoders: their walk is short (about 7 ms at most,
/// at 28 ns a byte) and the wide decoder's join gives a whole body to one warp, a step per 2 KiB segment.
pub(crate) const WIDE_MIN_SRC: usize = 256 << 10;
/// ... and longer than this too (the join's walk over 8,192 segments).
pub(crate) const WIDE_MAX_SRC: usize = 16 << 20;

/// A step's GPU time per value it decodes (rows times leaf columns), all its kernels together: run U
/// (2026-12-05, an H200) decoded lineitem SF10 snappy's 8 steps at once, 960 million values, in 88 ms
/// (0.09 ns a value).
pub(crate) const STEP_NS_PER_VALUE: f64 = 0.1;
/// The share of the other steps' work a step's longest walk hides behind, when steps are decoded side
/// by side. Fitted between two bounds the tests pin: above about a third, the flat benchmark file's
/// 525 kB dictionary pages would stay on one warp with 8 steps at once (its walks do show: dividing
/// them by the steps at once read that file 10 % slower in run Q); below about a sixth, lineitem's
/// 550 kB pages would go wide with 4 at once (they need not: every body on the one-warp decoders read
/// lineitem 7 % faster in run U, 102.7 against 109.9 ms on an H100).
pub(crate) const HIDING_SHARE: f64 = 0.25;

/// The steps a decoder is decoding at once, this one among them, and one step's estimated GPU time
/// (its values times [`STEP_NS_PER_VALUE`]; the others are taken to be like it).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct SideBySide {
    pub steps: usize,
    pub step_ns: f64,
}

impl SideBySide {
    /// A step alone.
    pub const ALONE: SideBySide = SideBySide { steps: 1, step_ns: 0.0 };

    /// `steps` at once, this one of `values` decoded values.
    pub fn new(steps: usize, values: u64) -> Self {
        SideBySide {
            steps,
            step_ns: values as f64 * STEP_NS_PER_VALUE,
        }
    }

    /// The GPU time of the other steps' work that hides this step's longest walk.
    fn hidden_ns(&self) -> f64 {
        HIDING_SHARE * self.steps.saturating_sub(1) as f64 * self.step_ns
    }
}

/// Whether a body of `src` compressed bytes declaring `dst` has a long chain of elements: it
/// compresses by a 64th or more. One that does not is a few long literals (Snappy's are up to 4 GiB),
/// which the one-warp decoders copy quickly whatever its length. The benchmark file's dictionary pages
/// of random doubles compress 1.0000x (one literal); those of random integers below 2^40 1.06-1.08x
/// (some 237,000 short literals and 4-byte matches).
pub(crate) fn has_long_chain(src: usize, dst: usize) -> bool {
    dst >= src.saturating_add(src / 64)
}

/// For each body `(src, dst)` of one codec batch, whether the wide decoder takes it, given the
/// one-warp decoders' walk cost `chain_ns_per_byte` (one of the `CHAIN_NS_PER_BYTE_*`). The `k`
/// longest eligible bodies go wide for the `k` that minimises the estimated time: the longer of the
/// wide decoder's on those and the one-warp decoders' on the rest (bound by their longest chain or
/// their throughput), since the wide decoder runs beside them on a stream of its own
/// (`DeviceExecutor::wide_unsnap_start`). Adding the two times instead kept the whole benchmark file
/// in one step on the one-warp decoders, measured slower on the H200 (bench, decode alone, two rounds
/// alternating: 34.92 / 36.56 / 34.51 / 34.46 ms with its 150 dictionary pages wide, against 38.27 /
/// 38.36 / 40.80 / 41.70 ms; 40.52 / 40.56 with every body on nvCOMP). Trusted files (no pre-check)
/// lost in that A/B (34.63 / 33.70 ms against 30.96 / 31.17), not in a run after it (31.36 / 30.65).
/// TPC-H lineitem SF10 (run O, an H100, two rounds alternating) goes the other way for decode alone:
/// with every body on the one-warp decoders (`GPU_PARQUET_SNAPPY=nvcomp`) its 8 steps decoded at once
/// took 78.7 / 80.2 ms against 92.1 / 92.3 ms here (the wide decoder took l_comment's 260 kB plain
/// pages and the 400-550 kB dictionary pages), while file to device columns, whose last step waits
/// for its own longest walk, took 140.8 / 130.9 against 132.2 / 126.2 ms. The estimate below looks
/// at one step alone; steps decoded side by side hide a long walk behind each other's work. Dividing
/// the walk's cost by the steps being decoded at once (branch `route-side-by-side`, run Q, an H100, two
/// rounds against this) took lineitem's decode alone to 87.0 / 86.3 ms from 92.2 / 91.8 but not its
/// file to device columns (128.5 / 128.7 against 125.1 / 131.9 ms), and the flat snappy file's to
/// 46.9 / 46.8 from 42.7 / 42.9 ms: not taken.
pub(crate) fn wide_bodies(bodies: &[(usize, usize)], chain_ns_per_byte: f64, beside: SideBySide) -> Vec<bool> {
    let chain = |&(src, dst): &(usize, usize)| if has_long_chain(src, dst) { src } else { 0 };
    let eligible = |b: &(usize, usize)| (WIDE_MIN_SRC..=WIDE_MAX_SRC).contains(&b.0) && chain(b) > 0;
    let mut candidates: Vec<usize> = (0..bodies.len()).filter(|&i| eligible(&bodies[i])).collect();
    candidates.sort_by_key(|&i| std::cmp::Reverse(bodies[i].0));
    // The longest chain among the bodies that can never go wide.
    let fixed_chain = bodies.iter().filter(|b| !eligible(b)).map(chain).max().unwrap_or(0);
    let total_out: f64 = bodies.iter().map(|b| b.1 as f64).sum();
    let mut wide_out = 0f64;
    let mut best = (f64::INFINITY, 0usize);
    for k in 0..=candidates.len() {
        let longest_left = candidates.get(k).map_or(0, |&i| bodies[i].0).max(fixed_chain);
        let walk = longest_left as f64 * chain_ns_per_byte;
        let throughput = (total_out - wide_out) * ONE_WARP_NS_PER_OUT_BYTE;
        let wide_ns = wide_out * WIDE_NS_PER_OUT_BYTE;
        let hidden = beside.hidden_ns();
        let cost = if hidden > 0.0 {
            // Beside other steps the GPU is full: the wide decoder's work adds to the others', and
            // the walk shows only past what their work hides.
            (walk - hidden).max(throughput + wide_ns)
        } else {
            // Alone: the wide decoder runs free beside the one-warp decoders.
            wide_ns.max(walk.max(throughput))
        };
        if cost < best.0 {
            best = (cost, k);
        }
        if let Some(&i) = candidates.get(k) {
            wide_out += bodies[i].1 as f64;
        }
    }
    let mut wide = vec![false; bodies.len()];
    for &i in &candidates[..best.1] {
        wide[i] = true;
    }
    wide
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: usize = 1 << 20;

    /// One step of the snappy benchmark file: 6 row groups, each with the 1 MiB dictionary pages of
    /// `id`, `a` and `ts` (compressing), of `c` and `d` (one literal each), and 53 data pages of 160 kB
    /// in each of 5 columns.
    fn benchmark_step() -> Vec<(usize, usize)> {
        let mut b = Vec::new();
        for _ in 0..6 {
            b.extend([(525_300, 1_050_112), (975_000, 1_050_112), (658_600, 1_050_112)]);
            b.extend([(1_050_166, 1_050_112), (1_051_846, 1_051_792)]);
            b.extend((0..5 * 53).map(|i| (60_000 + (i % 7) * 14_000, 160_008)));
        }
        b
    }

    /// Asserts that the bodies going wide are exactly the long compressing dictionary pages of
    /// [`benchmark_step`] (`id`, `a` and `ts`); returns how many.
    fn only_long_dictionary_pages_go_wide(bodies: &[(usize, usize)]) -> usize {
        let wide = wide_bodies(bodies, CHAIN_NS_PER_BYTE_PRECHECKED, SideBySide::ALONE);
        for (b, w) in bodies.iter().zip(&wide) {
            assert_eq!(*w, b.0 >= 500_000 && b.1 > b.0 + b.0 / 64, "{b:?}");
        }
        wide.iter().filter(|w| **w).count()
    }

    /// Values in a step of 6 row groups of the benchmark file (1,000,000 rows, 7 columns each).
    const BENCHMARK_STEP_VALUES: u64 = 6 * 1_000_000 * 7;

    /// One of the 8 steps of TPC-H lineitem SF10 as tpchgen-cli writes it (snappy, 524 row groups of
    /// 113,743 rows and 16 columns): 65 row groups, each with its columns' dictionary pages (sizes from
    /// `inspect` of SF1, whose row groups are alike: `l_extendedprice`'s 550 kB the longest,
    /// `l_comment`'s 446 kB, `l_partkey`'s 410 kB), `l_comment`'s four plain pages of about 260 kB
    /// and 96 data pages of 3-45 kB.
    fn lineitem_step() -> (Vec<(usize, usize)>, u64) {
        let mut b = Vec::new();
        for _ in 0..65 {
            b.extend([
                (112_900, 238_000),
                (409_656, 694_000),
                (40_000, 80_000),
                (550_625, 852_000),
            ]);
            b.extend([(446_182, 1_048_000), (24_000, 24_000), (5_000, 12_000), (300, 600)]);
            b.extend([
                (259_219, 600_000),
                (269_425, 620_000),
                (268_955, 620_000),
                (215_141, 500_000),
            ]);
            b.extend((0..96).map(|i| (3_000 + (i % 15) * 3_000, 3_000 + (i % 15) * 3_000)));
        }
        (b, 65 * 113_743 * 16)
    }

    fn wide_count(bodies: &[(usize, usize)], beside: SideBySide) -> usize {
        wide_bodies(bodies, CHAIN_NS_PER_BYTE_PRECHECKED, beside)
            .iter()
            .filter(|w| **w)
            .count()
    }

    #[test]
    fn steps_side_by_side_hide_lineitems_walks_but_not_the_benchmark_files() {
        let (lineitem, values) = lineitem_step();
        // Alone, as before: the longest bodies go wide.
        assert!(wide_count(&lineitem, SideBySide::ALONE) >= 65);
        assert_eq!(
            wide_count(&lineitem, SideBySide::new(1, values)),
            wide_count(&lineitem, SideBySide::ALONE)
        );
        // Beside one other step, only `l_extendedprice`'s 550 kB dictionary pages.
        let two = wide_bodies(&lineitem, CHAIN_NS_PER_BYTE_PRECHECKED, SideBySide::new(2, values));
        for (b, w) in lineitem.iter().zip(&two) {
            assert_eq!(*w, b.0 == 550_625, "{b:?}");
        }
        // Beside 3 or 7 others, their work hides every walk: none.
        assert_eq!(wide_count(&lineitem, SideBySide::new(4, values)), 0);
        assert_eq!(wide_count(&lineitem, SideBySide::new(8, values)), 0);
        // The benchmark file's long compressing dictionary pages go wide however many steps run.
        let flat = benchmark_step();
        for steps in [1, 2, 4, 8] {
            let wide = wide_bodies(
                &flat,
                CHAIN_NS_PER_BYTE_PRECHECKED,
                SideBySide::new(steps, BENCHMARK_STEP_VALUES),
            );
            for (b, w) in flat.iter().zip(&wide) {
                assert_eq!(*w, b.0 >= 500_000 && b.1 > b.0 + b.0 / 64, "{steps} steps: {b:?}");
            }
        }
    }

    #[test]
    fn the_long_dictionary_pages_of_a_step_go_wide_and_nothing_else() {
        assert_eq!(only_long_dictionary_pages_go_wide(&benchmark_step()), 18);
    }

    #[test]
    fn the_whole_file_in_one_step_sends_every_long_dictionary_page_wide() {
        // 50 row groups at once (decode alone): the one-warp decoders' throughput bounds them about as
        // much as their longest walk, and the wide decoder's time on the long dictionary pages stays
        // under that, beside them.
        let step = benchmark_step();
        let bodies: Vec<_> = (0..50 / 6 + 1).flat_map(|_| step.iter().copied()).collect();
        only_long_dictionary_pages_go_wide(&bodies);
    }

    #[test]
    fn the_choice_is_the_same_for_every_one_warp_decoder_on_that_step() {
        let bodies = benchmark_step();
        let pre = wide_bodies(&bodies, CHAIN_NS_PER_BYTE_PRECHECKED, SideBySide::ALONE);
        assert_eq!(wide_bodies(&bodies, CHAIN_NS_PER_BYTE_UNSNAP, SideBySide::ALONE), pre);
        assert_eq!(wide_bodies(&bodies, CHAIN_NS_PER_BYTE_NVCOMP, SideBySide::ALONE), pre);
    }

    #[test]
    fn equally_long_bodies_go_wide_only_where_throughput_bounds_the_step() {
        // 250 pages of 1 MiB compressing 2:1 (a step of a read): each one's walk bounds the step, and
        // moving some of them would not shorten it, so none go.
        let step = vec![(MIB / 2, MIB); 250];
        assert!(
            wide_bodies(&step, CHAIN_NS_PER_BYTE_PRECHECKED, SideBySide::ALONE)
                .iter()
                .all(|w| !w)
        );
        // 2,000 of them at once (decode alone in one step): the one-warp decoders' throughput bounds
        // them, so the estimate gives the wide decoder, beside them, a share that balances the two
        // (a model's answer: no such file was measured), never the larger part.
        let wide = wide_bodies(
            &vec![(MIB / 2, MIB); 2000],
            CHAIN_NS_PER_BYTE_PRECHECKED,
            SideBySide::ALONE,
        );
        let n = wide.iter().filter(|w| **w).count();
        assert!((1..1000).contains(&n), "{n}");
    }

    #[test]
    fn a_few_long_bodies_go_wide() {
        let mut bodies = vec![(MIB / 2, MIB); 10];
        bodies.extend(vec![(4_000, 8_000); 500]);
        let wide = wide_bodies(&bodies, CHAIN_NS_PER_BYTE_PRECHECKED, SideBySide::ALONE);
        assert_eq!(wide, (0..510).map(|i| i < 10).collect::<Vec<_>>());
    }

    #[test]
    fn only_long_compressing_bodies_within_bounds_are_taken() {
        let alone = |b: (usize, usize)| wide_bodies(&[b], CHAIN_NS_PER_BYTE_PRECHECKED, SideBySide::ALONE)[0];
        assert!(!alone((MIB, MIB)), "one literal");
        assert!(!alone((MIB, MIB + MIB / 128)), "compresses by less than a 64th");
        assert!(!alone((WIDE_MIN_SRC - 1, 4 * WIDE_MIN_SRC)), "too short");
        assert!(!alone((WIDE_MAX_SRC + 1, 2 * WIDE_MAX_SRC)), "too long");
        assert!(alone((WIDE_MIN_SRC, 2 * WIDE_MIN_SRC)), "the shortest taken");
        assert!(alone((WIDE_MAX_SRC, 2 * WIDE_MAX_SRC)), "the longest taken");
        assert!(wide_bodies(&[], CHAIN_NS_PER_BYTE_PRECHECKED, SideBySide::ALONE).is_empty());
    }

    #[test]
    fn a_longer_body_that_cannot_go_wide_keeps_the_others_on_one_warp() {
        // A 20 MiB compressing body is past the wide decoder's bound: its walk bounds the step anyway,
        // so moving the 1 MiB ones would only add their wide time.
        let bodies = [(20 * MIB, 40 * MIB), (MIB / 2, MIB), (MIB / 2, MIB)];
        assert_eq!(
            wide_bodies(&bodies, CHAIN_NS_PER_BYTE_PRECHECKED, SideBySide::ALONE),
            [false; 3]
        );
    }
}
