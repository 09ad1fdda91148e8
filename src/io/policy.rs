//! Backend selection policy (compat mode on/off/auto, thresholds) (to be written).
