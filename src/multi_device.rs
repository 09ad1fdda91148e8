//! Several GPUs of one machine: a dataset's row groups shared out across GPUs, each GPU reading and
//! decoding its share with its own context, backend and decoder, all GPUs at once.
//!
//! [`spread_row_groups`] (pure) cuts the dataset's row groups, in dataset order, into one contiguous
//! run per GPU of about equal uncompressed bytes, so each GPU reads whole consecutive stretches of
//! its files. [`Dataset::read_devices`] reads every share on its GPU at the same time and keeps the
//! results per GPU (device tables stay where they were decoded); [`MultiDeviceRead::to_host`]
//! gathers them on the host in dataset order.
//!
//! Counters: each GPU's bytes and reads by path come from its own reads' logs, so they are exact per
//! GPU. cuFile's statistics are per process (libcufile keeps them per GPU but its readers' counts
//! are taken around each read, and reads on the other GPUs run meanwhile): they are read once before
//! and once after the whole multi-GPU read and checked against the sum over all GPUs.

use std::time::{Duration, Instant};

use arrow::record_batch::RecordBatch;
use serde::Serialize;

use crate::dataset::{Dataset, with_partitions};
use crate::device_read::DeviceRead;
use crate::error::{Error, Location, Result};
use crate::gpu::GpuContext;
use crate::gpu::cufile::CufileDriver;
use crate::reader::{Reader, ReaderBuilder};
use crate::report::{PathCounts, StatsCheck};
use crate::shares::share_of_middle;

/// A stretch of one file's row groups given to one GPU.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Part {
    /// Index into [`Dataset::files`].
    pub file: usize,
    /// Consecutive row groups of that file.
    pub row_groups: Vec<usize>,
    /// Their uncompressed bytes.
    pub bytes: u64,
}

/// Cuts the row groups of files whose row groups have the given uncompressed sizes (`sizes[file][rg]`)
/// into `devices` contiguous shares, in dataset order, of about equal bytes: a row group goes to the
/// share its middle byte falls in. Shares may be empty (fewer row groups than GPUs); none is split
/// inside a row group, so the largest one bounds the imbalance.
pub(crate) fn spread_row_groups(sizes: &[Vec<u64>], devices: usize) -> Vec<Vec<Part>> {
    let devices = devices.max(1);
    let total: u128 = sizes.iter().flatten().map(|&b| b as u128).sum();
    let mut shares: Vec<Vec<Part>> = vec![Vec::new(); devices];
    let count: usize = sizes.iter().map(Vec::len).sum();
    let mut before = 0u128;
    let mut index = 0usize;
    for (file, groups) in sizes.iter().enumerate() {
        for (rg, &bytes) in groups.iter().enumerate() {
            // Without bytes at all (empty row groups only), share by count instead.
            let k = share_of_middle(before, bytes, total, devices)
                .unwrap_or((index * devices / count.max(1)).min(devices - 1));
            before += bytes as u128;
            index += 1;
            let share = &mut shares[k];
            match share.last_mut() {
                Some(p) if p.file == file => {
                    p.row_groups.push(rg);
                    p.bytes += bytes;
                }
                _ => share.push(Part {
                    file,
                    row_groups: vec![rg],
                    bytes,
                }),
            }
        }
    }
    shares
}

/// One part as read and decoded on its GPU.
#[derive(Debug)]
pub struct PartRead {
    /// Which file and row groups.
    pub part: Part,
    /// The device table (the rows the reader's filter accepts, or a mask or a filter left to the
    /// host: [`DeviceRead::to_host`]) and the reports of its read.
    pub read: DeviceRead,
}

/// One GPU's share of a multi-GPU read.
#[derive(Debug)]
pub struct DeviceShareRead {
    /// The GPU's ordinal.
    pub device: usize,
    /// Its parts in dataset order.
    pub parts: Vec<PartRead>,
    /// Bytes and reads by path over all its parts (from its own reads' logs).
    pub counts: PathCounts,
    /// From the start of the multi-GPU read until this GPU's last part was decoded.
    pub wall: Duration,
}

impl DeviceShareRead {
    /// Rows decoded on this GPU.
    pub fn num_rows(&self) -> usize {
        self.parts.iter().map(|p| p.read.table.num_rows()).sum()
    }

    /// Uncompressed bytes of the column chunks it decoded (the selected columns of its row groups;
    /// the parts' `bytes`, all columns, are what the shares were balanced by).
    pub(crate) fn bytes(&self) -> u64 {
        self.parts.iter().map(|p| p.read.decode.uncompressed_bytes).sum()
    }
}

