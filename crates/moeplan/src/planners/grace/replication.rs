//! Skew-driven replication (GRACE-MoE §4.2, Eq. 2). Stub: being written.
