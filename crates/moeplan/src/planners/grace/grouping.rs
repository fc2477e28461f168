//! Controlled non-uniform grouping (GRACE-MoE Algorithm 2). Stub: being written.
