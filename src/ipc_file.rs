//! Writing decoded batches as an Arrow IPC file, without ever destroying what the output path names by
//! mistake.
//!
//! [`write_ipc_file`] looks at what the output path is before writing, and acts per file type:
//!
//! | the output path is            | what happens                                                          |
//! |-------------------------------|-----------------------------------------------------------------------|
//! | missing                       | created atomically (temporary file in the same directory, renamed)    |
//! | a regular file                | replaced atomically; until the rename the old content stays intact    |
//! | a symlink                     | followed: the file it finally points to is created or replaced        |
//! |                               | atomically as above, and the link itself is kept                      |
//! | the input file (same inode)   | refused: it would overwrite the file being read                       |
//! | a character device, FIFO or   | opened for writing (no create, no rename) and written through, so     |
//! | socket                        | `/dev/null` discards the output and `/dev/full` fails with ENOSPC     |
//! | a directory or block device   | refused                                                               |
//!
//! Atomic replacement writes `.<file name>.gpu-parquet-<pid>-<n>.tmp` next to the target (opened with
//! `O_CREAT | O_EXCL`, so nothing is clobbered), fsyncs it, renames it over the target and fsyncs the
//! directory. On any failure the temporary file is removed and the target is left as it was. A replaced
//! file keeps its permission bits (not its owner, nor other hard links to the old inode: those keep the
//! old content, as with any rename-based replacement).
//!
//! Symlinks are followed on purpose: a user who points `out.arrow` at a file on another disk means that
//! file; replacing the link by a regular file would silently break the layout. A dangling link is
//! resolved by hand (its target taken relative to the link's directory, link after link) and the file
//! it names is created. A link to a special file needs no resolving, since it is opened in place: so
//! `/dev/stdout` works when standard output is a pipe or a terminal. (When it is a regular file,
//! `/dev/stdout` resolves to that file, which is then replaced like any other.)
//!
//! Every error names the output path the caller gave, never the temporary file.

use std::fs::{File, OpenOptions};
use std::io::BufWriter;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use arrow::datatypes::{DataType, SchemaRef};
use arrow::error::ArrowError;
use arrow::record_batch::RecordBatch;

use crate::error::{Error, Location, Result};

/// A kind of file that is written through in place rather than replaced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpecialFile {
    /// A character device (`/dev/null`, `/dev/full`, a terminal...).
    CharDevice,
    /// A named pipe.
    Fifo,
    /// A Unix socket (opening one for writing fails on Linux; kept for completeness).
    Socket,
}

impl std::fmt::Display for SpecialFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            SpecialFile::CharDevice => "character device",
            SpecialFile::Fifo => "FIFO",
            SpecialFile::Socket => "socket",
        })
    }
}

/// How [`write_ipc_file`] wrote its output. `target` is the path finally written: the output path
/// itself, or where a symlink at the output path (finally) points.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WriteOutcome {
    /// No file was there: a new regular file was created (atomically).
    Created {
        /// The file created.
        target: PathBuf,
    },
    /// A regular file was there and was replaced atomically.
    Replaced {
        /// The file replaced.
        target: PathBuf,
    },
    /// A special file was opened and written through, in place.
    WroteThrough {
        /// The special file written.
        target: PathBuf,
        /// What kind of file it is.
        kind: SpecialFile,
    },
}

impl WriteOutcome {
    /// The path finally written.
    pub fn target(&self) -> &Path {
        match self {
            WriteOutcome::Created { target } | WriteOutcome::Replaced { target } => target,
            WriteOutcome::WroteThrough { target, .. } => target,
        }
    }
}

impl std::fmt::Display for WriteOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WriteOutcome::Created { target } => write!(f, "created {}", target.display()),
            WriteOutcome::Replaced { target } => write!(f, "replaced {}", target.display()),
            WriteOutcome::WroteThrough { target, kind } => write!(f, "wrote through {kind} {}", target.display()),
        }
    }
}

/// Most symlinks followed by hand when resolving a dangling link (Linux's own limit).
const MAX_SYMLINK_HOPS: usize = 40;

