//! Reports: pure functions from a run (and its analysis) to text, JSON, CSV and log bytes.
//! Only the CLI writes files.

pub mod doc;
pub mod explain;
pub mod handout;
pub mod memory;
pub mod plots;
pub mod requests;
pub mod server_log;
pub mod summary;
pub mod text;
pub mod timeseries;

pub use summary::{summarize, Summary};
