//! Host decompression of Parquet pages: the fallback where nvCOMP is absent or does not take the
//! codec (Brotli, Hadoop-framed LZ4), and the reference GPU decompression is checked against.
//!
//! parquet 60 keeps its codec API private (public only under its `experimental` feature), so this
//! calls the crates it uses, with the same versions and features: `snap`, `flate2`, `zstd`,
//! `brotli`, `lz4_flex`. Every codec arrow-rs reads is covered, with arrow-rs's semantics: a page
//! whose declared uncompressed size is 0 is empty whatever its bytes (arrow-rs does not decompress
//! it), and `LZ4` tries Hadoop framing, then the LZ4 frame format, then a raw block.
//!
//! The output is exactly the declared length or an error, and no more than the declared length is
//! ever allocated for it (the caller bounds that length before asking): streaming decoders read
//! into a buffer of that size and must then be at their end. A panic inside a decoder is an error.

use std::io::Read;

use parquet::basic::Compression;

use crate::error::Location;
use crate::panic_guard::contain_panics;

/// Decompresses one page (or the compressed part of a v2 data page) of `codec` into exactly
/// `uncompressed_len` bytes; `Err` says why it could not (corrupt or truncated input, more or less
/// output than declared, an unsupported codec).
pub(crate) fn decompress_host(codec: Compression, input: &[u8], uncompressed_len: usize) -> Result<Vec<u8>, String> {
    if uncompressed_len == 0 {
        // arrow-rs does not decompress a page that declares no bytes (a v2 page of nulls only).
        return Ok(Vec::new());
    }
    let run = || match codec {
        Compression::UNCOMPRESSED => {
            if input.len() == uncompressed_len {
                Ok(input.to_vec())
            } else {
                Err(format!(
                    "an uncompressed page of {} bytes declares {uncompressed_len}",
                    input.len()
                ))
            }
        }
        Compression::SNAPPY => snappy(input, uncompressed_len),
        Compression::GZIP(_) => {
            // Parquet's GZIP may hold several gzip members one after the other.
            read_exactly(flate2::read::MultiGzDecoder::new(input), uncompressed_len)
        }
        Compression::LZ4 => lz4_any(input, uncompressed_len),
        Compression::ZSTD(_) => zstd(input, uncompressed_len),
        Compression::BROTLI(_) => read_exactly(brotli::Decompressor::new(input, 4096), uncompressed_len),
        Compression::LZ4_RAW => lz4_raw(input, uncompressed_len),
        Compression::LZO => Err("LZO is not supported (arrow-rs does not read it either)".to_string()),
    };
    contain_panics(&Location::default(), || Ok(run()))
        .map_err(|e| format!("the {codec} decoder failed: {e}"))?
        .map_err(|e| format!("{codec}: {e}"))
}

/// Reads exactly `len` bytes from `r` and checks that it has nothing more.
fn read_exactly(mut r: impl Read, len: usize) -> Result<Vec<u8>, String> {
    let mut out = vec![0u8; len];
    r.read_exact(&mut out).map_err(|e| match e.kind() {
        std::io::ErrorKind::UnexpectedEof => format!("the data decompresses to fewer than the {len} bytes declared"),
        _ => e.to_string(),
    })?;
    // Reading on to the end also checks what trails the data (gzip's CRC and length).
    let mut extra = [0u8; 1];
    loop {
        match r.read(&mut extra) {
            Ok(0) => return Ok(out),
            Ok(_) => return Err(format!("the data decompresses to more than the {len} bytes declared")),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e.to_string()),
        }
    }
}

fn snappy(input: &[u8], len: usize) -> Result<Vec<u8>, String> {
    let declared = snap::raw::decompress_len(input).map_err(|e| e.to_string())?;
    if declared != len {
        return Err(format!(
            "the data says it holds {declared} bytes; the page declares {len}"
        ));
    }
    let mut out = vec![0u8; len];
    let n = snap::raw::Decoder::new()
        .decompress(input, &mut out)
        .map_err(|e| e.to_string())?;
    if n != len {
        return Err(format!("decompressed {n} bytes; the page declares {len}"));
    }
    Ok(out)
}

