//! `--verify`: checks that fetched bytes equal the file's bytes, chunk by chunk.

use crate::error::{Error, Location, Result};
use crate::io::pread::pread_exact;
use crate::metadata::ParquetSource;
use crate::plan::ReadPlan;

/// Compares every column chunk of `plan` in `fetched` (host copy of the destination buffer) with the
/// file, re-reading the file with plain `pread`s; the first difference is an error naming the column
/// chunk and the offset.
pub(crate) fn verify_against_file(source: &ParquetSource, plan: &ReadPlan, fetched: &[u8]) -> Result<()> {
    if (fetched.len() as u64) < plan.dest_len {
        return Err(Error::device(
            "verifying fetched bytes",
            format!("buffer has {} bytes, the plan needs {}", fetched.len(), plan.dest_len),
        ));
    }
    let mut scratch = Vec::new();
    for c in &plan.chunks {
        let location = Location::chunk(source.path(), c.column_path.clone(), c.row_group);
        scratch.resize(c.len as usize, 0);
        pread_exact(source.file(), &mut scratch, c.offset, &location)?;
        let got = &fetched[c.dest_offset as usize..(c.dest_offset + c.len) as usize];
        if let Some(i) = got.iter().zip(&scratch).position(|(a, b)| a != b) {
            return Err(Error::InvalidRequest {
                location,
                message: format!(
                    "verification failed: fetched byte at file offset {} is {:#04x}, the file has {:#04x}",
                    c.offset + i as u64,
                    got[i],
                    scratch[i]
                ),
            });
        }
    }
    Ok(())
}
