//! `gpu-parquet check DIR`: what this machine and directory can do, path by path, and why.
//!
//! Never panics and never fails: every probe that cannot run records its reason, and the report ends
//! with one verdict per I/O path (nvfs, cufile-compat, staged, host).

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::error::{Error, Location, Result};
use crate::gpu::cufile::{self as cf, CufileDriver, CufileParams, DriverProps, FileHandle};
use crate::gpu::{GpuContext, GpuInfo};
use crate::io::IoPath;

/// The GPU and driver as probed.
#[derive(Debug, Clone, Serialize)]
pub struct GpuCheck {
    /// The GPU, when one could be used.
    pub info: Option<GpuInfo>,
    /// Why not, otherwise.
    pub error: Option<String>,
}

/// cuFile as probed.
#[derive(Debug, Clone, Serialize)]
pub struct CufileCheck {
    /// libcufile loads.
    pub present: bool,
    /// `cuFileGetVersion` (`major.minor`).
    pub version: Option<String>,
    /// Driver properties after `cuFileDriverOpen`.
    pub props: Option<DriverProps>,
    /// Parameters in effect, read back from cuFile.
    pub params: Option<CufileParams>,
    /// Level-3 statistics could be enabled.
    pub stats_enabled: bool,
    /// Why something above is missing.
    pub error: Option<String>,
}

/// What the cuFile configuration file says.
#[derive(Debug, Clone, Default, Serialize)]
pub struct CufileConfig {
    /// The file read (`CUFILE_ENV_PATH_JSON` or `/etc/cufile.json`, as [`crate::config::Settings`] found).
    pub path: PathBuf,
    /// `properties.allow_compat_mode`.
    pub allow_compat_mode: Option<bool>,
    /// `execution.*` settings.
    pub execution: BTreeMap<String, serde_json::Value>,
    /// Why it could not be read or parsed.
    pub error: Option<String>,
}

/// The result of one trial.
#[derive(Debug, Clone, Serialize)]
pub struct Trial {
    /// It worked.
    pub ok: bool,
    /// What happened.
    pub detail: String,
}

/// One line per I/O path.
#[derive(Debug, Clone, Serialize)]
pub struct Verdict {
    /// The path.
    pub path: IoPath,
    /// Whether reads can take it here.
    pub usable: bool,
    /// Why (not).
    pub reason: String,
}

/// Everything `check` found.
#[derive(Debug, Clone, Serialize)]
pub struct CheckReport {
    /// The directory tested.
    pub dir: PathBuf,
    /// GPU and CUDA driver.
    pub gpu: GpuCheck,
    /// cuFile library and driver.
    pub cufile: CufileCheck,
    /// nvidia-fs kernel module listed in /proc/modules or /sys/module.
    pub nvidia_fs_module: bool,
    /// cuFile configuration file.
    pub config: CufileConfig,
    /// Trial `cuFileHandleRegister` of a file in the directory.
    pub registration: Trial,
    /// Trial `O_DIRECT` write and read of 4 KiB in the directory.
    pub o_direct: Trial,
    /// One verdict per path.
    pub verdicts: Vec<Verdict>,
}

/// Parses cufile.json text. NVIDIA's file has `//` comments (and may have trailing commas), which
/// plain JSON forbids; JSON5 allows both.
pub(crate) fn parse_cufile_config(path: &Path, text: &str) -> CufileConfig {
    let mut cfg = CufileConfig {
        path: path.to_path_buf(),
        ..CufileConfig::default()
    };
    match json5::from_str::<serde_json::Value>(text) {
        Err(e) => cfg.error = Some(format!("cannot parse {}: {e}", path.display())),
        Ok(v) => {
            cfg.allow_compat_mode = v.pointer("/properties/allow_compat_mode").and_then(|x| x.as_bool());
            if let Some(ex) = v.get("execution").and_then(|x| x.as_object()) {
                cfg.execution = ex.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
            }
        }
    }
    cfg
}

fn read_config(path: &Path) -> CufileConfig {
    match std::fs::read_to_string(path) {
        Ok(t) => parse_cufile_config(path, &t),
        Err(e) => CufileConfig {
            path: path.to_path_buf(),
            error: Some(format!("cannot read {}: {e}", path.display())),
            ..CufileConfig::default()
        },
    }
}

fn nvidia_fs_module() -> bool {
    Path::new("/sys/module/nvidia_fs").exists()
        || std::fs::read_to_string("/proc/modules")
            .map(|m| m.lines().any(|l| l.starts_with("nvidia_fs ")))
            .unwrap_or(false)
}