fn zstd(input: &[u8], len: usize) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(len);
    // Writes into the capacity only: more output than `len` is an error, not a reallocation.
    let n = zstd::bulk::Decompressor::new()
        .and_then(|mut d| d.decompress_to_buffer(input, &mut out))
        .map_err(|e| e.to_string())?;
    if n != len {
        return Err(format!("decompressed {n} bytes; the page declares {len}"));
    }
    Ok(out)
}

fn lz4_raw(input: &[u8], len: usize) -> Result<Vec<u8>, String> {
    let mut out = vec![0u8; len];
    let n = lz4_flex::block::decompress_into(input, &mut out).map_err(|e| e.to_string())?;
    if n != len {
        return Err(format!("decompressed {n} bytes; the page declares {len}"));
    }
    Ok(out)
}

/// Parquet's `LZ4`: Hadoop framing (what parquet-mr and arrow-rs write), else the LZ4 frame format
/// (older parquet-cpp), else a raw block (older arrow-rs), as arrow-rs falls back.
fn lz4_any(input: &[u8], len: usize) -> Result<Vec<u8>, String> {
    let hadoop = match lz4_hadoop(input, len) {
        Ok(out) => return Ok(out),
        Err(e) => e,
    };
    let frame = match read_exactly(lz4_flex::frame::FrameDecoder::new(input), len) {
        Ok(out) => return Ok(out),
        Err(e) => e,
    };
    lz4_raw(input, len).map_err(|raw| {
        format!("not LZ4 in Hadoop framing ({hadoop}), nor an LZ4 frame ({frame}), nor a raw LZ4 block ({raw})")
    })
}

