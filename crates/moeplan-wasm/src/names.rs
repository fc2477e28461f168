//! The registry's `snake_case` option names and JavaScript's `camelCase`
//! ones, shared by the library and `build.rs` (which writes the TypeScript
//! settings type), so both spell every option alike.

/// `replicasPerGpu` → `replicas_per_gpu` (the registry's names).
pub fn snake_case(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 4);
    for c in name.chars() {
        if c.is_ascii_uppercase() {
            out.push('_');
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// `replicas_per_gpu` → `replicasPerGpu`.
pub fn camel_case(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut up = false;
    for c in name.chars() {
        match c {
            '_' => up = true,
            c if up => {
                out.push(c.to_ascii_uppercase());
                up = false;
            }
            c => out.push(c),
        }
    }
    out
}
