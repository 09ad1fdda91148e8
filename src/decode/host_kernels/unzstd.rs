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

/// A Zstd frame's shape from its headers alone: the chains a decoder follows, one a body, a block or
/// a literal stream. For the probe below: what a faster Zstd decoder could take in parallel.
#[cfg(test)]
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct FrameShape {
    blocks: u32,
    sequences: u64,
    most_sequences_in_a_block: u32,
    /// Literal bytes the compressed blocks regenerate.
    literal_bytes: u64,
    huffman_streams: u32,
}

/// Walks one frame's headers (RFC 8878, 3.1.1): the frame header, each block header, and each
/// compressed block's literals and sequences section headers. `None` where they do not fit the body
/// exactly or it is not one frame.
#[cfg(test)]
fn frame_shape(b: &[u8]) -> Option<FrameShape> {
    if b.len() < 6 || b[..4] != [0x28, 0xB5, 0x2F, 0xFD] {
        return None;
    }
    let descriptor = b[4];
    let single_segment = descriptor & 0x20 != 0;
    let content_size_bytes = match descriptor >> 6 {
        0 => usize::from(single_segment),
        1 => 2,
        2 => 4,
        _ => 8,
    };
    let mut at = 5 + usize::from(!single_segment) + [0, 1, 2, 4][usize::from(descriptor & 3)] + content_size_bytes;
    let mut shape = FrameShape::default();
    loop {
        let h = b.get(at..at + 3)?;
        let h = u32::from(h[0]) | u32::from(h[1]) << 8 | u32::from(h[2]) << 16;
        at += 3;
        let size = (h >> 3) as usize;
        shape.blocks += 1;
        match (h >> 1) & 3 {
            0 => at += size,
            1 => at += 1,
            2 => {
                let (literals, streams, sequences) = compressed_block_shape(b.get(at..at + size)?)?;
                shape.literal_bytes += literals;
                shape.huffman_streams += streams;
                shape.sequences += u64::from(sequences);
                shape.most_sequences_in_a_block = shape.most_sequences_in_a_block.max(sequences);
                at += size;
            }
            _ => return None,
        }
        if h & 1 != 0 {
            break;
        }
    }
    at += if descriptor & 4 != 0 { 4 } else { 0 };
    (at == b.len()).then_some(shape)
}

