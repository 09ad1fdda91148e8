//! cuFile backend (to be written).