fn scratch_name(dir: &Path, what: &str) -> PathBuf {
    dir.join(format!(".gpu-parquet-check-{what}-{}", std::process::id()))
}

/// Writes and reads back 4 KiB with `O_DIRECT` in `dir`.
pub fn try_o_direct(dir: &Path) -> Trial {
    use std::os::unix::fs::OpenOptionsExt;
    let path = scratch_name(dir, "odirect");
    let layout = match std::alloc::Layout::from_size_align(4096, 4096) {
        Ok(l) => l,
        Err(e) => {
            return Trial {
                ok: false,
                detail: e.to_string(),
            };
        }
    };
    // An aligned buffer: O_DIRECT needs the memory, offset and length aligned.
    // SAFETY: the layout has a non-zero size; the pointer is checked for null before use.
    let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
    if ptr.is_null() {
        return Trial {
            ok: false,
            detail: "cannot allocate an aligned buffer".into(),
        };
    }
    // SAFETY: ptr points to 4096 zeroed bytes owned here until the dealloc below, after the last use.
    let buf = unsafe { std::slice::from_raw_parts_mut(ptr, 4096) };
    for (i, b) in buf.iter_mut().enumerate() {
        *b = (i % 251) as u8;
    }
    let result = (|| -> std::io::Result<()> {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .custom_flags(libc::O_DIRECT)
            .open(&path)?;
        f.write_all(buf)?;
        drop(f);
        buf.fill(0);
        let mut f = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECT)
            .open(&path)?;
        f.read_exact(buf)?;
        if buf.iter().enumerate().any(|(i, &b)| b != (i % 251) as u8) {
            return Err(std::io::Error::other("data read back differs"));
        }
        Ok(())
    })();
    // SAFETY: ptr came from alloc_zeroed with this layout; `buf` is not used after this.
    unsafe { std::alloc::dealloc(ptr, layout) };
    let _ = std::fs::remove_file(&path);
    match result {
        Ok(()) => Trial {
            ok: true,
            detail: format!("O_DIRECT write and read of 4 KiB in {} work", dir.display()),
        },
        Err(e) => Trial {
            ok: false,
            detail: format!("O_DIRECT refused in {}: {e}", dir.display()),
        },
    }
}

/// Probes GPU `device`, cuFile (with its configuration file `cufile_config`) and `dir`; never panics.
/// Fails only when `dir` is not a directory.
pub fn check(dir: &Path, device: usize, cufile_config: &Path) -> Result<CheckReport> {
    match std::fs::metadata(dir) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => {
            return Err(Error::InvalidRequest {
                location: Location::file(dir),
                message: "not a directory (check tries registration and O_DIRECT in a directory)".into(),
            });
        }
        Err(e) => return Err(Error::io(Location::file(dir), "cannot use the directory", e)),
    }
    let ctx = GpuContext::new(device);
    let gpu = match ctx
        .as_ref()
        .map_err(|e| e.to_string())
        .and_then(|c| c.info().map_err(|e| e.to_string()))
    {
        Ok(info) => GpuCheck {
            info: Some(info),
            error: None,
        },
        Err(e) => GpuCheck {
            info: None,
            error: Some(e),
        },
    };
    let config = read_config(cufile_config);
    let o_direct = try_o_direct(dir);
    let mut cufile = CufileCheck {
        present: cf::present().is_ok(),
        version: None,
        props: None,
        params: None,
        stats_enabled: false,
        error: cf::present().err(),
    };
    let mut registration = Trial {
        ok: false,
        detail: "not tried".into(),
    };
    if cufile.present {
        match cf::version() {
            Ok(v) => cufile.version = Some(v),
            Err(e) => cufile.error = Some(e.to_string()),
        }
    }
    match (&ctx, cufile.present) {
        (Err(e), _) => registration.detail = format!("not tried: no GPU ({e})"),
        (Ok(_), false) => registration.detail = "not tried: libcufile absent".into(),
        (Ok(ctx), true) => match CufileDriver::open(ctx, &CufileParams::default()) {
            Err(e) => {
                cufile.error = Some(e.to_string());
                registration.detail = format!("not tried: {e}");
            }
            Ok(drv) => {
                cufile.props = Some(drv.props);
                cufile.stats_enabled = drv.stats_enabled;
                cufile.params = CufileParams::current().ok();
                registration = try_register(dir, ctx, &drv);
            }
        },
    }
    let nvidia_fs = nvidia_fs_module();
    let verdicts = verdicts(&gpu, &cufile, nvidia_fs, &config, &registration);
    Ok(CheckReport {
        dir: dir.to_path_buf(),
        gpu,
        cufile,
        nvidia_fs_module: nvidia_fs,
        config,
        registration,
        o_direct,
        verdicts,
    })
}

