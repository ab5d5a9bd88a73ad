//! The `trellis` command line. All terminal output lives here, never in the library.

mod cli;

fn main() -> std::process::ExitCode {
    cli::main()
}
