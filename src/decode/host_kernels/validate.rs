//! Host reference of `kernels/validate.cu`: checks a compressed page body before nvCOMP sees it
//! (nvCOMP's headers make corrupt input undefined behaviour).

use super::Arena;
use super::core::read_uleb128 as uleb;
use crate::decode::layout::{ValidateItem, validate_codec as codec, validate_status as st};

/// The `n`-byte little-endian value at `s[p..]`.
pub(super) fn le(s: &[u8], p: usize, n: usize) -> u64 {
    (0..n).fold(0u64, |v, i| v | (u64::from(s[p + i]) << (8 * i)))
}

fn snappy(s: &[u8], want: u64) -> u32 {
    // The kernel's walk is 32-bit; no Parquet page is this large (its sizes are 32-bit signed).
    if s.len() as u64 >= 1 << 31 || want >= 1 << 31 {
        return st::TOO_LARGE;
    }
    let n = s.len();
    let mut p = 0usize;
    let Some(total) = uleb(s, &mut p) else {
        return st::TRUNCATED;
    };
    if total != want {
        return st::WRONG_SIZE;
    }
    let mut out = 0u64;
    while p < n {
        let tag = s[p];
        p += 1;
        let (len, offset) = match tag & 3 {
            0 => {
                let l = u64::from(tag >> 2);
                let len = if l >= 60 {
                    let extra = (l - 59) as usize;
                    if p + extra > n {
                        return st::TRUNCATED;
                    }
                    let v = le(s, p, extra);
                    p += extra;
                    v + 1
                } else {
                    l + 1
                };
                if len > (n - p) as u64 {
                    return st::TRUNCATED;
                }
                p += len as usize;
                (len, 0)
            }
            1 => {
                if p + 1 > n {
                    return st::TRUNCATED;
                }
                let r = (
                    u64::from((tag >> 2) & 7) + 4,
                    (u64::from(tag >> 5) << 8) | u64::from(s[p]),
                );
                p += 1;
                r
            }
            2 => {
                if p + 2 > n {
                    return st::TRUNCATED;
                }
                let r = (u64::from(tag >> 2) + 1, le(s, p, 2));
                p += 2;
                r
            }
            _ => {
                if p + 4 > n {
                    return st::TRUNCATED;
                }
                let r = (u64::from(tag >> 2) + 1, le(s, p, 4));
                p += 4;
                r
            }
        };
        if tag & 3 != 0 && (offset == 0 || offset > out) {
            return st::BAD_OFFSET;
        }
        if len > want - out {
            return st::WRONG_SIZE;
        }
        out += len;
    }
    if out == want { st::OK } else { st::WRONG_SIZE }
}

fn lz4_block(s: &[u8], want: u64) -> u32 {
    let n = s.len();
    let (mut p, mut out) = (0usize, 0u64);
    loop {
        let Some(&token) = s.get(p) else { return st::TRUNCATED };
        p += 1;
        let mut lit = u64::from(token >> 4);
        if lit == 15 {
            loop {
                let Some(&b) = s.get(p) else { return st::TRUNCATED };
                p += 1;
                lit += u64::from(b);
                if lit > n as u64 {
                    return st::TRUNCATED;
                }
                if b != 255 {
                    break;
                }
            }
        }
        if lit > (n - p) as u64 {
            return st::TRUNCATED;
        }
        if lit > want - out {
            return st::WRONG_SIZE;
        }
        p += lit as usize;
        out += lit;
        if p == n {
            break;
        }
        if p + 2 > n {
            return st::TRUNCATED;
        }
        let offset = le(s, p, 2);
        p += 2;
        if offset == 0 || offset > out {
            return st::BAD_OFFSET;
        }
        let mut m = u64::from(token & 15);
        if m == 15 {
            loop {
                let Some(&b) = s.get(p) else { return st::TRUNCATED };
                p += 1;
                m += u64::from(b);
                if m > want {
                    return st::WRONG_SIZE;
                }
                if b != 255 {
                    break;
                }
            }
        }
        m += 4;
        if m > want - out {
            return st::WRONG_SIZE;
        }
        out += m;
    }
    if out == want { st::OK } else { st::WRONG_SIZE }
}