fn try_register(dir: &Path, ctx: &std::sync::Arc<GpuContext>, drv: &std::sync::Arc<CufileDriver>) -> Trial {
    let path = scratch_name(dir, "register");
    let r = (|| -> std::result::Result<String, String> {
        std::fs::write(&path, vec![7u8; 4096]).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        // O_DIRECT where the file system allows it, as GDS wants; else a buffered file.
        let (file, direct) = match crate::io::pread::open_direct(&path) {
            Ok(f) => (f, true),
            Err(_) => (std::fs::File::open(&path).map_err(|e| e.to_string())?, false),
        };
        ctx.bind().map_err(|e| e.to_string())?;
        let h = FileHandle::register(drv, file, direct).map_err(|e| e.to_string())?;
        drop(h);
        Ok(format!(
            "cuFileHandleRegister accepted a file in {} ({} fd)",
            dir.display(),
            if direct { "O_DIRECT" } else { "buffered" }
        ))
    })();
    let _ = std::fs::remove_file(&path);
    match r {
        Ok(detail) => Trial { ok: true, detail },
        Err(detail) => Trial { ok: false, detail },
    }
}

fn verdicts(gpu: &GpuCheck, cufile: &CufileCheck, nvidia_fs: bool, config: &CufileConfig, reg: &Trial) -> Vec<Verdict> {
    let no_gpu = gpu.error.clone();
    let nvfs_props = cufile.props.map(|p| p.nvfs_loaded());
    let v = |path, usable, reason: String| Verdict { path, usable, reason };
    let nvfs = if let Some(r) = &no_gpu {
        v(IoPath::Nvfs, false, format!("no GPU: {r}"))
    } else if !cufile.present {
        v(IoPath::Nvfs, false, "libcufile absent".into())
    } else if nvfs_props != Some(true) {
        v(
            IoPath::Nvfs,
            false,
            format!(
                "nvidia-fs not loaded (nvfs version {}; module {}listed)",
                cufile
                    .props
                    .map(|p| format!("{}.{}", p.nvfs_major, p.nvfs_minor))
                    .unwrap_or_else(|| "unknown".into()),
                if nvidia_fs { "" } else { "not " }
            ),
        )
    } else if !reg.ok {
        v(IoPath::Nvfs, false, format!("registration refused: {}", reg.detail))
    } else {
        v(IoPath::Nvfs, true, "nvidia-fs loaded and registration works".into())
    };
    let compat = if let Some(r) = &no_gpu {
        v(IoPath::CufileCompat, false, format!("no GPU: {r}"))
    } else if !cufile.present {
        v(
            IoPath::CufileCompat,
            false,
            cufile.error.clone().unwrap_or_else(|| "libcufile absent".into()),
        )
    } else if !reg.ok {
        v(
            IoPath::CufileCompat,
            false,
            format!("registration refused: {}", reg.detail),
        )
    } else if config.allow_compat_mode == Some(false) && nvfs_props != Some(true) {
        v(
            IoPath::CufileCompat,
            false,
            "allow_compat_mode is false and nvidia-fs is not loaded".into(),
        )
    } else {
        v(
            IoPath::CufileCompat,
            true,
            if nvfs_props == Some(true) {
                "registration works; cuFile falls back to POSIX for reads nvidia-fs cannot do".into()
            } else {
                "registration works; without nvidia-fs every cuFile read goes through its POSIX compat mode".into()
            },
        )
    };
    let staged = match &no_gpu {
        Some(r) => v(IoPath::Staged, false, format!("no GPU: {r}")),
        None => v(
            IoPath::Staged,
            true,
            "CUDA driver and GPU present: pinned buffers and async copies".into(),
        ),
    };
    let host = v(
        IoPath::Host,
        true,
        "positional reads into host memory always work".into(),
    );
    vec![nvfs, compat, staged, host]
}

