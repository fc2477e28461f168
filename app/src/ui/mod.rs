//! The page: controls on the left, figures on the right. All planning
//! happens in the worker (see `bin/worker.rs`); this module only sends
//! requests, hands each answer to the [`Board`](crate::board::Board) (what changed since the
//! last one), and times the round trip. What is drawn is in `figures.rs`
//! and `charts/`, each piece reading only its own part of the board.
//!
//! `client` is the worker client (requests, timings, restarts);
//! `page` the layout and controls.

mod client;
mod page;

pub(crate) use client::Ctx;
pub use page::App;
pub(crate) use page::{
    TRACE_FILES, budget_inputs, cluster_field, curve_figure, has_frame, heat_figure, is_error,
    layers_figure, load_chosen, placement_figure, replicas_figure, rule_select, status_line,
    summary_table, timeline_figure, traffic_panel,
};
