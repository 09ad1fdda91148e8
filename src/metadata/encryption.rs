//! Recognising Parquet modular encryption, so that an encrypted file gets one clear error.
//!
//! `parquet` is built without its `encryption` feature. It names an encrypted footer (magic `PARE`)
//! itself, but a file with a *plaintext* footer and encrypted columns fails with whatever part of the
//! footer it trips over first. Such a footer's `FileMetaData` carries field 8, `encryption_algorithm`;
//! a minimal Thrift compact-protocol walk over the footer's top-level fields finds it.

use std::fs::File;
use std::os::unix::fs::FileExt;

/// Largest footer this check reads (larger ones are not inspected).
const MAX_FOOTER: u64 = 64 << 20;
/// Nesting deeper than this is treated as malformed (it also bounds the recursion).
const MAX_DEPTH: usize = 64;

/// How `file` (of `len` bytes) is encrypted, if it is: a phrase for an error message.
pub fn describe(file: &File, len: u64) -> Option<&'static str> {
    if len < 12 {
        return None;
    }
    let mut tail = [0u8; 8];
    file.read_exact_at(&mut tail, len - 8).ok()?;
    if &tail[4..] == b"PARE" {
        return Some("it uses Parquet modular encryption with an encrypted footer");
    }
    if &tail[4..] != b"PAR1" {
        return None;
    }
    let meta_len = u64::from(u32::from_le_bytes([tail[0], tail[1], tail[2], tail[3]]));
    if meta_len > MAX_FOOTER || meta_len + 8 > len {
        return None;
    }
    let mut footer = vec![0u8; meta_len as usize];
    file.read_exact_at(&mut footer, len - 8 - meta_len).ok()?;
    has_encryption_algorithm(&footer)
        .then_some("it uses Parquet modular encryption (plaintext footer, encrypted columns)")
}

/// Whether a serialized `FileMetaData` has field 8 (`encryption_algorithm`) at its top level.
pub fn has_encryption_algorithm(footer: &[u8]) -> bool {
    let mut r = Compact { buf: footer, pos: 0 };
    let mut last_id = 0i16;
    loop {
        let Some((ty, id)) = r.field_header(last_id) else {
            return false;
        };
        if ty == 0 {
            return false;
        }
        if id == 8 && ty == 12 {
            return true;
        }
        if r.skip(ty, 0).is_none() {
            return false;
        }
        last_id = id;
    }
}

/// A reader of the Thrift compact protocol, just enough to skip values.
struct Compact<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl Compact<'_> {
    fn byte(&mut self) -> Option<u8> {
        let b = *self.buf.get(self.pos)?;
        self.pos += 1;
        Some(b)
    }

    fn varint(&mut self) -> Option<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.byte()?;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Some(v);
            }
        }
        None
    }

    fn advance(&mut self, n: u64) -> Option<()> {
        let end = self.pos.checked_add(usize::try_from(n).ok()?)?;
        (end <= self.buf.len()).then(|| self.pos = end)
    }

    /// A field header: (type, field id); type 0 is the end of the struct.
    fn field_header(&mut self, last_id: i16) -> Option<(u8, i16)> {
        let b = self.byte()?;
        let ty = b & 0x0f;
        if ty == 0 {
            return Some((0, 0));
        }
        let delta = i16::from(b >> 4);
        let id = if delta == 0 {
            let z = self.varint()?;
            i16::try_from((z >> 1) as i64 ^ -((z & 1) as i64)).ok()?
        } else {
            last_id.checked_add(delta)?
        };
        Some((ty, id))
    }

    /// Skips one value of compact type `ty`.
    fn skip(&mut self, ty: u8, depth: usize) -> Option<()> {
        if depth > MAX_DEPTH {
            return None;
        }
        match ty {
            1 | 2 => Some(()),
            3 => self.advance(1),
            4..=6 => self.varint().map(|_| ()),
            7 => self.advance(8),
            8 => {
                let n = self.varint()?;
                self.advance(n)
            }
            9 | 10 => {
                let h = self.byte()?;
                let elem = h & 0x0f;
                let n = match h >> 4 {
                    15 => self.varint()?,
                    n => u64::from(n),
                };
                // Elements are at least one byte, so a count beyond the rest of the buffer is malformed.
                if n > (self.buf.len() - self.pos) as u64 {
                    return None;
                }
                for _ in 0..n {
                    // Booleans in a list are one byte each.
                    if elem == 1 || elem == 2 {
                        self.advance(1)?;
                    } else {
                        self.skip(elem, depth + 1)?;
                    }
                }
                Some(())
            }
            11 => {
                let n = self.varint()?;
                if n == 0 {
                    return Some(());
                }
                if n > (self.buf.len() - self.pos) as u64 {
                    return None;
                }
                let kv = self.byte()?;
                for _ in 0..n {
                    for t in [kv >> 4, kv & 0x0f] {
                        if t == 1 || t == 2 {
                            self.advance(1)?;
                        } else {
                            self.skip(t, depth + 1)?;
                        }
                    }
                }
                Some(())
            }
            12 => {
                let mut last_id = 0i16;
                loop {
                    let (t, id) = self.field_header(last_id)?;
                    if t == 0 {
                        return Some(());
                    }
                    self.skip(t, depth + 1)?;
                    last_id = id;
                }
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_field_8_after_skipping_others() {
        // field 1 (i32 = 1), field 2 (list of 1 struct {field 1: binary "ab"}), field 8 (struct {}), stop
        let footer = [0x15, 0x02, 0x19, 0x1c, 0x18, 0x02, b'a', b'b', 0x00, 0x6c, 0x00, 0x00];
        assert!(has_encryption_algorithm(&footer));
        // Same without field 8.
        let plain = [0x15, 0x02, 0x19, 0x1c, 0x18, 0x02, b'a', b'b', 0x00, 0x00];
        assert!(!has_encryption_algorithm(&plain));
        // Truncated or garbage input is "not found", never a panic.
        for n in 0..footer.len() - 3 {
            assert!(!has_encryption_algorithm(&footer[..n]));
        }
        assert!(!has_encryption_algorithm(&[0xff; 64]));
    }
}
