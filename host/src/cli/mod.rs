//! Command-line subcommands.
pub mod plugin;
