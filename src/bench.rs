//! Benchmarks every available path on one file (to be written).