fn zstd(s: &[u8], want: u64) -> u32 {
    if s.len() < 6 {
        return st::TRUNCATED;
    }
    if le(s, 0, 4) != 0xFD2F_B528 {
        return st::BAD_HEADER;
    }
    let fhd = s[4];
    let (fcs_flag, single, dict_flag) = (fhd >> 6, (fhd >> 5) & 1, fhd & 3);
    if (fhd >> 3) & 1 != 0 {
        return st::BAD_HEADER;
    }
    let mut p = 5 + usize::from(single == 0);
    p += [0, 1, 2, 4][dict_flag as usize];
    let fcs_bytes = match fcs_flag {
        0 => usize::from(single == 1),
        1 => 2,
        2 => 4,
        _ => 8,
    };
    if p + fcs_bytes > s.len() {
        return st::TRUNCATED;
    }
    if fcs_bytes == 0 {
        // No content size: nothing proves the output fits, so the host decompresses it.
        return st::WRONG_SIZE;
    }
    let mut fcs = le(s, p, fcs_bytes);
    if fcs_bytes == 2 {
        fcs += 256;
    }
    if fcs == want { st::OK } else { st::WRONG_SIZE }
}

fn gzip(s: &[u8], want: u64) -> u32 {
    let n = s.len();
    if n < 18 {
        return st::TRUNCATED;
    }
    if s[0] != 0x1f || s[1] != 0x8b || s[2] != 8 {
        return st::BAD_HEADER;
    }
    if le(s, n - 4, 4) as u32 == want as u32 {
        st::OK
    } else {
        st::WRONG_SIZE
    }
}

/// The status `gp_validate_compressed` gives one body.
pub(crate) fn validate_one(codec_id: u32, body: &[u8], dst_len: u64) -> u32 {
    match codec_id {
        codec::SNAPPY => snappy(body, dst_len),
        codec::LZ4_RAW => lz4_block(body, dst_len),
        codec::ZSTD => zstd(body, dst_len),
        codec::GZIP => gzip(body, dst_len),
        _ => st::BAD_HEADER,
    }
}

/// `gp_validate_compressed` over `items` (bodies read from `arena`; one outside it is TRUNCATED).
pub fn validate_compressed(arena: &Arena, items: &mut [ValidateItem]) {
    for it in items {
        it.status = match arena.get(it.src, it.src_len) {
            Some(body) => validate_one(it.codec, body, it.dst_len),
            None => st::TRUNCATED,
        };
    }
}

/// Test bodies shared by the reference's tests, the kernel emulation and the GPU tests.
#[cfg(any(test, feature = "conformance"))]
pub mod cases {
    use super::{codec, validate_one};
    use crate::decode::layout::validate_segments::Geometry;

    /// Bytes that Snappy and LZ4 compress somewhat.
    pub(crate) fn sample(n: usize) -> Vec<u8> {
        (0..n)
            .map(|i| ((i * 7919) % 251) as u8 ^ if i % 97 < 40 { 0 } else { (i / 97) as u8 })
            .collect()
    }

    /// A Snappy body whose preamble (the encoder's ULEB128 of its output size) is replaced by
    /// `declared`.
    pub(crate) fn with_declared_size(body: &[u8], declared: u64) -> Vec<u8> {
        let preamble = body.iter().position(|&x| x < 0x80).map_or(body.len(), |p| p + 1);
        let mut b = Vec::new();
        crate::decode::host_kernels::delta::put_uleb(&mut b, declared);
        b.extend_from_slice(&body[preamble..]);
        b
    }