/// Writes `batches` (each matching `schema`) as an Arrow IPC file at `out`, safely: see the module
/// documentation for what happens per file type. `inputs` are the files being read; writing over one
/// of them (the same device and inode, after following links) is refused.
///
/// An IPC file holds one dictionary per field, but each row group may bring its own (polars writes
/// such files): when there is more than one batch and a field is or contains a dictionary, the batches
/// are concatenated first, merging the dictionaries, at the cost of one copy of the table.
pub fn write_ipc_file(
    out: &Path,
    schema: &SchemaRef,
    batches: &[RecordBatch],
    inputs: &[&Path],
) -> Result<WriteOutcome> {
    let location = Location::file(out);
    let target = resolve(out, &location)?;
    let via = if target == out {
        String::new()
    } else {
        format!(" (through the symlink to {})", target.display())
    };
    let existing = match std::fs::metadata(&target) {
        Ok(m) => Some(m),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(Error::io(location, format!("cannot inspect the output path{via}"), e)),
    };
    if let Some(m) = &existing {
        for input in inputs {
            if let Ok(im) = std::fs::metadata(input)
                && (im.dev(), im.ino()) == (m.dev(), m.ino())
            {
                return Err(Error::InvalidRequest {
                    location,
                    message: format!(
                        "refusing to write the output{via}: it would overwrite the input file being read ({})",
                        input.display()
                    ),
                });
            }
        }
    }
    let ft = existing.as_ref().map(|m| m.file_type());
    let special = match ft {
        None => None,
        Some(t) if t.is_file() => None,
        Some(t) if t.is_char_device() => Some(SpecialFile::CharDevice),
        Some(t) if t.is_fifo() => Some(SpecialFile::Fifo),
        Some(t) if t.is_socket() => Some(SpecialFile::Socket),
        Some(t) => {
            let what = if t.is_dir() {
                "a directory"
            } else if t.is_block_device() {
                "a block device"
            } else {
                "neither a regular file nor a device"
            };
            return Err(Error::InvalidRequest {
                location,
                message: format!(
                    "the output path{via} is {what}; refusing to write an Arrow IPC file there (give a file path)"
                ),
            });
        }
    };
    let batches = merge_dictionaries(schema, batches, &location)?;
    match special {
        Some(kind) => {
            write_through(&target, schema, &batches, &location, &via)?;
            Ok(WriteOutcome::WroteThrough { target, kind })
        }
        None => {
            let mode = existing.as_ref().map(|m| m.permissions().mode());
            replace_atomically(&target, mode, schema, &batches, &location, &via)?;
            Ok(match existing {
                Some(_) => WriteOutcome::Replaced { target },
                None => WriteOutcome::Created { target },
            })
        }
    }
}

/// Writes `batches` (each matching `schema`) as an Arrow IPC file into `writer` (standard output, say),
/// flushing it; errors name `name`. Dictionaries are merged as [`write_ipc_file`] merges them.
pub fn write_ipc_to<W: std::io::Write>(
    writer: W,
    name: &str,
    schema: &SchemaRef,
    batches: &[RecordBatch],
) -> Result<()> {
    let location = Location::file(name);
    let batches = merge_dictionaries(schema, batches, &location)?;
    let mut ipc = arrow::ipc::writer::FileWriter::try_new(std::io::BufWriter::new(writer), schema)
        .map_err(|e| write_error(&location, "", e))?;
    for batch in &batches {
        ipc.write(batch).map_err(|e| write_error(&location, "", e))?;
    }
    let mut buffered = ipc.into_inner().map_err(|e| write_error(&location, "", e))?;
    std::io::Write::flush(&mut buffered).map_err(|e| Error::io(location, "cannot write the Arrow IPC file", e))
}

