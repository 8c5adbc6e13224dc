//! The `engine` command; see [`engine_cli`].
#![forbid(unsafe_code)]

use std::process::ExitCode;

use clap::Parser;

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let cli = engine_cli::Cli::parse();
    match cli.run().await {
        Ok(report) => {
            print!("{report}");
            ExitCode::SUCCESS
        }
        Err(err) => {
            // A refused `check --against` still prints its report, so CI shows what widened.
            if let Some(report) = err.report() {
                print!("{report}");
            }
            eprintln!("engine: {}", err.chain());
            ExitCode::FAILURE
        }
    }
}