    /// Bodies for comparing the kernel with this reference: streams of data that compress little,
    /// well and very well, at sizes around the kernel's 32- and 64-byte windows; each cut at many points, with
    /// bytes flipped, with bytes appended, and declared one byte long or short; random bytes after a
    /// valid preamble; LZ4 and zstd items among them (the kernel walks Snappy with the whole warp and
    /// the others with one lane).
    pub fn kernel_cases() -> Vec<(u32, u64, Vec<u8>)> {
        let mut next = super::super::xorshift(0x9e37_79b9_7f4a_7c15u64);
        let mut cases = Vec::new();
        for n in [0usize, 1, 2, 31, 32, 33, 63, 64, 65, 100, 1000, 4097, 70_000] {
            let datas: Vec<Vec<u8>> = vec![
                sample(n),
                (0..n).map(|_| next() as u8).collect(),
                (0..n).map(|i| ((i / 8) as u64).to_le_bytes()[i % 8]).collect(),
                vec![7u8; n],
            ];
            for data in datas {
                let sn = snap::raw::Encoder::new().compress_vec(&data).unwrap();
                let lz = lz4_flex::block::compress(&data);
                let m = n as u64;
                cases.push((codec::SNAPPY, m, sn.clone()));
                cases.push((codec::SNAPPY, m + 1, sn.clone()));
                cases.push((codec::SNAPPY, m.saturating_sub(1), sn.clone()));
                cases.push((codec::LZ4_RAW, m, lz.clone()));
                let step = (sn.len() / 40).max(1);
                for cut in (0..sn.len()).step_by(step) {
                    cases.push((codec::SNAPPY, m, sn[..cut].to_vec()));
                }
                for _ in 0..12 {
                    let mut f = sn.clone();
                    if !f.is_empty() {
                        let at = next() as usize % f.len();
                        f[at] ^= 1 << (next() % 8);
                        if next().is_multiple_of(2) {
                            let at = next() as usize % f.len();
                            f[at] = next() as u8;
                        }
                    }
                    cases.push((codec::SNAPPY, m, f));
                    let mut g = lz.clone();
                    if !g.is_empty() {
                        let at = next() as usize % g.len();
                        g[at] ^= 1 << (next() % 8);
                    }
                    cases.push((codec::LZ4_RAW, m, g));
                }
                let mut longer = sn.clone();
                longer.extend_from_slice(&[0x04, b'x', 0x09]);
                cases.push((codec::SNAPPY, m, longer));
            }
        }
        for len in [1usize, 5, 40, 300, 5000] {
            let mut b = Vec::new();
            let declared = next() % 10_000;
            crate::decode::host_kernels::delta::put_uleb(&mut b, declared);
            b.extend((0..len).map(|_| next() as u8));
            cases.push((codec::SNAPPY, declared, b));
        }
        // Literals whose 1 to 4 length bytes claim more than the body holds (up to 2^32 bytes, one
        // more than 32 bits count), then one that fits exactly.
        for head in [
            vec![0xf0u8, 0xff],
            vec![0xf4, 0xff, 0xff],
            vec![0xf8, 0xff, 0xff, 0xff],
            vec![0xfc, 0xff, 0xff, 0xff, 0xff],
        ] {
            let mut b = Vec::new();
            crate::decode::host_kernels::delta::put_uleb(&mut b, 300);
            b.extend_from_slice(&head);
            b.extend_from_slice(&[9u8; 40]);
            cases.push((codec::SNAPPY, 300, b));
        }
        // A long valid stream, then a literal claiming more than the body holds, far enough from the
        // start that the kernel's interior walk meets it: declared sizes that leave room for it (the
        // walk moves past the end) and that do not.
        for (claim, extra) in [(1000u64, 1000u64), (1000, 10), (70_000, 70_000)] {
            let data = sample(5000);
            let sn = snap::raw::Encoder::new().compress_vec(&data).unwrap();
            let mut b = with_declared_size(&sn, 5000 + extra);
            let m1 = claim - 1;
            if m1 < 60 {
                b.push((m1 as u8) << 2);
            } else if m1 < 1 << 16 {
                b.extend_from_slice(&[61 << 2, m1 as u8, (m1 >> 8) as u8]);
            } else {
                b.extend_from_slice(&[62 << 2, m1 as u8, (m1 >> 8) as u8, (m1 >> 16) as u8]);
            }
            b.extend((0..100).map(|_| next() as u8));
            cases.push((codec::SNAPPY, 5000 + extra, b));
        }
        // Matches of each kind in the middle of a body, reaching exactly to the output's start or
        // one byte before it (300 bytes of literals, then the match, then 100 literal bytes).
        for (reach, kind) in [
            (300u32, 1u8),
            (301, 1),
            (1792, 1),
            (300, 2),
            (301, 2),
            (300, 3),
            (70_000, 3),
        ] {
            let mut b = Vec::new();
            crate::decode::host_kernels::delta::put_uleb(&mut b, 300 + 8 + 100);
            for _ in 0..5 {
                b.push(59 << 2);
                b.extend((0..60).map(|_| next() as u8));
            }
            match kind {
                1 => b.extend_from_slice(&[((reach >> 8) as u8) << 5 | (4 << 2) | 1, reach as u8]),
                2 => b.extend_from_slice(&[(7 << 2) | 2, reach as u8, (reach >> 8) as u8]),
                _ => {
                    b.push((7 << 2) | 3);
                    b.extend_from_slice(&reach.to_le_bytes());
                }
            }
            for _ in 0..2 {
                b.push(49 << 2);
                b.extend((0..50).map(|_| next() as u8));
            }
            cases.push((codec::SNAPPY, 300 + 8 + 100, b));
        }
        // An element at every position of the kernel's 64-byte interior windows (both halves of the
        // warp's lanes): after a literal of 1 to 64 bytes, short literals (2 to 6 input bytes each,
        // some 300 bytes of output) and then the element; 100 literal bytes after it. The element: a
        // match reaching one byte before the output's start, one reaching exactly to it, a literal
        // claiming 10,000 bytes, and a match whose output passes the declared size.
        for shift in 1..=64u64 {
            for kind in 0..4 {
                let mut b = Vec::new();
                let mut lits = vec![(shift - 1) as u8];
                let mut out = shift;
                let mut i = 0;
                while out < 300 {
                    lits.push((i % 5) as u8);
                    out += 1 + i % 5;
                    i += 1;
                }
                let tail = 100u64;
                let declared = match kind {
                    2 => out + 10_000 + tail,
                    3 => out + 3,
                    _ => out + 8 + tail,
                };
                crate::decode::host_kernels::delta::put_uleb(&mut b, declared);
                for m1 in lits {
                    b.push(m1 << 2);
                    b.extend((0..=m1).map(|_| next() as u8));
                }
                match kind {
                    0 | 1 => {
                        let reach = out as u16 + (kind == 0) as u16;
                        b.extend_from_slice(&[(7 << 2) | 2, reach as u8, (reach >> 8) as u8]);
                    }
                    2 => b.extend_from_slice(&[61 << 2, 0x0f, 0x27]),
                    _ => b.extend_from_slice(&[(4 << 2) | 1, 8]),
                }
                for _ in 0..tail / 4 {
                    b.push(3 << 2);
                    b.extend((0..4).map(|_| next() as u8));
                }
                cases.push((codec::SNAPPY, declared, b));
            }
        }
        let mut exact = Vec::new();
        crate::decode::host_kernels::delta::put_uleb(&mut exact, 44);
        exact.extend_from_slice(&[0xf0, 43]);
        exact.extend_from_slice(&[9u8; 44]);
        cases.push((codec::SNAPPY, 44, exact));
        // A declared size of 2^31: no page has one (its sizes are 32-bit signed).
        let mut large = Vec::new();
        crate::decode::host_kernels::delta::put_uleb(&mut large, 1 << 31);
        large.extend_from_slice(&[0x04, b'x']);
        cases.push((codec::SNAPPY, 1 << 31, large));
        let z = zstd::bulk::compress(&sample(5000), 3).unwrap();
        cases.push((codec::ZSTD, 5000, z));
        cases
    }

