//! Command-line subcommands.
pub mod ask;
pub mod get;
pub mod plan;
pub mod plugin;
pub mod scaffold;
pub mod ui;
