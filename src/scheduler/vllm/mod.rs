//! vLLM (V1 engine, 0.33): its settings section of `[engine]`, with vLLM's defaults. The
//! scheduler itself (`engine-semantics.md` §4.4) is not modelled yet: [`super::build`] refuses
//! to simulate vLLM, while `servesim check` and `servesim memory` work.

pub mod settings;
