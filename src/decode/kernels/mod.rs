//! The CUDA C++ sources of the GPU decoder, compiled at run time by NVRTC ([`crate::gpu::nvrtc`]).
//!
//! The files are concatenated in [`SOURCES`] order into one program ([`source`]): `common.cuh` first
//! (descriptor structs twinned with [`crate::decode::layout`], error codes, bounds-checked readers),
//! then one file per family of kernels. Each kernel has a host reference in
//! [`crate::decode::reference`] computing the same result.

/// The files of the program, in order: (name, text).
pub const SOURCES: &[(&str, &str)] = &[
    ("common.cuh", include_str!("common.cuh")),
    ("core_util.cuh", include_str!("core_util.cuh")),
    ("levels.cu", include_str!("levels.cu")),
    ("values.cu", include_str!("values.cu")),
    ("strings.cu", include_str!("strings.cu")),
];

#[cfg(test)]
pub(crate) mod emu;

/// Name of the program, in NVRTC messages and cache file names.
pub const PROGRAM_NAME: &str = "gpu_parquet_decode";

/// The whole program: every file of [`SOURCES`], each after a `#line` directive naming it, so NVRTC's
/// messages point at the file and line.
pub fn source() -> String {
    let mut s = String::new();
    for (name, text) in SOURCES {
        s.push_str(&format!("#line 1 \"{name}\"\n"));
        s.push_str(text);
        s.push('\n');
    }
    s
}

#[cfg(test)]
mod tests {
    use crate::gpu::nvrtc;

    /// The whole program compiles for Hopper where NVRTC is present (no GPU needed); says why it skips
    /// otherwise.
    #[test]
    fn kernels_compile() {
        if let Err(why) = nvrtc::nvrtc_present() {
            println!("skipped: {why}");
            return;
        }
        let c = nvrtc::compile(&super::source(), super::PROGRAM_NAME, 90).unwrap_or_else(|e| panic!("{e}"));
        assert!(c.cubin.len() > 1000);
        assert!(!c.log.contains("warning"), "NVRTC warnings:\n{}", c.log);
    }
}