impl CheckReport {
    /// A human-readable table.
    pub fn to_table(&self) -> String {
        let mut s = String::new();
        let yn = |b: bool| if b { "yes" } else { "no" };
        s.push_str(&format!("directory        {}\n", self.dir.display()));
        match (&self.gpu.info, &self.gpu.error) {
            (Some(i), _) => s.push_str(&format!(
                "GPU              {} (GPU {} of {}), CUDA driver {}, compute {}, {} MiB ({} MiB free)\n",
                i.name,
                i.ordinal,
                i.device_count,
                i.driver_version,
                i.compute_capability,
                i.total_memory >> 20,
                i.free_memory >> 20
            )),
            (None, e) => s.push_str(&format!(
                "GPU              none: {}\n",
                e.as_deref().unwrap_or("unknown")
            )),
        }
        s.push_str(&format!(
            "libcufile        {}{}\n",
            if self.cufile.present { "present" } else { "absent" },
            self.cufile
                .version
                .as_ref()
                .map(|v| format!(", version {v}"))
                .unwrap_or_default()
        ));
        if let Some(p) = &self.cufile.props {
            s.push_str(&format!("nvfs version     {}.{}\n", p.nvfs_major, p.nvfs_minor));
        }
        s.push_str(&format!("nvidia-fs module {}\n", yn(self.nvidia_fs_module)));
        if let Some(e) = &self.cufile.error {
            s.push_str(&format!("cuFile problem   {e}\n"));
        }
        s.push_str(&format!("cufile.json      {}", self.config.path.display()));
        match &self.config.error {
            Some(e) => s.push_str(&format!(": {e}\n")),
            None => {
                s.push_str(&format!(
                    ": allow_compat_mode {}",
                    self.config
                        .allow_compat_mode
                        .map(|b| b.to_string())
                        .unwrap_or_else(|| "unset".into())
                ));
                for (k, v) in &self.config.execution {
                    s.push_str(&format!(", {k} {v}"));
                }
                s.push('\n');
            }
        }
        s.push_str(&format!(
            "registration     {}: {}\n",
            yn(self.registration.ok),
            self.registration.detail
        ));
        s.push_str(&format!(
            "O_DIRECT         {}: {}\n",
            yn(self.o_direct.ok),
            self.o_direct.detail
        ));
        s.push_str("\npath           usable  reason\n");
        for v in &self.verdicts {
            s.push_str(&format!("{:<14} {:<7} {}\n", v.path.name(), yn(v.usable), v.reason));
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = r#"{
        // comment with "quotes" and a url http://x
        "logging": { "dir": "/var/log", /* block */ "level": "ERROR" },
        "execution": {
            "parallel_io": true,
            "max_io_threads": 4,
            "min_io_threshold_size_kb": 8192, // trailing comment
        },
        "properties": { "allow_compat_mode": true, "path": "a//b" }
    }"#;

    #[test]
    fn cufile_json_with_comments_parses() {
        let cfg = parse_cufile_config(Path::new("x.json"), SAMPLE);
        assert_eq!(cfg.error, None);
        assert_eq!(cfg.allow_compat_mode, Some(true));
        assert_eq!(cfg.execution.get("max_io_threads"), Some(&serde_json::json!(4)));
        assert_eq!(cfg.execution.get("parallel_io"), Some(&serde_json::json!(true)));
        assert_eq!(cfg.execution.len(), 3);
        // "//" inside a string is data, not a comment.
        let v: serde_json::Value = json5::from_str(SAMPLE).expect("sample parses");
        assert_eq!(v.pointer("/properties/path"), Some(&serde_json::json!("a//b")));
    }

    #[test]
    fn bad_cufile_json_is_reported() {
        let cfg = parse_cufile_config(Path::new("x.json"), "{ \"execution\": ");
        assert!(cfg.error.as_deref().unwrap_or("").contains("x.json"));
        assert_eq!(cfg.allow_compat_mode, None);
    }

    #[test]
    fn check_gives_four_verdicts_without_panicking() {
        let dir = tempfile::tempdir().unwrap();
        let r = check(dir.path(), 0, Path::new("/etc/cufile.json")).unwrap();
        let paths: Vec<IoPath> = r.verdicts.iter().map(|v| v.path).collect();
        assert_eq!(paths, IoPath::ALL.to_vec());
        assert!(r.verdicts[3].usable);
        if let Err(reason) = crate::gpu::cuda_present() {
            assert!(r.gpu.info.is_none());
            for v in &r.verdicts[..3] {
                assert!(!v.usable);
                assert!(
                    v.reason.contains("no GPU") && v.reason.contains(&reason),
                    "{}",
                    v.reason
                );
            }
        }
        let table = r.to_table();
        assert!(table.contains("cufile-compat"), "{table}");
        serde_json::to_string(&r).unwrap();
        // No scratch files left behind.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn check_of_a_missing_or_non_directory_path_is_an_error() {
        let e = check(Path::new("/nonexistent-gpu-parquet"), 0, Path::new("/etc/cufile.json")).unwrap_err();
        assert!(e.to_string().contains("/nonexistent-gpu-parquet"), "{e}");
        let f = tempfile::NamedTempFile::new().unwrap();
        let e = check(f.path(), 0, Path::new("/etc/cufile.json")).unwrap_err();
        assert!(e.to_string().contains("not a directory"), "{e}");
    }
}