    /// Segments far smaller than the GPU's, so that the cases' bodies of a few kB are cut into many
    /// (and their joins repair, and fall back to the whole walk, often).
    pub const SMALL_SEGMENTS: Geometry = Geometry {
        seg_bytes: 256,
        overlap: 64,
        min_src: 1024,
    };

    /// Long Snappy bodies like lineitem's that the GPU's segments cut: comments (words from a small
    /// vocabulary), prices, sequential keys and random integers below 2^40, each whole, declared a
    /// byte long, cut a byte short, and with a few bytes flipped.
    pub fn long_cases() -> Vec<(u32, u64, Vec<u8>)> {
        let mut next = super::super::xorshift(0x5851_f42d_4c95_7f2d);
        const WORDS: [&str; 16] = [
            "furiously ",
            "quickly ",
            "carefully ",
            "regular ",
            "final ",
            "ironic ",
            "pending ",
            "deposits ",
            "accounts ",
            "packages ",
            "requests ",
            "blithely ",
            "slyly ",
            "express ",
            "special ",
            "even ",
        ];
        let n = 40_000usize;
        let mut comment = Vec::new();
        while comment.len() < 9 * n {
            comment.extend_from_slice(WORDS[(next() % 16) as usize].as_bytes());
        }
        let datas: Vec<Vec<u8>> = vec![
            comment,
            (0..n)
                .flat_map(|_| ((next() % 10_000_000) as i64 + 90_000).to_le_bytes())
                .collect(),
            (0..n as u64).flat_map(|i| (1 + i / 4).to_le_bytes()).collect(),
            (0..n).flat_map(|_| (next() & ((1 << 40) - 1)).to_le_bytes()).collect(),
        ];
        let mut cases = Vec::new();
        for data in datas {
            let sn = snap::raw::Encoder::new().compress_vec(&data).unwrap();
            let want = data.len() as u64;
            cases.push((codec::SNAPPY, want, sn.clone()));
            cases.push((codec::SNAPPY, want + 1, with_declared_size(&sn, want + 1)));
            cases.push((codec::SNAPPY, want, sn[..sn.len() - 1].to_vec()));
            for _ in 0..9 {
                let mut f = sn.clone();
                for _ in 0..1 + next() % 3 {
                    let at = 8 + next() as usize % (f.len() - 8);
                    f[at] ^= 1 << (next() % 8);
                }
                cases.push((codec::SNAPPY, want, f));
            }
        }
        cases
    }

