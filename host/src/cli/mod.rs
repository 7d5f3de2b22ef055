//! Command-line subcommands.
pub mod plugin;
pub mod scaffold;
