//! Host reference of `kernels/zstd.cu` (`gp_unzstd`): Zstandard decompression of a page body, safe on
//! any input. The reference is libzstd itself (the `zstd` crate, as the host decompressor calls it):
//! where the kernel takes a body (status 0), its output must be exactly what libzstd gives for the
//! same body and declared size. The kernel may refuse a body libzstd takes (a content checksum, a
//! dictionary, a table or size it checks more strictly): the other decoders then take it. It must
//! take every frame libzstd's compressor writes without a checksum.

/// libzstd's decode of `body` into exactly `dst_len` bytes, as the host decompressor runs it; `None`
/// where libzstd refuses the body or it gives another size.
pub fn unzstd_one(body: &[u8], dst_len: u64) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(usize::try_from(dst_len).ok()?);
    let n = zstd::bulk::Decompressor::new()
        .and_then(|mut d| d.decompress_to_buffer(body, &mut out))
        .ok()?;
    (n as u64 == dst_len).then_some(out)
}

/// Data of `len` bytes shaped to take every path of a Zstd decoder: text of a small vocabulary
/// (Huffman literals, matches, repeat offsets), incompressible bytes (raw literals and raw blocks),
/// runs of one byte (RLE blocks and literals, overlapping matches), 4-byte counters (short offsets),
/// a short period repeated (offsets under the match length), and all of them in turns.
#[cfg(any(test, feature = "conformance"))]
pub fn shaped_data(shape: u32, len: usize, seed: u64) -> Vec<u8> {
    let mut next = super::xorshift(seed | 1);
    let words: [&[u8]; 12] = [
        b"the ",
        b"quick ",
        b"brown ",
        b"fox ",
        b"jumps ",
        b"over ",
        b"lazy ",
        b"dog ",
        b"carefully ",
        b"regular ",
        b"deposits ",
        b"sleep ",
    ];
    let mut out = Vec::with_capacity(len + 16);
    while out.len() < len {
        let s = if shape == 5 { (next() % 5) as u32 } else { shape };
        let piece = 1 + (next() % 4096) as usize;
        match s {
            0 => {
                for _ in 0..piece / 6 + 1 {
                    out.extend_from_slice(words[(next() % 12) as usize]);
                }
            }
            1 => out.extend((0..piece).map(|_| next() as u8)),
            2 => {
                let b = next() as u8;
                out.extend(std::iter::repeat_n(b, piece));
            }
            3 => {
                let mut v = (next() % 1000) as u32;
                for _ in 0..piece / 4 + 1 {
                    out.extend_from_slice(&v.to_le_bytes());
                    v = v.wrapping_add(1 + (next() % 3) as u32);
                }
            }
            _ => {
                let period: Vec<u8> = (0..1 + next() % 7).map(|_| next() as u8).collect();
                for i in 0..piece {
                    out.push(period[i % period.len()]);
                }
            }
        }
    }
    out.truncate(len);
    out
}