    /// The file the probes read their bodies from (`GP_PROBE_FILE`); `None`, with the skip said,
    /// where it is unset.
    pub fn probe_file() -> Option<String> {
        let path = std::env::var("GP_PROBE_FILE").ok();
        if path.is_none() {
            println!("skipped: no GP_PROBE_FILE");
        }
        path
    }

    /// The compressed bodies of the pages of the row groups `pick` takes (by index) of the Parquet
    /// file at `path`, each with its declared uncompressed size (a v2 data page's levels, stored
    /// uncompressed, left out).
    pub fn file_bodies(path: &str, pick: impl Fn(usize) -> bool) -> Vec<(u64, Vec<u8>)> {
        use crate::decode::host_kernels::page_headers::walk_headers_at;
        use parquet::file::reader::{FileReader, SerializedFileReader};
        use std::os::unix::fs::FileExt;
        let file = std::fs::File::open(path).expect("file");
        let reader = SerializedFileReader::new(file.try_clone().expect("file")).expect("parquet");
        let mut bodies = Vec::new();
        for g in (0..reader.metadata().num_row_groups()).filter(|&g| pick(g)) {
            let rg = reader.metadata().row_group(g);
            for c in 0..rg.num_columns() {
                let (off, len) = rg.column(c).byte_range();
                let walked =
                    walk_headers_at(len, |at, buf: &mut [u8]| file.read_exact_at(buf, off + at)).expect("headers");
                for p in &walked.pages {
                    let mut body = vec![0u8; p.compressed_size as usize];
                    file.read_exact_at(&mut body, off + p.data_offset).expect("body");
                    let mut want = p.uncompressed_size as u64;
                    if p.page_type == 3 {
                        let levels = (p.def_levels_byte_length + p.rep_levels_byte_length) as usize;
                        body.drain(..levels);
                        want -= levels as u64;
                    }
                    bodies.push((want, body));
                }
            }
        }
        bodies
    }

