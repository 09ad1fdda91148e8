//! Host reference of `kernels/snappy.cu` (`gp_unsnap`): Snappy decompression of a page body that is
//! safe on any input. Its status is the pre-check's ([`super::validate::validate_one`]) on the same
//! body; a body that passes decompresses to what the `snap` crate gives.

use crate::decode::layout::{validate_codec, validate_status as st};

/// `gp_unsnap`'s status and, when it is 0, its output, for one body declaring `dst_len` bytes.
pub fn unsnap_one(body: &[u8], dst_len: u64) -> (u32, Option<Vec<u8>>) {
    if body.len() as u64 >= 1 << 31 || dst_len >= 1 << 31 {
        return (st::TOO_LARGE, None);
    }
    let status = super::validate::validate_one(validate_codec::SNAPPY, body, dst_len);
    if status != st::OK {
        return (status, None);
    }
    // The walk above proved the stream well formed and of exactly `dst_len` bytes.
    match snap::raw::Decoder::new().decompress_vec(body) {
        Ok(out) if out.len() as u64 == dst_len => (st::OK, Some(out)),
        Ok(out) => panic!(
            "a Snappy stream that passed the walk decoded to {} bytes, not {dst_len}",
            out.len()
        ),
        Err(e) => panic!("a Snappy stream that passed the walk failed to decode: {e}"),
    }
}

/// Bodies for `gp_unsnap` (the emulation and the GPU tests): the pre-check's Snappy cases, and pages
/// like Parquet's (8-byte sequential and random values, long literals, runs, matches reaching past the
/// kernel's 4 KiB ring), whole, cut and with bytes changed.
#[cfg(any(test, feature = "conformance"))]
pub fn kernel_cases(big: usize) -> Vec<(u64, Vec<u8>)> {
    let mut next = super::xorshift(0x2545_f491_4f6c_dd1du64);
    let mut cases: Vec<(u64, Vec<u8>)> = super::validate::cases::kernel_cases()
        .into_iter()
        .filter(|(c, _, _)| *c == validate_codec::SNAPPY)
        .map(|(_, want, body)| (want, body))
        .collect();
    let values = big / 8;
    let mut datas: Vec<Vec<u8>> = vec![
        // Sequential 64-bit values (a row id): a literal byte and a 7-byte match of the value before.
        (0..values as u64).flat_map(|v| (v + 70_000).to_le_bytes()).collect(),
        // Timestamps in microseconds, 1000 apart.
        (0..values as u64)
            .flat_map(|v| (v * 1000 + 1_600_000_000_000_000).to_le_bytes())
            .collect(),
        // Random values below 2^40: short literals, and matches of zero bytes far back.
        (0..values).flat_map(|_| (next() >> 24).to_le_bytes()).collect(),
        // Random doubles: one long literal.
        (0..values)
            .flat_map(|_| (next() as f64 / u64::MAX as f64).to_le_bytes())
            .collect(),
        // A run: overlapping matches (offset 1) in windows producing over 256 bytes.
        vec![7u8; big],
    ];
    // Short runs and short periods (overlapping matches of offset 1-3 in windows producing under 256
    // bytes), between random bytes.
    let mut runs = Vec::with_capacity(big);
    while runs.len() < big {
        let period = 1 + next() as usize % 3;
        let pattern: Vec<u8> = (0..period).map(|_| next() as u8).collect();
        let len = 6 + next() as usize % 20;
        runs.extend((0..len).map(|i| pattern[i % period]));
        runs.extend((0..next() as usize % 4).map(|_| next() as u8));
    }
    datas.push(runs);
    // Sections of random bytes (literals over 256 bytes and over 4 KiB) between repeats of earlier
    // sections (matches reaching 1-60 KiB back).
    let mut mixed = Vec::with_capacity(big);
    while mixed.len() < big {
        let len = [37usize, 300, 5000, 12][next() as usize % 4];
        if mixed.len() > 100 && next().is_multiple_of(2) {
            let back = 1 + next() as usize % mixed.len().min(60_000);
            let from = mixed.len() - back;
            for i in 0..len {
                mixed.push(mixed[from + i]);
            }
        } else {
            mixed.extend((0..len).map(|_| next() as u8));
        }
    }
    datas.push(mixed);
    for data in datas {
        let sn = snap::raw::Encoder::new().compress_vec(&data).unwrap();
        let n = data.len() as u64;
        cases.push((n, sn.clone()));
        cases.push((n - 1, sn.clone()));
        for _ in 0..3 {
            let cut = next() as usize % sn.len();
            cases.push((n, sn[..cut].to_vec()));
            let mut f = sn.clone();
            let at = next() as usize % f.len();
            f[at] ^= 1 << (next() % 8);
            cases.push((n, f));
        }
    }
    cases
}

