//! Staged backend: pread into pinned buffers, async copies to the GPU (to be written).
