//! The planner page's shared pieces: the messages between the page and its
//! worker ([`protocol`]), the worker's loop ([`worker`]), URL-hash settings
//! ([`settings`]) and the page itself ([`ui`]; what it draws: [`board`],
//! [`figures`], [`charts`]).

pub mod board;
pub mod charts;
pub mod figures;
pub mod protocol;
pub mod settings;
pub mod ui;
pub mod worker;