/// Hadoop's framing: frames of a big-endian u32 decompressed size, a big-endian u32 compressed
/// size, then that many bytes of a raw LZ4 block; the frames fill the input and the output.
fn lz4_hadoop(input: &[u8], len: usize) -> Result<Vec<u8>, String> {
    let mut out = vec![0u8; len];
    let (mut i, mut o) = (0usize, 0usize);
    while i < input.len() {
        let Some(header) = input.get(i..i + 8) else {
            return Err(format!("{} stray bytes after the last frame", input.len() - i));
        };
        let dlen = u32::from_be_bytes(header[..4].try_into().expect("4 bytes")) as usize;
        let clen = u32::from_be_bytes(header[4..].try_into().expect("4 bytes")) as usize;
        i += 8;
        if clen > input.len() - i {
            return Err(format!("a frame of {clen} bytes, {} left", input.len() - i));
        }
        if dlen > len - o {
            return Err(format!("frames decompress to more than the {len} bytes declared"));
        }
        let n =
            lz4_flex::block::decompress_into(&input[i..i + clen], &mut out[o..o + dlen]).map_err(|e| e.to_string())?;
        if n != dlen {
            return Err(format!("a frame decompressed to {n} bytes, declaring {dlen}"));
        }
        i += clen;
        o += dlen;
    }
    if o != len {
        return Err(format!("frames decompress to {o} bytes; the page declares {len}"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::sync::Arc;

    use arrow::array::{ArrayRef, Float64Array, Int64Array, StringArray};
    use arrow::record_batch::RecordBatch;
    use bytes::Bytes;
    use parquet::arrow::ArrowWriter;
    use parquet::basic::{BrotliLevel, GzipLevel, ZstdLevel};
    use parquet::column::page::{Page, PageReader};
    use parquet::file::properties::{WriterProperties, WriterVersion};
    use parquet::file::reader::{FileReader, SerializedFileReader};
    use parquet::file::serialized_reader::SerializedPageReader;

    use super::*;

    fn codecs() -> [Compression; 7] {
        [
            Compression::UNCOMPRESSED,
            Compression::SNAPPY,
            Compression::GZIP(GzipLevel::try_new(6).unwrap()),
            Compression::LZ4,
            Compression::ZSTD(ZstdLevel::try_new(3).unwrap()),
            Compression::BROTLI(BrotliLevel::try_new(1).unwrap()),
            Compression::LZ4_RAW,
        ]
    }

    /// A file arrow-rs writes with `codec`: numbers, repetitive and random-ish strings, nulls,
    /// several pages per chunk, dictionary and plain pages.
    fn write(codec: Compression, version: WriterVersion) -> Bytes {
        let n = 20_000i64;
        let ids: ArrayRef = Arc::new(Int64Array::from_iter_values(0..n));
        let f: ArrayRef = Arc::new(Float64Array::from_iter(
            (0..n).map(|i| (i % 7 != 0).then_some(i as f64 * 0.37)),
        ));
        let s: ArrayRef = Arc::new(StringArray::from_iter((0..n).map(|i| {
            (i % 11 != 0).then(|| format!("value-{}-{}", i % 97, (i * 2_654_435_761) % 1_000_003))
        })));
        let batch = RecordBatch::try_from_iter([("id", ids), ("f", f), ("s", s)]).unwrap();
        let props = WriterProperties::builder()
            .set_compression(codec)
            .set_writer_version(version)
            .set_data_page_size_limit(16 << 10)
            .set_dictionary_page_size_limit(8 << 10)
            .build();
        let mut out = Vec::new();
        let mut w = ArrowWriter::try_new(&mut out, batch.schema(), Some(props)).unwrap();
        w.write(&batch).unwrap();
        w.close().unwrap();
        Bytes::from(out)
    }

    /// Every page of every chunk twice: as the page reader decompresses it, and raw (read through
    /// metadata that says UNCOMPRESSED, so the reader hands the stored bytes over untouched).
    fn pages(file: &Bytes) -> Vec<(Page, Page)> {
        let reader = SerializedFileReader::new(file.clone()).unwrap();
        let meta = reader.metadata();
        let mut pairs = Vec::new();
        for g in meta.row_groups() {
            for chunk in g.columns() {
                let raw_meta = chunk
                    .clone()
                    .into_builder()
                    .set_compression(Compression::UNCOMPRESSED)
                    .build()
                    .unwrap();
                let rows = g.num_rows() as usize;
                let mut dec = SerializedPageReader::new(Arc::new(file.clone()), chunk, rows, None).unwrap();
                let mut raw = SerializedPageReader::new(Arc::new(file.clone()), &raw_meta, rows, None).unwrap();
                while let Some(d) = dec.get_next_page().unwrap() {
                    pairs.push((d, raw.get_next_page().unwrap().expect("as many raw pages")));
                }
                assert!(raw.get_next_page().unwrap().is_none());
            }
        }
        pairs
    }

    /// The compressed part of a page and what it must decompress to.
    fn compressed_part<'a>(decoded: &'a Page, raw: &'a Page) -> Option<(&'a [u8], &'a [u8])> {
        let levels = match decoded {
            Page::DataPageV2 {
                def_levels_byte_len,
                rep_levels_byte_len,
                is_compressed,
                ..
            } => {
                if !is_compressed {
                    return None;
                }
                (*def_levels_byte_len + *rep_levels_byte_len) as usize
            }
            _ => 0,
        };
        Some((&raw.buffer()[levels..], &decoded.buffer()[levels..]))
    }

    #[test]
    fn every_codec_round_trips_pages_parquet_wrote() {
        for version in [WriterVersion::PARQUET_1_0, WriterVersion::PARQUET_2_0] {
            for codec in codecs() {
                let file = write(codec, version);
                let pairs = pages(&file);
                assert!(pairs.len() > 6, "{codec} {version:?}: {} pages", pairs.len());
                let mut checked = 0;
                for (decoded, raw) in &pairs {
                    let Some((input, want)) = compressed_part(decoded, raw) else {
                        continue;
                    };
                    let got = decompress_host(codec, input, want.len())
                        .unwrap_or_else(|e| panic!("{codec} {version:?}: {e}"));
                    assert_eq!(got, want, "{codec} {version:?}");
                    checked += 1;
                    if want.is_empty() || codec == Compression::UNCOMPRESSED {
                        continue;
                    }
                    // Truncated, corrupt, or declared one byte off: an error, never a panic.
                    let cut = &input[..input.len() / 2];
                    assert!(decompress_host(codec, cut, want.len()).is_err(), "{codec}: truncated");
                    assert!(
                        decompress_host(codec, input, want.len() + 1).is_err(),
                        "{codec}: longer"
                    );
                    assert!(
                        decompress_host(codec, input, want.len() - 1).is_err(),
                        "{codec}: shorter"
                    );
                    let mut bad = input.to_vec();
                    for (i, b) in bad.iter_mut().enumerate() {
                        *b ^= (i as u8).wrapping_mul(31) | 1;
                    }
                    if let Ok(out) = decompress_host(codec, &bad, want.len()) {
                        assert_eq!(out.len(), want.len());
                    }
                }
                // arrow-rs stores v2 pages without a codec as not compressed: nothing to check there.
                assert!(checked > 6 || codec == Compression::UNCOMPRESSED, "{codec} {version:?}");
            }
        }
    }

    #[test]
    fn lz4_falls_back_to_the_frame_format_then_a_raw_block() {
        let data: Vec<u8> = (0..50_000u32).flat_map(|i| (i % 251).to_le_bytes()).collect();
        let raw = lz4_flex::block::compress(&data);
        let mut frame = lz4_flex::frame::FrameEncoder::new(Vec::new());
        frame.write_all(&data).unwrap();
        let frame = frame.finish().unwrap();
        // Two Hadoop frames.
        let (a, b) = data.split_at(12_345);
        let mut hadoop = Vec::new();
        for part in [a, b] {
            let c = lz4_flex::block::compress(part);
            hadoop.extend_from_slice(&(part.len() as u32).to_be_bytes());
            hadoop.extend_from_slice(&(c.len() as u32).to_be_bytes());
            hadoop.extend_from_slice(&c);
        }
        for (what, input) in [("raw", &raw), ("frame", &frame), ("hadoop", &hadoop)] {
            assert_eq!(
                decompress_host(Compression::LZ4, input, data.len()).unwrap(),
                data,
                "{what}"
            );
            // (lz4_flex, like arrow-rs, accepts a frame that lacks only its end mark.)
            let cut = decompress_host(Compression::LZ4, &input[..input.len() / 2], data.len());
            assert!(cut.is_err(), "{what}: {:?}", cut.map(|v| v.len()));
        }
        let e = decompress_host(Compression::LZ4, b"\x00\x00\x00\x10garbage!", 16).unwrap_err();
        assert!(e.contains("Hadoop framing") && e.contains("raw LZ4 block"), "{e}");
    }

    #[test]
    fn hostile_or_odd_inputs_are_errors() {
        // A Snappy header claiming 4 GiB is refused before anything is allocated for it.
        let e = decompress_host(Compression::SNAPPY, &[0xff, 0xff, 0xff, 0xff, 0x0f, 0], 100).unwrap_err();
        assert!(e.contains("page declares 100"), "{e}");
        // Gzip with more data than declared, and with a broken CRC.
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(&[7u8; 1000]).unwrap();
        let gz = gz.finish().unwrap();
        assert_eq!(
            decompress_host(Compression::GZIP(Default::default()), &gz, 1000).unwrap(),
            vec![7u8; 1000]
        );
        let e = decompress_host(Compression::GZIP(Default::default()), &gz, 999).unwrap_err();
        assert!(e.contains("more than the 999 bytes"), "{e}");
        let mut bad_crc = gz.clone();
        let crc_at = bad_crc.len() - 8;
        bad_crc[crc_at] ^= 1;
        assert!(decompress_host(Compression::GZIP(Default::default()), &bad_crc, 1000).is_err());
        // Zstd output larger than declared does not grow the buffer.
        let z = zstd::bulk::compress(&[1u8; 5000], 3).unwrap();
        assert!(decompress_host(Compression::ZSTD(Default::default()), &z, 4999).is_err());
        // Empty input, no codec, declared sizes of zero.
        for codec in codecs() {
            assert_eq!(decompress_host(codec, b"whatever", 0).unwrap(), Vec::<u8>::new());
            if codec != Compression::UNCOMPRESSED {
                assert!(decompress_host(codec, &[], 10).is_err(), "{codec}");
            }
        }
        assert!(decompress_host(Compression::UNCOMPRESSED, b"abc", 4).is_err());
        assert!(
            decompress_host(Compression::LZO, b"abc", 3)
                .unwrap_err()
                .contains("LZO")
        );
    }
}