/// The path to write: `out` itself, or where the symlink `out` finally points.
fn resolve(out: &Path, location: &Location) -> Result<PathBuf> {
    match std::fs::symlink_metadata(out) {
        Ok(m) if m.file_type().is_symlink() => {}
        Ok(_) => return Ok(out.to_path_buf()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out.to_path_buf()),
        Err(e) => return Err(Error::io(location.clone(), "cannot inspect the output path", e)),
    }
    match std::fs::metadata(out) {
        // The link leads to a regular file (or a directory, refused later): its canonical path, which
        // is where the temporary file must go.
        Ok(m) if m.is_file() || m.is_dir() => std::fs::canonicalize(out)
            .map_err(|e| Error::io(location.clone(), "cannot resolve the symlink at the output path", e)),
        // Anything else is written through in place, and opening `out` follows the link itself. Links
        // such as /dev/stdout -> /proc/self/fd/1 -> "pipe:[123]" have no canonical path: keep `out`.
        Ok(_) => Ok(std::fs::canonicalize(out).unwrap_or_else(|_| out.to_path_buf())),
        // A dangling link: follow it by hand to the path it names.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let mut p = out.to_path_buf();
            for _ in 0..MAX_SYMLINK_HOPS {
                match std::fs::symlink_metadata(&p) {
                    Ok(m) if m.file_type().is_symlink() => {
                        let t = std::fs::read_link(&p).map_err(|e| {
                            Error::io(location.clone(), "cannot read the symlink at the output path", e)
                        })?;
                        p = match p.parent() {
                            Some(dir) if t.is_relative() => dir.join(t),
                            _ => t,
                        };
                    }
                    _ => return Ok(p),
                }
            }
            Err(Error::io(
                location.clone(),
                "cannot resolve the symlink at the output path",
                std::io::Error::from_raw_os_error(libc::ELOOP),
            ))
        }
        Err(e) => Err(Error::io(
            location.clone(),
            "cannot resolve the symlink at the output path",
            e,
        )),
    }
}

/// `batches`, checked against `schema`, and concatenated when dictionaries must be merged.
fn merge_dictionaries(schema: &SchemaRef, batches: &[RecordBatch], location: &Location) -> Result<Vec<RecordBatch>> {
    for (i, b) in batches.iter().enumerate() {
        check_batch(schema, i, b, location)?;
    }
    if batches.len() > 1 && schema.fields().iter().any(|f| has_dictionary(f.data_type())) {
        let merged =
            arrow::compute::concat_batches(schema, batches).map_err(|e| Error::parquet(location.clone(), e))?;
        Ok(vec![merged])
    } else {
        Ok(batches.to_vec())
    }
}

/// Arrow's IPC writer does not check batches against the file's schema; a mismatch would make a file
/// no reader accepts.
fn check_batch(schema: &SchemaRef, index: usize, batch: &RecordBatch, location: &Location) -> Result<()> {
    let fields = schema.fields();
    let mismatch = if batch.num_columns() != fields.len() {
        Some(format!(
            "it has {} columns, the schema {}",
            batch.num_columns(),
            fields.len()
        ))
    } else {
        fields
            .iter()
            .zip(batch.columns())
            .find(|(f, c)| f.data_type() != c.data_type())
            .map(|(f, c)| {
                format!(
                    "column '{}' is {}, the schema says {}",
                    f.name(),
                    c.data_type(),
                    f.data_type()
                )
            })
    };
    match mismatch {
        None => Ok(()),
        Some(m) => Err(Error::InvalidRequest {
            location: location.clone(),
            message: format!("record batch {index} does not match the output schema: {m}"),
        }),
    }
}

/// Whether `t` is or contains a dictionary type.
fn has_dictionary(t: &DataType) -> bool {
    use DataType::*;
    match t {
        Dictionary(..) => true,
        List(f) | LargeList(f) | FixedSizeList(f, _) | Map(f, _) | ListView(f) | LargeListView(f) => {
            has_dictionary(f.data_type())
        }
        Struct(fields) => fields.iter().any(|f| has_dictionary(f.data_type())),
        Union(fields, _) => fields.iter().any(|(_, f)| has_dictionary(f.data_type())),
        RunEndEncoded(_, v) => has_dictionary(v.data_type()),
        _ => false,
    }
}