/// A compressed block's regenerated literal bytes, Huffman streams and sequences (RFC 8878,
/// 3.1.1.3.1 and 3.1.1.3.2).
#[cfg(test)]
fn compressed_block_shape(block: &[u8]) -> Option<(u64, u32, u32)> {
    let b0 = *block.first()?;
    let byte = |i: usize| block.get(i).map(|&x| usize::from(x));
    let size_format = (b0 >> 2) & 3;
    let (regenerated, header, content, streams) = if b0 & 3 < 2 {
        // Raw or RLE literals: a size of 5, 12 or 20 bits.
        let (regenerated, header) = match size_format {
            0 | 2 => (usize::from(b0 >> 3), 1),
            1 => (usize::from(b0 >> 4) | byte(1)? << 4, 2),
            _ => (usize::from(b0 >> 4) | byte(1)? << 4 | byte(2)? << 12, 3),
        };
        (regenerated, header, if b0 & 3 == 0 { regenerated } else { 1 }, 0)
    } else {
        // Huffman literals: regenerated and compressed sizes of 10, 14 or 18 bits each.
        let (header, bits) = match size_format {
            0 | 1 => (3, 10),
            2 => (4, 14),
            _ => (5, 18),
        };
        let mut v = 0u64;
        for i in 0..header {
            v |= (byte(i)? as u64) << (8 * i);
        }
        let mask = (1u64 << bits) - 1;
        let streams = if size_format == 0 { 1 } else { 4 };
        (
            ((v >> 4) & mask) as usize,
            header,
            ((v >> (4 + bits)) & mask) as usize,
            streams,
        )
    };
    let at = header + content;
    let s0 = byte(at)?;
    let sequences = match s0 {
        0..128 => s0,
        128..255 => ((s0 - 128) << 8) + byte(at + 1)?,
        _ => byte(at + 1)? + (byte(at + 2)? << 8) + 0x7F00,
    };
    let modes = at + 1 + usize::from(s0 >= 128) + usize::from(s0 == 255);
    // The modes byte's two low bits are reserved, zero.
    if sequences > 0 && byte(modes)? & 3 != 0 {
        return None;
    }
    Some((regenerated as u64, streams, sequences as u32))
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

    /// `gp_unzstd_blocks` over the same cases and the faulted ones: the same status as `gp_unzstd`
    /// for every body (so where it falls back to the whole decode, nothing changes), and libzstd's
    /// output where it takes one. Told not to fall back, its blocks' decode alone must take every
    /// single-frame body of several blocks that `gp_unzstd` takes (but where its checkpoints would not
    /// fit its scratch), and nothing libzstd refuses.
    #[test]
    fn the_blocks_kernel_decodes_as_gp_unzstd_does() {
        use crate::decode::kernels::emu;
        use crate::decode::layout::validate_status as st;
        if let Err(why) = emu::available() {
            crate::test_skip(&why);
            return;
        }
        let mut cases = kernel_cases(300_000);
        cases.extend(faulted_cases(100));
        // Faults in bodies of several blocks, where the blocks' decode runs.
        let mut next = super::super::xorshift(0x7c3a_91d2_55e0_1b46);
        for (shape, level) in [(0u32, 1), (2, 3), (4, 1), (5, 6)] {
            let data = shaped_data(shape, 400_000, 31 + u64::from(shape));
            let body = zstd::bulk::compress(&data, level).expect("compress");
            cases.push((data.len() as u64, body.clone()));
            for k in 0..120 {
                let mut bad = body.clone();
                for _ in 0..1 + k % 3 {
                    let at = (next() % bad.len() as u64) as usize;
                    bad[at] ^= 1 << (next() % 8);
                }
                cases.push((data.len() as u64, bad));
            }
        }
        let whole = emu::run_unzstd_emulated(&cases);
        let blocks = emu::run_unzstd_blocks_emulated(&cases, true);
        for (i, (a, b)) in whole.iter().zip(&blocks).enumerate() {
            assert_eq!(a.0, b.0, "case {i}: gp_unzstd's status, then gp_unzstd_blocks'");
        }
        assert_takes_as_libzstd(&cases, blocks, must_take());
        let planned = emu::run_unzstd_blocks_emulated(&cases, false);
        let mut multi_block = 0;
        for (i, ((want, body), (status, _))) in cases.iter().zip(&planned).enumerate() {
            assert!(
                *status == st::OK || *status == st::ZSTD_NOT_PLANNED,
                "case {i}: the blocks' decode gave {status}, not a decode or a fallback"
            );
            // Every frame of several blocks `gp_unzstd` takes is taken, unless its checkpoints would
            // not fit its scratch (fewer than 6 bytes a sequence, as the hand-written RLE block's 3).
            let Some(shape) = frame_shape(body).filter(|f| f.blocks >= 2) else {
                continue;
            };
            if *want >= shape.sequences * 6 && whole[i].0 == st::OK {
                assert_eq!(*status, st::OK, "case {i}: {} bytes, {shape:?}", body.len());
                multi_block += 1;
            }
        }
        assert!(
            multi_block >= 10,
            "{multi_block} bodies of several blocks decoded by their blocks"
        );
        let taken = assert_takes_as_libzstd(&cases, planned, 0);
        eprintln!(
            "gp_unzstd_blocks' blocks decode took {taken} of {} bodies, {multi_block} of several blocks",
            cases.len()
        );
    }

    /// Bodies of six shapes and levels, `per_shape` faults each (one to four bytes changed, a byte
    /// inserted or removed, the body cut), with their declared sizes.
    fn faulted_cases(per_shape: usize) -> Vec<(u64, Vec<u8>)> {
        let mut next = crate::decode::host_kernels::xorshift(0xa409_3822_299f_31d0);
        let mut pick = |n: usize| (next() % n as u64) as usize;
        let mut cases: Vec<(u64, Vec<u8>)> = Vec::new();
        for shape in 0..6u32 {
            let len = 2000 + 9000 * shape as usize;
            let data = shaped_data(shape, len, 1000 + u64::from(shape));
            let body = zstd::bulk::compress(&data, [1, 3, 7, 12, 19, -3][shape as usize]).expect("compress");
            for _ in 0..per_shape {
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
        cases
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
        let cases = faulted_cases(500);
        let got = crate::decode::kernels::emu::run_unzstd_emulated(&cases);
        let taken = assert_takes_as_libzstd(&cases, got, 0);
        eprintln!("gp_unzstd took {taken} of {} faulted bodies", cases.len());
    }

    /// Frames whose literals and sequences are known: `runs` pieces of `piece` bytes drawn from 64
    /// symbols (Huffman-coded, no chance repeats of 5 bytes), each followed by a copy of itself (one
    /// match). So `runs` sequences and about `runs * piece` literal bytes, through the literals
    /// header's 10-, 14- and 18-bit sizes and the sequences header's one- and two-byte counts.
    #[test]
    fn frame_shapes_count_literals_and_sequences() {
        let mut next = super::super::xorshift(11);
        for (runs, piece, level) in [
            (1usize, 500usize, 3),
            (1, 5_000, 3),
            (1, 20_000, 3),
            (300, 40, 3),
            (300, 40, 19),
        ] {
            let mut data = Vec::new();
            for _ in 0..runs {
                let p: Vec<u8> = (0..piece).map(|_| b'!' + (next() % 64) as u8).collect();
                data.extend_from_slice(&p);
                data.extend_from_slice(&p);
            }
            let body = zstd::bulk::compress(&data, level).expect("compress");
            let got = frame_shape(&body).expect("one frame");
            assert_eq!(
                (got.sequences, got.huffman_streams),
                (runs as u64, 4),
                "{runs} x {piece}: {got:?}"
            );
            // A match may start a byte or two early where a piece ends as the next one begins.
            let literals = (runs * piece) as u64;
            assert!(
                (literals - literals / 64..=literals).contains(&got.literal_bytes),
                "{got:?}"
            );
            if runs == 1 {
                assert_eq!(got.literal_bytes, literals);
            }
        }
    }

    #[test]
    fn frame_shapes_walk_every_block_to_the_body_end() {
        for (shape, len) in [(0u32, 300_000usize), (2, 70_000), (5, 200_000)] {
            let data = shaped_data(shape, len, 7);
            for level in [-5, 1, 19] {
                let body = zstd::bulk::compress(&data, level).expect("compress");
                let got = frame_shape(&body).unwrap_or_else(|| panic!("shape {shape} level {level}"));
                // A block regenerates at most 128 KiB.
                assert!(got.blocks as usize >= len.div_ceil(128 << 10), "{got:?}");
                // Each sequence copies a match of 3 bytes or more.
                assert!(got.literal_bytes + 3 * got.sequences <= len as u64, "{got:?}");
                assert!(got.most_sequences_in_a_block as u64 <= got.sequences);
                if shape == 0 {
                    // Text of a small vocabulary: matches, and Huffman literals but at the fast
                    // (negative) levels, which leave literals raw.
                    assert!(got.sequences > 0, "{got:?}");
                    assert_eq!(got.huffman_streams > 0, level > 0, "{got:?}");
                }
                // One byte short or one byte more: not one frame that fits.
                assert_eq!(frame_shape(&body[..body.len() - 1]), None);
                let mut longer = body.clone();
                longer.push(0);
                assert_eq!(frame_shape(&longer), None);
            }
        }
    }
}

#[cfg(test)]
mod probe {
    use super::frame_shape;

    /// Not a test: the shape of a file's Zstd page bodies (`GP_PROBE_FILE`, every row group), by the
    /// size they decompress to: how many, their blocks, and the longest chain of sequences a decoder
    /// follows when it takes a body at a time, or a block at a time.
    #[test]
    #[ignore]
    fn zstd_bodies_of_a_file() {
        use crate::decode::host_kernels::validate::cases::{file_bodies, probe_file};
        let Some(path) = probe_file() else { return };
        let bodies = file_bodies(&path, |_| true);
        let classes: [(&str, u64); 3] = [
            ("under 64 kB", 64 << 10),
            ("64-256 kB", 256 << 10),
            ("256 kB and more", u64::MAX),
        ];
        let mut unparsed = 0;
        println!("{} bodies of {path}", bodies.len());
        for (k, (name, below)) in classes.iter().enumerate() {
            let above = if k == 0 { 0 } else { classes[k - 1].1 };
            let shapes: Vec<(u64, u64, super::FrameShape)> = bodies
                .iter()
                .filter(|(want, _)| (above..*below).contains(want))
                .filter_map(|(want, body)| match frame_shape(body) {
                    Some(s) => Some((*want, body.len() as u64, s)),
                    None => {
                        unparsed += 1;
                        None
                    }
                })
                .collect();
            if shapes.is_empty() {
                continue;
            }
            let n = shapes.len() as f64;
            let sum = |f: &dyn Fn(&(u64, u64, super::FrameShape)) -> u64| shapes.iter().map(f).sum::<u64>();
            let out = sum(&|s| s.0);
            println!(
                "{name}: {} bodies, {:.1} MB to {:.1} MB; blocks a body {:.1} (most {}); sequences a body {:.0} \
                 (most {}), most in a block {}; literals {:.0} % of the output; Huffman streams {}",
                shapes.len(),
                sum(&|s| s.1) as f64 / 1e6,
                out as f64 / 1e6,
                sum(&|s| u64::from(s.2.blocks)) as f64 / n,
                shapes.iter().map(|s| s.2.blocks).max().unwrap_or(0),
                sum(&|s| s.2.sequences) as f64 / n,
                shapes.iter().map(|s| s.2.sequences).max().unwrap_or(0),
                shapes.iter().map(|s| s.2.most_sequences_in_a_block).max().unwrap_or(0),
                100.0 * sum(&|s| s.2.literal_bytes) as f64 / out.max(1) as f64,
                sum(&|s| u64::from(s.2.huffman_streams)),
            );
        }
        println!("{unparsed} bodies not one frame of blocks");
    }
}
