//! The planner page's shared pieces: the messages between the page and its
//! worker ([`protocol`]), the worker's loop ([`worker`]), reading trace
//! files in a worker of their own ([`reader`]), URL-hash settings
//! ([`settings`]), the bundled scenarios ([`scenarios`]) and the page itself ([`ui`]; what it draws: [`board`],
//! [`figures`], [`charts`]), and the docs embed that mounts the same
//! figures into a docs page ([`embed`]).

#[cfg(feature = "ui")]
pub mod board;
#[cfg(feature = "ui")]
pub mod charts;
#[cfg(feature = "ui")]
pub mod embed;
#[cfg(feature = "ui")]
pub mod figures;
#[cfg(feature = "ui")]
pub mod present;
pub mod protocol;
pub mod reader;
pub mod scenarios;
pub mod settings;
#[cfg(feature = "ui")]
pub mod ui;
pub mod worker;