/// An Arrow error while writing, at the output path: I/O errors keep their OS error.
fn write_error(location: &Location, via: &str, e: ArrowError) -> Error {
    match e {
        ArrowError::IoError(_, source) => Error::io(
            location.clone(),
            format!("cannot write the Arrow IPC file{via}"),
            source,
        ),
        other => Error::parquet(location.clone(), other),
    }
}

/// Serialises the IPC file into `file` and returns it, flushed.
fn write_into(file: File, schema: &SchemaRef, batches: &[RecordBatch], location: &Location, via: &str) -> Result<File> {
    let mut writer = arrow::ipc::writer::FileWriter::try_new(BufWriter::new(file), schema)
        .map_err(|e| write_error(location, via, e))?;
    for batch in batches {
        writer.write(batch).map_err(|e| write_error(location, via, e))?;
    }
    // `into_inner` finishes the file and flushes the buffer; any error of that last write surfaces here.
    let buffered = writer.into_inner().map_err(|e| write_error(location, via, e))?;
    buffered.into_inner().map_err(|e| {
        Error::io(
            location.clone(),
            format!("cannot write the Arrow IPC file{via}"),
            e.into_error(),
        )
    })
}

/// Opens an existing special file for writing (no create, no truncate) and writes into it.
fn write_through(
    target: &Path,
    schema: &SchemaRef,
    batches: &[RecordBatch],
    location: &Location,
    via: &str,
) -> Result<()> {
    let file = OpenOptions::new()
        .write(true)
        .open(target)
        .map_err(|e| Error::io(location.clone(), format!("cannot open for writing{via}"), e))?;
    write_into(file, schema, batches, location, via).map(drop)
}

/// Distinguishes the temporary files of one process.
static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// Removes the temporary file unless disarmed (after the rename).
struct TempFile {
    path: Option<PathBuf>,
}

impl Drop for TempFile {
    fn drop(&mut self) {
        if let Some(p) = self.path.take() {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// Writes a temporary file next to `target`, fsyncs it and renames it over `target`.
fn replace_atomically(
    target: &Path,
    mode: Option<u32>,
    schema: &SchemaRef,
    batches: &[RecordBatch],
    location: &Location,
    via: &str,
) -> Result<()> {
    let Some(name) = target.file_name() else {
        return Err(Error::InvalidRequest {
            location: location.clone(),
            message: format!("the output path{via} does not name a file"),
        });
    };
    let dir = match target.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let pid = std::process::id();
    let mut attempts = 0;
    let (file, temp_path) = loop {
        let n = TEMP_COUNTER.fetch_add(1, Ordering::Relaxed);
        let mut tmp_name = std::ffi::OsString::from(".");
        tmp_name.push(name);
        tmp_name.push(format!(".gpu-parquet-{pid}-{n}.tmp"));
        let path = dir.join(tmp_name);
        match OpenOptions::new().write(true).create_new(true).mode(0o666).open(&path) {
            Ok(f) => break (f, path),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && attempts < 100 => attempts += 1,
            Err(e) => {
                return Err(Error::io(
                    location.clone(),
                    format!("cannot create a temporary file in {}{via}", dir.display()),
                    e,
                ));
            }
        }
    };
    let mut guard = TempFile {
        path: Some(temp_path.clone()),
    };
    if let Some(mode) = mode {
        // Keep the replaced file's permission bits.
        file.set_permissions(std::fs::Permissions::from_mode(mode & 0o7777))
            .map_err(|e| Error::io(location.clone(), format!("cannot set permissions{via}"), e))?;
    }
    let file = write_into(file, schema, batches, location, via)?;
    file.sync_all()
        .map_err(|e| Error::io(location.clone(), format!("cannot sync the Arrow IPC file{via}"), e))?;
    drop(file);
    std::fs::rename(&temp_path, target).map_err(|e| {
        Error::io(
            location.clone(),
            format!("cannot move the finished file into place{via}"),
            e,
        )
    })?;
    guard.path = None;
    // Make the rename itself durable; a failure here does not undo a completed write.
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}