/// Bodies for `gp_unzstd` (the emulation and the GPU tests) as `(declared size, body)`: the shapes of
/// [`shaped_data`] at several sizes (up to `big` bytes, several blocks) and compression levels, in one
/// frame with its content size, without it (a streaming encoder), two frames, a skippable frame first,
/// long text (treeless literals), a block of over 0x7F00 sequences, with a checksum; then each of the
/// first bodies declaring another size, cut short, lengthened, and
/// with bytes changed. The first [`must_take`] items are what libzstd writes without a checksum: the
/// kernel must take every one of them.
#[cfg(any(test, feature = "conformance"))]
pub fn kernel_cases(big: usize) -> Vec<(u64, Vec<u8>)> {
    let mut cases: Vec<(u64, Vec<u8>)> = Vec::new();
    let sizes = [0usize, 1, 5, 100, 1000, 5000, 70_000, big];
    let mut seed = 0x243f_6a88_85a3_08d3u64;
    for shape in 0..6u32 {
        for (k, &len) in sizes.iter().enumerate() {
            let level = [1, 3, -5, 9, 1, 19, 3, 1][(k + shape as usize) % 8];
            seed = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15).wrapping_add(1);
            let data = shaped_data(shape, len, seed);
            let z = zstd::bulk::compress(&data, level).expect("compress");
            cases.push((len as u64, z));
        }
    }
    // A streaming encoder's frame (no content size; blocks as the stream writes them), two frames in
    // one body, and a skippable frame before one.
    for (shape, len) in [(0u32, 150_000usize), (5, 40_000)] {
        let data = shaped_data(shape, len, 77 + len as u64);
        let mut enc = zstd::stream::Encoder::new(Vec::new(), 3).expect("encoder");
        std::io::Write::write_all(&mut enc, &data).expect("write");
        cases.push((len as u64, enc.finish().expect("finish")));
        let half = len / 3;
        let mut two = zstd::bulk::compress(&data[..half], 1).expect("compress");
        two.extend(zstd::bulk::compress(&data[half..], 5).expect("compress"));
        cases.push((len as u64, two));
        let mut skip = vec![0x50, 0x2a, 0x4d, 0x18, 3, 0, 0, 0, 9, 9, 9];
        skip.extend(zstd::bulk::compress(&data, 2).expect("compress"));
        cases.push((len as u64, skip));
    }
    // Long enough for blocks that reuse the block before's Huffman table (treeless literals).
    for level in [1, 6] {
        let data = shaped_data(0, 1_200_000, 91 + level as u64);
        cases.push((data.len() as u64, zstd::bulk::compress(&data, level).expect("compress")));
    }
    // Written by hand: a block of 40,000 sequences (the 3-byte count), every table in RLE mode
    // (literal length 0, match length 3, offset code 0: repeat offsets, no bits), after 8 raw bytes.
    {
        let mut f = vec![0x28, 0xb5, 0x2f, 0xfd, 0xa0];
        f.extend_from_slice(&120_008u32.to_le_bytes());
        f.extend_from_slice(&[8 << 3, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8]);
        f.extend_from_slice(&[(9 << 3) | (2 << 1) | 1, 0, 0]);
        f.extend_from_slice(&[0x00, 0xff, 0x40, 0x1d, 0x54, 0, 0, 0, 0x01]);
        cases.push((120_008, f));
    }
    let taken = cases.len();
    assert_eq!(taken, must_take(), "must_take counts the cases above");
    // With a checksum: refused (libzstd takes it).
    {
        let data = shaped_data(0, 3000, 5);
        let mut c = zstd::bulk::Compressor::new(3).expect("compressor");
        c.include_checksum(true).expect("checksum");
        cases.push((3000, c.compress(&data).expect("compress")));
    }
    // Faults over the first bodies: another declared size, cut, lengthened, bytes changed.
    let mut next = super::xorshift(0x1319_8a2e_0370_7344);
    for i in 0..taken {
        let (want, body) = cases[i].clone();
        if body.is_empty() {
            continue;
        }
        cases.push((want + 1, body.clone()));
        if want > 0 {
            cases.push((want - 1, body.clone()));
        }
        cases.push((want, body[..body.len() - 1].to_vec()));
        cases.push((want, body[..body.len() / 2].to_vec()));
        let mut longer = body.clone();
        longer.push(0);
        cases.push((want, longer));
        for _ in 0..6 {
            let mut bad = body.clone();
            let at = (next() % bad.len() as u64) as usize;
            bad[at] ^= 1 << (next() % 8);
            cases.push((want, bad));
        }
        let mut bad = body.clone();
        let at = (next() % bad.len() as u64) as usize;
        bad[at] = next() as u8;
        cases.push((want, bad));
    }
    cases
}

