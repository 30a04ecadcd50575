//! The `servesim` binary: a thin shell around [`servesim::cli`].

fn main() {
    std::process::exit(servesim::cli::main());
}