/// The result of [`Dataset::read_devices`]: the tables stay on the GPU that decoded them.
#[derive(Debug)]
pub struct MultiDeviceRead {
    /// Per GPU, in the order the GPUs were given; contiguous shares, so GPU by GPU then part by part
    /// is dataset order.
    pub devices: Vec<DeviceShareRead>,
    /// From the first read's start until every GPU was done.
    pub wall: Duration,
    /// cuFile's statistics over the whole read checked against the sum of every GPU's cuFile
    /// counters (`None` when no read went through cuFile).
    pub cufile_stats_check: Option<StatsCheck>,
}

/// How the multi-GPU counters are attributed (for reports).
pub(crate) const ATTRIBUTION: &str = "per GPU: bytes and reads by path from that GPU's own reads; cuFile's \
statistics are per process, so they are compared once, over the whole read, with the sum over GPUs";

/// One GPU's line of a [`MultiDeviceSummary`].
#[derive(Debug, Clone, Serialize)]
pub struct DeviceShareSummary {
    /// The GPU's ordinal.
    pub device: usize,
    /// Its row groups, file by file.
    pub parts: Vec<Part>,
    /// Rows it decoded.
    pub rows: usize,
    /// Their uncompressed bytes.
    pub bytes: u64,
    /// From the start of the read until its last part was decoded.
    pub seconds: f64,
    /// Bytes and reads by path.
    pub counts: PathCounts,
}

/// What a [`MultiDeviceRead`] did, for reports (`gpu-parquet dataset`, `examples/multi_gpu`).
#[derive(Debug, Clone, Serialize)]
pub struct MultiDeviceSummary {
    /// Rows over all GPUs.
    pub rows: usize,
    /// Uncompressed bytes over all GPUs.
    pub bytes: u64,
    /// From the first read's start until every GPU was done.
    pub seconds: f64,
    /// Per GPU, in the order they were given.
    pub devices: Vec<DeviceShareSummary>,
    /// cuFile's statistics checked against the GPUs' counters, when cuFile read.
    pub cufile_stats_check: Option<StatsCheck>,
    /// How the counters are attributed ([`ATTRIBUTION`]).
    pub attribution: &'static str,
}

impl MultiDeviceSummary {
    /// One line per GPU (row groups, rows, bytes, when it was done, where its bytes went), then
    /// cuFile's check and how the counters are attributed.
    pub fn to_table(&self) -> String {
        let mut out = format!(
            "{:<5} {:>10} {:>9} {:>9}  row groups / where the bytes went\n",
            "GPU", "rows", "GB", "done ms"
        );
        for d in &self.devices {
            let groups: Vec<String> = d
                .parts
                .iter()
                .map(|p| match p.row_groups.as_slice() {
                    [first, .., last] => format!("file {} rg {first}..={last}", p.file),
                    [only] => format!("file {} rg {only}", p.file),
                    [] => format!("file {} no row group", p.file),
                })
                .collect();
            let paths: Vec<String> = crate::io::IoPath::ALL
                .iter()
                .filter(|p| d.counts.bytes[p.index()] > 0)
                .map(|p| {
                    format!(
                        "{:.1} MB {}, {} reads",
                        d.counts.bytes[p.index()] as f64 / 1e6,
                        p.name(),
                        d.counts.reads[p.index()]
                    )
                })
                .collect();
            out.push_str(&format!(
                "{:<5} {:>10} {:>9.2} {:>9.1}  {} / {}\n",
                d.device,
                d.rows,
                d.bytes as f64 / 1e9,
                d.seconds * 1e3,
                groups.join(", "),
                paths.join("; ")
            ));
        }
        if let Some(check) = &self.cufile_stats_check {
            out.push_str(&format!(
                "cuFile's statistics {} the GPUs' counters: {}\n",
                if check.agree { "agree with" } else { "DISAGREE with" },
                check.details.join("; ")
            ));
        }
        out.push_str(&format!("counters: {}\n", self.attribution));
        out
    }
}

impl MultiDeviceRead {
    /// What the read did, per GPU and in all.
    pub fn summary(&self) -> MultiDeviceSummary {
        MultiDeviceSummary {
            rows: self.num_rows(),
            bytes: self.bytes(),
            seconds: self.wall.as_secs_f64(),
            devices: self
                .devices
                .iter()
                .map(|d| DeviceShareSummary {
                    device: d.device,
                    parts: d.parts.iter().map(|p| p.part.clone()).collect(),
                    rows: d.num_rows(),
                    bytes: d.bytes(),
                    seconds: d.wall.as_secs_f64(),
                    counts: d.counts,
                })
                .collect(),
            cufile_stats_check: self.cufile_stats_check.clone(),
            attribution: ATTRIBUTION,
        }
    }

    /// Rows over all GPUs.
    pub fn num_rows(&self) -> usize {
        self.devices.iter().map(DeviceShareRead::num_rows).sum()
    }

