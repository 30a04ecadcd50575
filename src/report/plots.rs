//! Figures (being written).
