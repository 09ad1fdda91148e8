//! Host reference of `kernels/snappy.cu` (`gp_unsnap`): Snappy decompression of a page body that is
//! safe on any input. Its status is the pre-check's ([`super::validate::validate_one`]) on the same
//! body; a body that passes decompresses to what the `snap` crate gives.

use crate::decode::layout::{snappy_literals, validate_codec, validate_status as st};

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

/// A Snappy body decoder's host reference: its status and, when it takes the body, its bytes
/// ([`unsnap_one`], [`literals_one`]).
pub type BodyReference = fn(&[u8], u64) -> (u32, Option<Vec<u8>>);

/// Asserts that a decoder's output `out` for case `case` (declaring `want` bytes) is `expected`,
/// naming the first wrong byte.
#[cfg(any(test, feature = "conformance"))]
pub fn assert_output_equals(case: usize, want: u64, expected: &[u8], out: &[u8]) {
    let first_diff = expected.iter().zip(out).position(|(a, b)| a != b);
    assert!(
        first_diff.is_none(),
        "case {case}: first wrong byte {first_diff:?} of {want}"
    );
}

/// `gp_snappy_literals`' status and, when it is 0, its output, for one body declaring `dst_len` bytes:
/// a body of at most [`snappy_literals::MAX`] literals and no match, inside its input and of exactly
/// the declared size, is its literals' bytes; any other body is refused (the first failure of the walk).
pub fn literals_one(body: &[u8], dst_len: u64) -> (u32, Option<Vec<u8>>) {
    if body.len() as u64 >= 1 << 31 || dst_len >= 1 << 31 {
        return (st::TOO_LARGE, None);
    }
    let n = body.len();
    let mut p = 0usize;
    let Some(total) = crate::decode::host_kernels::core::read_uleb128(body, &mut p) else {
        return (st::TRUNCATED, None);
    };
    if total != dst_len {
        return (st::WRONG_SIZE, None);
    }
    let mut out = Vec::with_capacity(dst_len as usize);
    let mut literals = 0u32;
    while p < n {
        let tag = body[p];
        p += 1;
        if tag & 3 != 0 || literals == snappy_literals::MAX {
            return (st::NOT_LITERALS, None);
        }
        let high = usize::from(tag >> 2);
        let mut len = high as u64 + 1;
        if high >= 60 {
            let extra = high - 59;
            if extra > n - p {
                return (st::TRUNCATED, None);
            }
            len = super::validate::le(body, p, extra) + 1;
            p += extra;
        }
        if len > (n - p) as u64 {
            return (st::TRUNCATED, None);
        }
        if len > dst_len - out.len() as u64 {
            return (st::WRONG_SIZE, None);
        }
        out.extend_from_slice(&body[p..p + len as usize]);
        literals += 1;
        p += len as usize;
    }
    if out.len() as u64 != dst_len {
        return (st::WRONG_SIZE, None);
    }
    (st::OK, Some(out))
}