    /// Uncompressed bytes over all GPUs.
    pub(crate) fn bytes(&self) -> u64 {
        self.devices.iter().map(DeviceShareRead::bytes).sum()
    }

    /// Bytes and reads by path over all GPUs.
    pub fn counts(&self) -> PathCounts {
        let mut total = PathCounts::default();
        for d in &self.devices {
            total.add_all(&d.counts);
        }
        total
    }

    /// Every GPU's batches copied to the host and gathered in dataset order, with the dataset's
    /// partition columns appended (as [`Dataset::batches`] gives them), only the rows the dataset's
    /// filter accepts.
    pub fn to_host(&self, dataset: &Dataset) -> Result<Vec<RecordBatch>> {
        let mut out = Vec::new();
        for d in &self.devices {
            for p in &d.parts {
                let f = &dataset.files()[p.part.file];
                for (k, b) in p.read.table.batches.iter().enumerate() {
                    let b = crate::scan::step::accepted_rows(b.to_host()?, p.read.masks.get(k), &p.read.host_filter)?;
                    out.push(with_partitions(
                        b,
                        dataset.partition_fields(),
                        &f.partition_values,
                        &f.path,
                    )?);
                }
            }
        }
        Ok(out)
    }
}

impl Dataset {
    /// Reads the dataset on the GPUs `devices` at once, each decoding its share of the row groups
    /// ([`spread_row_groups`]) into device columns on its own context: each (file, row groups, GPU)
    /// part is a [`Reader`] of those row groups, read by the scan ([`Reader::read_device`]), a GPU's
    /// parts one after another. Each part's [`Reader`] is built by `configure` from the file's open
    /// source (columns, backend, settings; the device is set here), and the readers of one GPU
    /// share one backend. The same ordinal given twice means two shares on that GPU. Every reader is
    /// built (files opened, plans made, backends started) before the first read, so a bad file or a
    /// missing GPU fails the whole read before it starts; the first read error fails it too.
    pub fn read_devices(
        &self,
        devices: &[usize],
        configure: impl Fn(ReaderBuilder) -> ReaderBuilder + Sync,
    ) -> Result<MultiDeviceRead> {
        if devices.is_empty() {
            return Err(Error::InvalidRequest {
                location: Location::file(&self.files()[0].path),
                message: "a multi-GPU read needs at least one GPU".into(),
            });
        }
        let visible = GpuContext::device_count();
        if let Some(&d) = devices.iter().find(|&&d| d >= visible) {
            return Err(Error::Unavailable {
                backend: "multi-GPU read".into(),
                reason: format!(
                    "GPU {d} was asked for, and this machine shows {visible} (CUDA devices are numbered from 0)"
                ),
            });
        }
        let shares = spread_row_groups(self.row_group_bytes(), devices.len());
        let mut readers: Vec<Vec<(Part, Reader)>> = Vec::with_capacity(devices.len());
        for (&device, share) in devices.iter().zip(shares) {
            let mut built: Vec<(Part, Reader)> = Vec::with_capacity(share.len());
            for part in share {
                // From the dataset's open source: each footer is read once.
                let mut b = configure(self.reader_builder(part.file))
                    .with_device(device)
                    .with_row_groups(part.row_groups.iter().copied());
                if let Some((_, first)) = built.first() {
                    b = b.with_io(first.io().clone());
                }
                built.push((part, b.build()?));
            }
            readers.push(built);
        }
        let cufile_before = CufileDriver::current().and_then(|d| d.stats().ok().map(|s| (d, s)));

        let started = Instant::now();
        let results: Vec<Result<DeviceShareRead>> = std::thread::scope(|scope| {
            let handles: Vec<_> = devices
                .iter()
                .zip(readers)
                .map(|(&device, built)| {
                    scope.spawn(move || -> Result<DeviceShareRead> {
                        let mut parts = Vec::with_capacity(built.len());
                        let mut counts = PathCounts::default();
                        for (part, reader) in built {
                            let read = reader.read_device()?;
                            counts.add_all(&read.io.total);
                            parts.push(PartRead { part, read });
                        }
                        Ok(DeviceShareRead {
                            device,
                            parts,
                            counts,
                            wall: started.elapsed(),
                        })
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| Err(Error::device("multi-GPU read", "a GPU's reading thread panicked")))
                })
                .collect()
        });
        let wall = started.elapsed();
        let devices: Vec<DeviceShareRead> = results.into_iter().collect::<Result<_>>()?;
        let mut read = MultiDeviceRead {
            devices,
            wall,
            cufile_stats_check: None,
        };
        let counts = read.counts();
        let through_cufile =
            counts.bytes[crate::io::IoPath::Nvfs.index()] + counts.bytes[crate::io::IoPath::CufileCompat.index()];
        if through_cufile > 0 {
            // The driver a reader opened lives as long as its handles; read the statistics while it does.
            let after = CufileDriver::current().and_then(|d| d.stats().ok());
            read.cufile_stats_check = match (cufile_before, after) {
                (Some((_, before)), Some(after)) => Some(StatsCheck::new(&counts, &after.since(&before))),
                _ => Some(StatsCheck {
                    agree: false,
                    details: vec!["cuFile's statistics could not be read around the whole read".into()],
                }),
            };
        }
        Ok(read)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_summary_table_has_a_line_per_gpu_with_its_row_groups_and_paths() {
        let mut counts = PathCounts::default();
        counts.bytes[crate::io::IoPath::Staged.index()] = 2_500_000;
        counts.reads[crate::io::IoPath::Staged.index()] = 3;
        let share = |device, parts: Vec<Part>| DeviceShareSummary {
            device,
            rows: 100,
            bytes: parts.iter().map(|p| p.bytes).sum(),
            parts,
            seconds: 0.012,
            counts,
        };
        let s = MultiDeviceSummary {
            rows: 200,
            bytes: 30,
            seconds: 0.02,
            devices: vec![
                share(
                    0,
                    vec![Part {
                        file: 0,
                        row_groups: vec![0, 1, 2],
                        bytes: 10,
                    }],
                ),
                share(
                    1,
                    vec![
                        Part {
                            file: 0,
                            row_groups: vec![3],
                            bytes: 10,
                        },
                        Part {
                            file: 1,
                            row_groups: vec![0, 1],
                            bytes: 10,
                        },
                    ],
                ),
            ],
            cufile_stats_check: None,
            attribution: ATTRIBUTION,
        };
        let t = s.to_table();
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 4, "{t}");
        assert!(
            lines[1].starts_with('0') && lines[1].contains("file 0 rg 0..=2 / 2.5 MB staged, 3 reads"),
            "{t}"
        );
        assert!(
            lines[2].starts_with('1') && lines[2].contains("file 0 rg 3, file 1 rg 0..=1"),
            "{t}"
        );
        assert!(lines[3].starts_with("counters: per GPU"), "{t}");
    }

    fn flatten(shares: &[Vec<Part>]) -> Vec<(usize, usize)> {
        shares
            .iter()
            .flatten()
            .flat_map(|p| p.row_groups.iter().map(move |&rg| (p.file, rg)))
            .collect()
    }

    #[test]
    fn two_equal_files_go_one_to_each_gpu() {
        let shares = spread_row_groups(&[vec![10; 4], vec![10; 4]], 2);
        assert_eq!(
            shares[0],
            vec![Part {
                file: 0,
                row_groups: vec![0, 1, 2, 3],
                bytes: 40
            }]
        );
        assert_eq!(
            shares[1],
            vec![Part {
                file: 1,
                row_groups: vec![0, 1, 2, 3],
                bytes: 40
            }]
        );
    }

    #[test]
    fn a_file_may_be_split_between_gpus_and_one_gpu_may_get_nothing() {
        let shares = spread_row_groups(&[vec![10, 10, 10]], 2);
        assert_eq!(flatten(&shares), vec![(0, 0), (0, 1), (0, 2)]);
        // Middles at 5, 15 and 25 of 30 bytes: the second half starts at 15.
        assert_eq!(shares[0][0].row_groups, vec![0]);
        assert_eq!(shares[1][0].row_groups, vec![1, 2]);
        let shares = spread_row_groups(&[vec![5]], 3);
        assert_eq!(shares.iter().filter(|s| s.is_empty()).count(), 2);
    }

    proptest! {
        #[test]
        fn every_row_group_once_in_order_and_balanced(
            sizes in prop::collection::vec(prop::collection::vec(0u64..1000, 0..6), 1..5),
            devices in 1usize..5,
        ) {
            let shares = spread_row_groups(&sizes, devices);
            prop_assert_eq!(shares.len(), devices);
            let want: Vec<(usize, usize)> = sizes
                .iter()
                .enumerate()
                .flat_map(|(f, g)| (0..g.len()).map(move |rg| (f, rg)))
                .collect();
            prop_assert_eq!(flatten(&shares), want);
            let total: u64 = sizes.iter().flatten().sum();
            let largest = sizes.iter().flatten().copied().max().unwrap_or(0);
            for s in &shares {
                let bytes: u64 = s.iter().map(|p| p.bytes).sum();
                let want: u64 = s.iter().map(|p| p.row_groups.iter().map(|&rg| sizes[p.file][rg]).sum::<u64>()).sum();
                prop_assert_eq!(bytes, want);
                // No share exceeds an even share by more than one row group.
                prop_assert!(bytes <= total / devices as u64 + largest + 1, "{} of {}", bytes, total);
            }
        }
    }
}
