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
pub(crate) fn wide_bodies(bodies: &[(usize, usize)], chain_ns_per_byte: f64) -> Vec<bool> {
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
        let one_warp = (longest_left as f64 * chain_ns_per_byte).max((total_out - wide_out) * ONE_WARP_NS_PER_OUT_BYTE);
        let cost = (wide_out * WIDE_NS_PER_OUT_BYTE).max(one_warp);
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
        let wide = wide_bodies(bodies, CHAIN_NS_PER_BYTE_PRECHECKED);
        for (b, w) in bodies.iter().zip(&wide) {
            assert_eq!(*w, b.0 >= 500_000 && b.1 > b.0 + b.0 / 64, "{b:?}");
        }
        wide.iter().filter(|w| **w).count()
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
        let pre = wide_bodies(&bodies, CHAIN_NS_PER_BYTE_PRECHECKED);
        assert_eq!(wide_bodies(&bodies, CHAIN_NS_PER_BYTE_UNSNAP), pre);
        assert_eq!(wide_bodies(&bodies, CHAIN_NS_PER_BYTE_NVCOMP), pre);
    }

    #[test]
    fn equally_long_bodies_go_wide_only_where_throughput_bounds_the_step() {
        // 250 pages of 1 MiB compressing 2:1 (a step of a read): each one's walk bounds the step, and
        // moving some of them would not shorten it, so none go.
        let step = vec![(MIB / 2, MIB); 250];
        assert!(wide_bodies(&step, CHAIN_NS_PER_BYTE_PRECHECKED).iter().all(|w| !w));
        // 2,000 of them at once (decode alone in one step): the one-warp decoders' throughput bounds
        // them, so the estimate gives the wide decoder, beside them, a share that balances the two
        // (a model's answer: no such file was measured), never the larger part.
        let wide = wide_bodies(&vec![(MIB / 2, MIB); 2000], CHAIN_NS_PER_BYTE_PRECHECKED);
        let n = wide.iter().filter(|w| **w).count();
        assert!((1..1000).contains(&n), "{n}");
    }

    #[test]
    fn a_few_long_bodies_go_wide() {
        let mut bodies = vec![(MIB / 2, MIB); 10];
        bodies.extend(vec![(4_000, 8_000); 500]);
        let wide = wide_bodies(&bodies, CHAIN_NS_PER_BYTE_PRECHECKED);
        assert_eq!(wide, (0..510).map(|i| i < 10).collect::<Vec<_>>());
    }

    #[test]
    fn only_long_compressing_bodies_within_bounds_are_taken() {
        let alone = |b: (usize, usize)| wide_bodies(&[b], CHAIN_NS_PER_BYTE_PRECHECKED)[0];
        assert!(!alone((MIB, MIB)), "one literal");
        assert!(!alone((MIB, MIB + MIB / 128)), "compresses by less than a 64th");
        assert!(!alone((WIDE_MIN_SRC - 1, 4 * WIDE_MIN_SRC)), "too short");
        assert!(!alone((WIDE_MAX_SRC + 1, 2 * WIDE_MAX_SRC)), "too long");
        assert!(alone((WIDE_MIN_SRC, 2 * WIDE_MIN_SRC)), "the shortest taken");
        assert!(alone((WIDE_MAX_SRC, 2 * WIDE_MAX_SRC)), "the longest taken");
        assert!(wide_bodies(&[], CHAIN_NS_PER_BYTE_PRECHECKED).is_empty());
    }

    #[test]
    fn a_longer_body_that_cannot_go_wide_keeps_the_others_on_one_warp() {
        // A 20 MiB compressing body is past the wide decoder's bound: its walk bounds the step anyway,
        // so moving the 1 MiB ones would only add their wide time.
        let bodies = [(20 * MIB, 40 * MIB), (MIB / 2, MIB), (MIB / 2, MIB)];
        assert_eq!(wide_bodies(&bodies, CHAIN_NS_PER_BYTE_PRECHECKED), [false; 3]);
    }
}