/// Bodies for the wide decoder beyond [`kernel_cases`], of about `big` bytes: streams whose elements cross its 2 KiB
/// segments in every way (literals of 33-80 bytes, so that the chain enters a segment past its 32
/// tabulated starts; literals spanning several segments; runs), matches chained across segments,
/// whole, cut and flipped at many places (a failure in each segment, so the first in stream order
/// must win).
#[cfg(any(test, feature = "conformance"))]
pub fn wide_cases(big: usize) -> Vec<(u64, Vec<u8>)> {
    let mut next = super::xorshift(0x9e37_79b9_7f4a_7c15u64);
    let mut cases = Vec::new();
    for round in 0..6 {
        let mut data: Vec<u8> = Vec::new();
        while data.len() < big {
            match next() % 5 {
                0 | 1 => {
                    let len = 33 + next() as usize % 48;
                    data.extend((0..len).map(|_| next() as u8));
                }
                2 if data.len() > 16 => {
                    let back = 1 + next() as usize % data.len().min(20_000);
                    let from = data.len() - back;
                    for i in 0..(4 + next() as usize % 70) {
                        data.push(data[from + i]);
                    }
                }
                3 if round % 2 == 0 => data.extend((0..3000 + next() as usize % 3000).map(|_| next() as u8)),
                _ => {
                    // Sequential 8-byte values: a literal byte and a 7-byte match each.
                    let v = data.len() as u64 / 8;
                    data.extend((v..v + 8).flat_map(|v| v.to_le_bytes()));
                }
            }
        }
        let sn = snap::raw::Encoder::new().compress_vec(&data).unwrap();
        let n = data.len() as u64;
        cases.push((n, sn.clone()));
        for _ in 0..6 {
            let mut f = sn.clone();
            let at = next() as usize % f.len();
            f[at] ^= 1 << (next() % 8);
            cases.push((n, f));
            cases.push((n, sn[..next() as usize % sn.len()].to_vec()));
        }
        // Two failures: the earlier one's status must be given.
        let mut f = sn.clone();
        let (a, b) = (next() as usize % f.len(), next() as usize % f.len());
        f[a] = 0xff;
        f[b] ^= 0x80;
        cases.push((n, f));
    }
    cases
}

/// Asserts that a wide decoder run over `cases` gave the reference's status on every body (`status(i)`:
/// status and unresolved count), and where a body passes, no unresolved byte and exactly the reference's
/// bytes (`output(i)`, asked only then); and that over 50 bodies passed and over 50 failed.
#[cfg(any(test, feature = "conformance"))]
pub fn assert_wide_matches_reference(
    cases: &[(u64, Vec<u8>)],
    status: impl Fn(usize) -> (u32, u32),
    output: impl Fn(usize) -> Vec<u8>,
) {
    let (mut passed, mut failed) = (0, 0);
    for (i, (want, body)) in cases.iter().enumerate() {
        let (expected, bytes) = unsnap_one(body, *want);
        let (got, unresolved) = status(i);
        assert_eq!(got, expected, "case {i}: {} bytes declaring {want}", body.len());
        if let Some(bytes) = bytes {
            passed += 1;
            assert_eq!(unresolved, 0, "case {i}");
            let out = output(i);
            let first_diff = bytes.iter().zip(&out).position(|(a, b)| a != b);
            assert!(
                first_diff.is_none(),
                "case {i}: first wrong byte {first_diff:?} of {want}"
            );
        } else {
            failed += 1;
        }
    }
    assert!(
        passed > 50 && failed > 50,
        "{passed} passed, {failed} failed of {}",
        cases.len()
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reference_decodes_what_passes_and_refuses_the_rest() {
        let cases = kernel_cases(20_000);
        let mut passed = 0;
        for (want, body) in &cases {
            let (status, out) = unsnap_one(body, *want);
            assert_eq!(status == st::OK, out.is_some());
            if let Some(out) = out {
                passed += 1;
                assert_eq!(out, snap::raw::Decoder::new().decompress_vec(body).unwrap());
            }
        }
        assert!(passed > 50 && passed < cases.len() / 2, "{passed} of {}", cases.len());
    }

    /// The kernel, on the CPU emulation (ASan: no read or write outside the body or the declared
    /// output), gives the reference's status on every body, and the reference's bytes where it passes.
    #[test]
    fn the_kernel_matches_the_reference_on_every_body() {
        if let Err(why) = crate::decode::kernels::emu::available() {
            crate::test_skip(&why);
            return;
        }
        let cases = kernel_cases(60_000);
        let got = crate::decode::kernels::emu::run_unsnap_emulated(&cases);
        let mut passed = 0;
        for (i, ((want, body), (status, out))) in cases.iter().zip(got).enumerate() {
            let (expected, bytes) = unsnap_one(body, *want);
            assert_eq!(status, expected, "case {i}: {} bytes declaring {want}", body.len());
            if let Some(bytes) = bytes {
                passed += 1;
                let first_diff = bytes.iter().zip(&out).position(|(a, b)| a != b);
                assert!(
                    first_diff.is_none(),
                    "case {i}: first wrong byte {first_diff:?} of {want}"
                );
            }
        }
        assert!(passed > 50, "{passed} of {} passed", cases.len());
    }

    /// The wide decoder (`snappy_wide.cu`), on the CPU emulation (ASan: no read or write outside the
    /// body, the declared output or its scratch), gives the reference's status on every body, the
    /// reference's bytes where it passes, and leaves no match byte unresolved.
    #[test]
    fn the_wide_decoder_matches_the_reference_on_every_body() {
        if let Err(why) = crate::decode::kernels::emu::available() {
            crate::test_skip(&why);
            return;
        }
        let mut cases = kernel_cases(60_000);
        cases.extend(wide_cases(40_000));
        let got = crate::decode::kernels::emu::run_wsnap_emulated(&cases);
        assert_wide_matches_reference(&cases, |i| (got[i].0, got[i].1), |i| got[i].2.clone());
    }
}