/// Asserts what a `gp_unzstd` run gave for `cases` (a status and output each): the first `must` taken
/// (status 0), and every body it took decoded to exactly libzstd's bytes. Returns how many it took.
#[cfg(any(test, feature = "conformance"))]
pub fn assert_takes_as_libzstd(cases: &[(u64, Vec<u8>)], got: Vec<(u32, Vec<u8>)>, must: usize) -> usize {
    use crate::decode::layout::validate_status as st;
    assert_eq!(got.len(), cases.len(), "a result per case");
    let mut taken = 0;
    for (i, ((want, body), (status, out))) in cases.iter().zip(got).enumerate() {
        if i < must {
            assert_eq!(status, st::OK, "case {i}: {} bytes declaring {want}", body.len());
        }
        if status == st::OK {
            taken += 1;
            let bytes = unzstd_one(body, *want).unwrap_or_else(|| panic!("case {i}: taken, but libzstd refuses it"));
            super::unsnap::assert_output_equals(i, *want, &bytes, &out);
        }
    }
    taken
}

/// How many of [`kernel_cases`]'s first items the kernel must take.
#[cfg(any(test, feature = "conformance"))]
pub const fn must_take() -> usize {
    6 * 8 + 6 + 3
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cases_decode_on_the_host_where_whole() {
        let cases = kernel_cases(200_000);
        for (i, (want, body)) in cases.iter().take(must_take()).enumerate() {
            assert!(unzstd_one(body, *want).is_some(), "case {i}");
        }
        let refused = cases.iter().filter(|(w, b)| unzstd_one(b, *w).is_none()).count();
        assert!(refused > cases.len() / 3, "{refused} of {} refused", cases.len());
    }

    /// The kernel, on the CPU emulation (ASan: no read or write outside the body or the declared
    /// output), takes every body libzstd wrote without a checksum, and where it takes any body its
    /// output is libzstd's.
    #[test]
    fn the_kernel_decodes_as_libzstd_does() {
        if let Err(why) = crate::decode::kernels::emu::available() {
            crate::test_skip(&why);
            return;
        }
        let cases = kernel_cases(300_000);
        let got = crate::decode::kernels::emu::run_unzstd_emulated(&cases);
        let taken = assert_takes_as_libzstd(&cases, got, must_take());
        eprintln!("gp_unzstd took {taken} of {} bodies", cases.len());
        assert!(
            taken < cases.len() - cases.len() / 4,
            "{taken} of {} taken",
            cases.len()
        );
    }

    /// Random faults (one to four bytes changed, a byte inserted or removed, the body cut) over bodies
    /// of every shape and several levels: the kernel never reads or writes outside its buffers (ASan),
    /// and what it takes is libzstd's output.
    #[test]
    fn the_kernel_takes_no_fault_libzstd_refuses() {
        if let Err(why) = crate::decode::kernels::emu::available() {
            crate::test_skip(&why);
            return;
        }
        let mut next = crate::decode::host_kernels::xorshift(0xa409_3822_299f_31d0);
        let mut pick = |n: usize| (next() % n as u64) as usize;
        let mut cases: Vec<(u64, Vec<u8>)> = Vec::new();
        for shape in 0..6u32 {
            let len = 2000 + 9000 * shape as usize;
            let data = shaped_data(shape, len, 1000 + u64::from(shape));
            let body = zstd::bulk::compress(&data, [1, 3, 7, 12, 19, -3][shape as usize]).expect("compress");
            for _ in 0..500 {
                let mut bad = body.clone();
                match pick(4) {
                    0 => {
                        for _ in 0..1 + pick(4) {
                            let i = pick(bad.len());
                            bad[i] = pick(256) as u8;
                        }
                    }
                    1 => {
                        let i = pick(bad.len() + 1);
                        bad.insert(i, pick(256) as u8);
                    }
                    2 => {
                        bad.remove(pick(bad.len()));
                    }
                    _ => bad.truncate(pick(bad.len())),
                }
                cases.push((len as u64, bad));
            }
        }
        let got = crate::decode::kernels::emu::run_unzstd_emulated(&cases);
        let taken = assert_takes_as_libzstd(&cases, got, 0);
        eprintln!("gp_unzstd took {taken} of {} faulted bodies", cases.len());
    }
}