/// Bodies for `gp_snappy_literals` beyond [`kernel_cases`] (the emulation and the GPU tests): stored
/// streams of `big` bytes or so as a Snappy compressor writes them (a literal per 64 KiB block),
/// literals of every length encoding (1-60 bytes in the tag, then 1 to 4 length bytes), 64 and 65
/// literals, a match after literals; whole, declaring another size, cut, and with bytes changed.
#[cfg(any(test, feature = "conformance"))]
pub fn literal_cases(big: usize) -> Vec<(u64, Vec<u8>)> {
    let mut next = super::xorshift(0x6a09_e667_f3bc_c909u64);
    let literal = |tag_len: &mut Vec<u8>, bytes: &[u8]| {
        let m = bytes.len() as u64 - 1;
        if m < 60 {
            tag_len.push((m as u8) << 2);
        } else {
            let extra = (1..=4).find(|&k| m < 1u64 << (8 * k)).expect("under 2^32 bytes");
            tag_len.push(((59 + extra) as u8) << 2);
            tag_len.extend_from_slice(&m.to_le_bytes()[..extra as usize]);
        }
        tag_len.extend_from_slice(bytes);
    };
    let stream = |parts: &[Vec<u8>], extra: &[u8]| {
        let total: usize = parts.iter().map(Vec::len).sum();
        let mut s = Vec::new();
        super::delta::put_uleb(&mut s, total as u64);
        for part in parts {
            literal(&mut s, part);
        }
        s.extend_from_slice(extra);
        (total as u64, s)
    };
    let random = |n: usize, next: &mut dyn FnMut() -> u64| (0..n).map(|_| next() as u8).collect::<Vec<u8>>();
    let mut shapes: Vec<Vec<Vec<u8>>> = Vec::new();
    // Random doubles through the `snap` crate: stored, a literal per 64 KiB block.
    shapes.push(vec![random(big, &mut next)]);
    // Every length encoding, and lengths around their edges.
    for len in [1usize, 2, 59, 60, 61, 255, 256, 257, 65_535, 65_536, 65_537, 70_000] {
        shapes.push(vec![random(len, &mut next), random(1 + len % 7, &mut next)]);
    }
    // 64 literals (the most taken), then 65.
    shapes.push((0..64).map(|i| random(1 + i * 37, &mut next)).collect());
    shapes.push((0..65).map(|i| random(1 + i * 37, &mut next)).collect());
    let mut cases = Vec::new();
    let data = random(big, &mut next);
    let sn = snap::raw::Encoder::new().compress_vec(&data).expect("compress");
    cases.push((data.len() as u64, sn));
    for (k, parts) in shapes.iter().enumerate() {
        let (total, s) = stream(parts, &[]);
        cases.push((total, s.clone()));
        cases.push((total + 1, s.clone()));
        cases.push((total - 1, s.clone()));
        cases.push((total, s[..next() as usize % s.len()].to_vec()));
        let mut f = s.clone();
        let at = next() as usize % f.len();
        f[at] ^= 1 << (next() % 8);
        cases.push((total, f));
        if k % 3 == 0 {
            // A match after the literals: a 4-byte copy of offset 1.
            let (total, s) = stream(parts, &[0x01, 0x01]);
            cases.push((total + 4, s));
        }
        // The length bytes of a long literal cut off at the end of the input.
        let mut cut = stream(&[], &[]).1;
        cut.push(62 << 2);
        cut.push(0x10);
        cases.push((0, cut));
    }
    cases
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
        let passed = assert_emulated_equals(&cases, got, unsnap_one, false);
        assert!(passed > 50, "{passed} of {} passed", cases.len());
    }

    /// Asserts that an emulated decoder's `got` (status, output) gives `reference`'s status on every
    /// body of `cases`, its bytes where it gives them, and (with `untouched`) no byte written where it
    /// does not (the emulation fills outputs with 0xab). Returns how many bodies passed.
    fn assert_emulated_equals(
        cases: &[(u64, Vec<u8>)],
        got: Vec<(u32, Vec<u8>)>,
        reference: BodyReference,
        untouched: bool,
    ) -> usize {
        let mut passed = 0;
        for (i, ((want, body), (status, out))) in cases.iter().zip(got).enumerate() {
            let (expected, bytes) = reference(body, *want);
            assert_eq!(status, expected, "case {i}: {} bytes declaring {want}", body.len());
            match bytes {
                Some(bytes) => {
                    passed += 1;
                    assert_output_equals(i, *want, &bytes, &out);
                }
                None if untouched => assert!(
                    out.iter().all(|&b| b == 0xab),
                    "case {i}: bytes written to a refused body"
                ),
                None => {}
            }
        }
        passed
    }

    /// What the literal copier takes: the stored streams of [`literal_cases`] and the `snap` crate's
    /// incompressible ones, as their bytes; streams with a match, too many literals, or any fault, none.
    #[test]
    fn the_literal_reference_takes_stored_streams_only() {
        let mut cases = literal_cases(200_000);
        cases.extend(kernel_cases(20_000));
        let (mut taken, mut refused) = (0, 0);
        for (i, (want, body)) in cases.iter().enumerate() {
            let (status, out) = literals_one(body, *want);
            assert_eq!(status == st::OK, out.is_some(), "case {i}");
            if let Some(out) = out {
                taken += 1;
                // Every stream taken is a valid one, and decodes to the same bytes.
                assert_eq!(unsnap_one(body, *want).1.as_ref(), Some(&out), "case {i}");
            } else {
                refused += 1;
                let elements = super::super::validate::validate_one(validate_codec::SNAPPY, body, *want);
                // A valid stream refused holds a match, or more than 64 literals.
                if elements == st::OK {
                    assert_eq!(status, st::NOT_LITERALS, "case {i}");
                }
            }
        }
        assert!(taken >= 14 && refused > 50, "{taken} taken, {refused} refused");
        // The random bytes compressed by `snap`: literals only, one per 64 KiB block.
        let random = &literal_cases(200_000)[0];
        assert_eq!(literals_one(&random.1, random.0).0, st::OK);
        // The 65 literals, whole: refused for their number alone.
        let (want, many) = stream_of_literals(65);
        assert_eq!(literals_one(&many, want).0, st::NOT_LITERALS);
        let (want, most) = stream_of_literals(64);
        assert_eq!(literals_one(&most, want).0, st::OK);
    }

    /// `n` literals of 3 bytes each, as a stream.
    fn stream_of_literals(n: usize) -> (u64, Vec<u8>) {
        let want = 3 * n as u64;
        let mut s = Vec::new();
        super::super::delta::put_uleb(&mut s, want);
        for i in 0..n {
            s.extend([2 << 2, i as u8, 1, 2]);
        }
        (want, s)
    }

    /// The literal copier (`gp_snappy_literals`), on the CPU emulation (ASan: no read or write outside
    /// the body or the declared output), gives the reference's status on every body, and the reference's
    /// bytes where it takes one.
    #[test]
    fn the_literal_copier_matches_the_reference_on_every_body() {
        if let Err(why) = crate::decode::kernels::emu::available() {
            crate::test_skip(&why);
            return;
        }
        let mut cases = literal_cases(150_000);
        cases.extend(kernel_cases(30_000));
        let got = crate::decode::kernels::emu::run_literals_emulated(&cases);
        let taken = assert_emulated_equals(&cases, got, literals_one, true);
        assert!(taken >= 14, "{taken} of {} taken", cases.len());
    }

    /// The wide decoder (`snappy_wide.cu`), on the CPU emulation (ASan: no read or write outside the
    /// body, the declared output or its scratch), gives the reference's status on every body, the
    /// reference's bytes where it passes, and leaves no match byte unresolved: ending with
    /// `gp_wsnap_resolve` (what a batch of these bodies gets) and with the jump rounds and the gather.
    #[test]
    fn the_wide_decoder_matches_the_reference_on_every_body() {
        if let Err(why) = crate::decode::kernels::emu::available() {
            crate::test_skip(&why);
            return;
        }
        let mut cases = kernel_cases(60_000);
        cases.extend(wide_cases(40_000));
        for resolve in [true, false] {
            let got = crate::decode::kernels::emu::run_wsnap_emulated(&cases, resolve);
            assert_wide_matches_reference(&cases, |i| (got[i].0, got[i].1), |i| got[i].2.clone());
        }
    }
}