    /// `validate_one` over [`kernel_cases`]: what the kernel must give.
    pub fn expected(cases: &[(u32, u64, Vec<u8>)]) -> Vec<u32> {
        cases
            .iter()
            .map(|(c, want, body)| validate_one(*c, body, *want))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::cases::{SMALL_SEGMENTS, kernel_cases, sample};
    use super::*;
    use crate::decode::layout::validate_segments::{Geometry, JOINED, PRODUCTION, REPAIRS, WALKED_WHOLE};
    use proptest::prelude::*;

    #[test]
    fn valid_streams_pass() {
        for n in [0usize, 1, 5, 100, 65_536, 300_000] {
            let data = sample(n);
            let sn = snap::raw::Encoder::new().compress_vec(&data).unwrap();
            assert_eq!(validate_one(codec::SNAPPY, &sn, n as u64), st::OK, "snappy {n}");
            assert_eq!(validate_one(codec::SNAPPY, &sn, n as u64 + 1), st::WRONG_SIZE);
            let lz = lz4_flex::block::compress(&data);
            assert_eq!(validate_one(codec::LZ4_RAW, &lz, n as u64), st::OK, "lz4 {n}");
            let z = zstd::bulk::compress(&data, 3).unwrap();
            assert_eq!(validate_one(codec::ZSTD, &z, n as u64), st::OK, "zstd {n}");
            let mut g = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
            std::io::Write::write_all(&mut g, &data).unwrap();
            let g = g.finish().unwrap();
            assert_eq!(validate_one(codec::GZIP, &g, n as u64), st::OK, "gzip {n}");
            assert_eq!(validate_one(codec::GZIP, &g, n as u64 + 3), st::WRONG_SIZE);
        }
    }

    #[test]
    fn snappy_sizes_of_2_gib_are_refused_before_the_walk() {
        let mut b = Vec::new();
        crate::decode::host_kernels::delta::put_uleb(&mut b, 1 << 31);
        b.extend_from_slice(&[0x04, b'x']);
        assert_eq!(validate_one(codec::SNAPPY, &b, 1 << 31), st::TOO_LARGE);
        // One byte less is walked: the stream is one literal byte, not 2^31 - 1.
        assert_eq!(validate_one(codec::SNAPPY, &b, (1 << 31) - 1), st::WRONG_SIZE);
    }

    #[test]
    fn zstd_frames_without_a_content_size_go_to_the_host() {
        let data = sample(10_000);
        let mut enc = zstd::stream::Encoder::new(Vec::new(), 3).unwrap();
        enc.include_contentsize(false).unwrap();
        std::io::Write::write_all(&mut enc, &data).unwrap();
        let z = enc.finish().unwrap();
        assert_eq!(validate_one(codec::ZSTD, &z, 10_000), st::WRONG_SIZE);
    }

    #[test]
    fn truncations_fail() {
        let data = sample(20_000);
        let sn = snap::raw::Encoder::new().compress_vec(&data).unwrap();
        let lz = lz4_flex::block::compress(&data);
        for cut in (0..sn.len()).step_by(37) {
            assert_ne!(
                validate_one(codec::SNAPPY, &sn[..cut], 20_000),
                st::OK,
                "snappy cut {cut}"
            );
        }
        for cut in (0..lz.len()).step_by(37) {
            assert_ne!(
                validate_one(codec::LZ4_RAW, &lz[..cut], 20_000),
                st::OK,
                "lz4 cut {cut}"
            );
        }
    }

    proptest! {
        /// Whatever the bytes, the validator answers (no panic); and a stream it passes decompresses
        /// to exactly the declared size with the reference decoders, so nvCOMP only sees well-formed
        /// streams.
        #[test]
        fn flipped_streams_never_panic_and_passing_ones_decode(flips in proptest::collection::vec((0usize..4096, 0u8..8), 1..6)) {
            let data = sample(4096);
            let mut sn = snap::raw::Encoder::new().compress_vec(&data).unwrap();
            let mut lz = lz4_flex::block::compress(&data);
            for (at, bit) in &flips {
                let i = at % sn.len();
                sn[i] ^= 1 << bit;
                let j = at % lz.len();
                lz[j] ^= 1 << bit;
            }
            if validate_one(codec::SNAPPY, &sn, 4096) == st::OK {
                let out = snap::raw::Decoder::new().decompress_vec(&sn);
                prop_assert!(out.map(|o| o.len() == 4096).unwrap_or(false));
            }
            if validate_one(codec::LZ4_RAW, &lz, 4096) == st::OK {
                let out = lz4_flex::block::decompress(&lz, 4096);
                prop_assert!(out.map(|o| o.len() == 4096).unwrap_or(false));
            }
        }
    }

    /// `gp_validate_compressed` in the emulation over `cases` with `geometry`'s segments, each status
    /// asserted equal to the reference's: per case, the reference's status and the body's join word.
    fn emulated_against_reference(cases: &[(u32, u64, Vec<u8>)], geometry: Geometry) -> Vec<(u32, u32)> {
        let got = crate::decode::kernels::emu::run_validate_emulated(cases, geometry);
        let mut out = Vec::with_capacity(cases.len());
        for (k, ((codec_id, want, body), (status, join))) in cases.iter().zip(got).enumerate() {
            let expected = validate_one(*codec_id, body, *want);
            assert_eq!(
                status,
                expected,
                "case {k}: codec {codec_id}, {} bytes declaring {want}, {geometry:?}",
                body.len()
            );
            out.push((expected, join));
        }
        out
    }

    #[test]
    fn the_kernel_gives_the_reference_status_on_every_body() {
        if let Err(why) = crate::decode::kernels::emu::available() {
            println!("skipped: {why}");
            return;
        }
        let cases = kernel_cases();
        for geometry in [PRODUCTION, SMALL_SEGMENTS] {
            let (mut passed, mut joined) = (0, 0);
            for (expected, join) in emulated_against_reference(&cases, geometry) {
                passed += (expected == st::OK) as usize;
                joined += (join & JOINED != 0) as usize;
            }
            // Both outcomes are exercised.
            assert!(
                passed > 50 && passed < cases.len() / 2,
                "{passed} of {} passed",
                cases.len()
            );
            if geometry == SMALL_SEGMENTS {
                assert!(joined > 300, "{joined} bodies in segments");
            }
            println!(
                "kernel = reference on {} bodies, {passed} of them valid, {joined} in segments ({geometry:?})",
                cases.len()
            );
        }
    }

    /// Long bodies like lineitem's, in the GPU's segments (cut from 16 kB up, as the cases are
    /// shorter than the GPU's lower bound) and in small ones: the status is the reference's, and a
    /// valid body is decided by its segments alone (never the whole walk).
    #[test]
    fn long_bodies_in_segments_get_the_reference_status() {
        if let Err(why) = crate::decode::kernels::emu::available() {
            println!("skipped: {why}");
            return;
        }
        let cases = super::cases::long_cases();
        let gpu_segments = Geometry {
            min_src: 16 << 10,
            ..PRODUCTION
        };
        for geometry in [gpu_segments, SMALL_SEGMENTS] {
            let (mut valid, mut repairs) = (0, 0);
            for (k, (expected, join)) in emulated_against_reference(&cases, geometry).into_iter().enumerate() {
                assert!(join & JOINED != 0, "case {k}: not cut into segments, {geometry:?}");
                if expected == st::OK {
                    valid += 1;
                    assert_eq!(
                        join & WALKED_WHOLE,
                        0,
                        "case {k}: a valid body walked whole, {geometry:?}"
                    );
                } else {
                    assert_ne!(join & WALKED_WHOLE, 0, "case {k}: a failure not from the whole walk");
                }
                repairs += join & REPAIRS;
            }
            assert!(valid >= 4 && valid < cases.len(), "{valid} of {} valid", cases.len());
            println!(
                "kernel = reference on {} long bodies, {valid} valid, {repairs} segments repaired ({geometry:?})",
                cases.len()
            );
        }
    }

    /// Pages like the benchmark file's (sequential integers, random integers below 2^40, timestamps,
    /// random doubles, small integers), whose element mixes the kernel's interior walk takes: whole,
    /// and with one to three bytes flipped or replaced anywhere, most of them far from either end.
    #[test]
    fn the_kernel_gives_the_reference_status_on_parquet_like_pages_with_flips() {
        if let Err(why) = crate::decode::kernels::emu::available() {
            println!("skipped: {why}");
            return;
        }
        let mut next = crate::decode::host_kernels::xorshift(0x2545_f491_4f6c_dd1d);
        let n = 2048;
        let pages: Vec<Vec<u8>> = vec![
            (0..n as u64).flat_map(|i| (1_000_000 + i).to_le_bytes()).collect(),
            (0..n).flat_map(|_| (next() & ((1 << 40) - 1)).to_le_bytes()).collect(),
            (0..n as u64)
                .flat_map(|i| ((1_000_000 + i) * 1000).to_le_bytes())
                .collect(),
            (0..n)
                .flat_map(|_| ((next() >> 11) as f64 / (1u64 << 53) as f64).to_le_bytes())
                .collect(),
            (0..n).flat_map(|_| ((next() % 1000) as i32).to_le_bytes()).collect(),
        ];
        let mut cases = Vec::new();
        for data in &pages {
            let sn = snap::raw::Encoder::new().compress_vec(data).unwrap();
            cases.push((codec::SNAPPY, data.len() as u64, sn.clone()));
            // Declared at half its size (with the preamble saying so), whole and cut at three
            // quarters: the output passes the declared size mid-body, before the cut's failure.
            let half = data.len() as u64 / 2;
            let short = super::cases::with_declared_size(&sn, half);
            cases.push((codec::SNAPPY, half, short.clone()));
            cases.push((codec::SNAPPY, half, short[..short.len() * 3 / 4].to_vec()));
            for _ in 0..60 {
                let mut f = sn.clone();
                for _ in 0..1 + next() % 3 {
                    let at = next() as usize % f.len();
                    if next().is_multiple_of(2) {
                        f[at] ^= 1 << (next() % 8);
                    } else {
                        f[at] = next() as u8;
                    }
                }
                cases.push((codec::SNAPPY, data.len() as u64, f));
            }
        }
        let mut failed = 0;
        for geometry in [PRODUCTION, SMALL_SEGMENTS] {
            let got = emulated_against_reference(&cases, geometry);
            failed = got.iter().filter(|(expected, _)| *expected != st::OK).count();
        }
        // Both outcomes, many times: a flip in a literal's bytes leaves the stream valid, and the
        // pages of random values are mostly literals.
        assert!(
            failed > cases.len() / 4 && failed < cases.len(),
            "{failed} of {} failed",
            cases.len()
        );
        println!(
            "kernel = reference on {} Parquet-like bodies, {failed} of them failing",
            cases.len()
        );
    }
}

#[cfg(test)]
mod probe {
    use super::*;
    use crate::decode::layout::validate_segments::{self, Geometry, JOINED, PRODUCTION, REPAIRS, WALKED_WHOLE};

