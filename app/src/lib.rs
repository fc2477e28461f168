//! The planner page's shared pieces: the messages between the page and its
//! worker ([`protocol`]), the worker's loop ([`worker`]), reading trace
//! files in a worker of their own ([`reader`]), URL-hash settings
//! ([`settings`]) and the page itself ([`ui`]; what it draws: [`board`],
//! [`figures`], [`charts`]), and the docs embed that mounts the same
//! figures into a docs page ([`embed`]).

pub mod board;
pub mod charts;
pub mod embed;
pub mod figures;
pub mod present;
pub mod protocol;
pub mod reader;
pub mod settings;
pub mod ui;
pub mod worker;
