//! How the examples write numbers in their Markdown (included with
//! `#[path]`, as `common/mod.rs` is).

/// `3712` → `3,712`, as the docs write counts.
pub fn thousands(n: usize) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}