    /// Not a test: the emulated pre-check over a file's long Snappy bodies (`GP_PROBE_FILE`, row groups
    /// `GP_PROBE_GROUPS`, default "0,25"), in the GPU's segments and in other geometries: how many
    /// segments were walked again (each a serial walk in the join) and how many bodies walked whole.
    #[test]
    #[ignore]
    fn segments_on_a_files_long_bodies() {
        let Some(path) = super::cases::probe_file() else { return };
        let groups: Vec<usize> = std::env::var("GP_PROBE_GROUPS")
            .unwrap_or_else(|_| "0,25".into())
            .split(',')
            .map(|g| g.parse().expect("a row group"))
            .collect();
        // Every body the GPU's segments would cut from 16 kB up (the GPU's lower bound is higher).
        let from_16k = |seg_bytes, overlap| Geometry {
            seg_bytes,
            overlap,
            min_src: 16 << 10,
        };
        let taken = |want: u64, body: &[u8]| {
            let item = ValidateItem {
                src_len: body.len() as u64,
                dst_len: want,
                codec: codec::SNAPPY,
                ..Default::default()
            };
            validate_segments::cut(&item, from_16k(PRODUCTION.seg_bytes, PRODUCTION.overlap))
        };
        let cases: Vec<(u32, u64, Vec<u8>)> = super::cases::file_bodies(&path, |g| groups.contains(&g))
            .into_iter()
            .filter(|(want, body)| taken(*want, body))
            .map(|(want, body)| (codec::SNAPPY, want, body))
            .collect();
        let bytes: usize = cases.iter().map(|c| c.2.len()).sum();
        println!(
            "{} long bodies, {bytes} bytes, row groups {groups:?} of {path}",
            cases.len()
        );
        let geometries = std::env::var("GP_PROBE_GEOMETRIES")
            .unwrap_or_else(|_| "2048/256,2048/128,2048/512,4096/256,1024/256".into());
        for spec in geometries.split(',') {
            let (seg, ov) = spec.split_once('/').expect("seg/overlap");
            let g = from_16k(seg.parse().expect("segment bytes"), ov.parse().expect("overlap bytes"));
            let got = crate::decode::kernels::emu::run_validate_emulated(&cases, g);
            let mut segs = 0u64;
            let (mut repairs, mut whole, mut failed) = (0u32, 0, 0);
            let mut worst = (0u32, 0usize, 0u64);
            for ((_, want, body), &(status, join)) in cases.iter().zip(&got) {
                failed += (status != st::OK) as usize;
                assert_ne!(join & JOINED, 0);
                whole += (join & WALKED_WHOLE != 0) as usize;
                repairs += join & REPAIRS;
                segs += u64::from(validate_segments::count(body.len() as u64, g));
                if join & REPAIRS > worst.0 {
                    worst = (join & REPAIRS, body.len(), *want);
                }
            }
            println!(
                "{spec}: {segs} segments, {repairs} walked again ({:.1} %), most in a body {} ({} bytes to {}), {whole} walked whole, {failed} failed",
                100.0 * f64::from(repairs) / segs as f64,
                worst.0,
                worst.1,
                worst.2
            );
        }
    }
}
