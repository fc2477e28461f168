//! The JavaScript package (`dist/pkg/`): `moeplan-wasm` built for
//! `wasm32-unknown-unknown`, its glue and `.d.ts` from wasm-bindgen
//! `--target web` (an ES module a plain `<script type="module">` imports
//! and bundlers — Vite, webpack 5, esbuild — resolve, the `.wasm` found
//! beside it through `import.meta.url`), and a `package.json`, so the
//! folder is `npm pack`ed or imported by path as it is.
//!
//! The declarations are generated (see `crates/moeplan-wasm/src/lib.rs`);
//! [`typecheck`] holds them to `tests/ts/api.ts`, which uses every export.

use std::path::{Path, PathBuf};

/// The file stem wasm-bindgen gives the glue, the declarations and the wasm.
const STEM: &str = "moeplan_wasm";

/// Builds the npm-packable JavaScript API into `out` (emptied first).
pub fn build(root: &Path, out: &Path) -> Result<(), String> {
    let cargo = crate::cargo();
    crate::sh(
        &cargo,
        &[
            "build",
            "-p",
            "moeplan-wasm",
            "--release",
            "--target",
            "wasm32-unknown-unknown",
        ],
    )?;
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(|d| root.join(d))
        .unwrap_or_else(|| root.join("target"));
    let wasm = target.join(format!("wasm32-unknown-unknown/release/{STEM}.wasm"));
    // Files of an earlier build (a snippet folder that is gone) must not
    // ship again.
    if out.exists() {
        std::fs::remove_dir_all(out).map_err(|e| format!("cannot empty {}: {e}", out.display()))?;
    }
    std::fs::create_dir_all(out).map_err(|e| format!("cannot create {}: {e}", out.display()))?;
    crate::sh(
        "wasm-bindgen",
        &[
            "--target",
            "web",
            "--out-dir",
            &out.to_string_lossy(),
            "--out-name",
            STEM,
            &wasm.to_string_lossy(),
        ],
    )?;
    write(&out.join("README.md"), README)?;
    let mut files: Vec<String> = std::fs::read_dir(out)
        .map_err(|e| format!("cannot read {}: {e}", out.display()))?
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| name != "package.json" && name != ".gitignore")
        .collect();
    files.sort();
    let workspace = std::fs::read_to_string(root.join("Cargo.toml"))
        .map_err(|e| format!("cannot read the workspace Cargo.toml: {e}"))?;
    let crate_toml = std::fs::read_to_string(root.join("crates/moeplan-wasm/Cargo.toml"))
        .map_err(|e| format!("cannot read crates/moeplan-wasm/Cargo.toml: {e}"))?;
    let field = |toml: &str, table: &str, key: &str| {
        toml_string(toml, table, key)
            .ok_or_else(|| format!("no `{key}` in [{table}] of a Cargo.toml"))
    };
    let json = package_json(&PackageInfo {
        version: field(&workspace, "workspace.package", "version")?,
        license: field(&workspace, "workspace.package", "license")?,
        description: field(&crate_toml, "package", "description")?,
        files,
    });
    write(&out.join("package.json"), &json)?;
    eprintln!("pkg: wrote {}", out.display());
    Ok(())
}

/// Type-checks `tests/ts/` (strict, no emit) against the package in
/// `dist/pkg` (build it first: `cargo xtask dist`).
pub fn typecheck(root: &Path) -> Result<(), String> {
    let tsc = root.join("tests/node_modules/.bin/tsc");
    if !tsc.exists() {
        return Err(format!(
            "{} is missing: run `npm ci --prefix tests`",
            tsc.display()
        ));
    }
    let pkg = root.join("dist/pkg").join(format!("{STEM}.d.ts"));
    if !pkg.exists() {
        return Err(format!(
            "{} is missing: run `cargo xtask dist` first",
            pkg.display()
        ));
    }
    crate::sh(&tsc.to_string_lossy(), &["--project", "tests/ts"])
}

fn write(path: &Path, text: &str) -> Result<(), String> {
    std::fs::write(path, text)
        .map_err(|e| format!("cannot write {}: {e}", PathBuf::from(path).display()))
}

/// `key = "value"` in `[table]` of a Cargo.toml: the plain form the
/// workspace uses (xtask has no TOML parser, being std-only).
fn toml_string(toml: &str, table: &str, key: &str) -> Option<String> {
    let header = format!("[{table}]");
    let mut inside = false;
    for line in toml.lines().map(str::trim) {
        if line.starts_with('[') {
            inside = line == header;
        } else if let Some((k, v)) = line.split_once('=').filter(|_| inside) {
            let v = v.trim();
            if k.trim() == key && v.len() >= 2 && v.starts_with('"') && v.ends_with('"') {
                return Some(v[1..v.len() - 1].to_string());
            }
        }
    }
    None
}

struct PackageInfo {
    version: String,
    license: String,
    description: String,
    files: Vec<String>,
}

/// A JSON string literal.
fn quote(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The package's manifest: an ES module with its declarations; no side
/// effects on import (the module does nothing until `init()`), so bundlers
/// may drop what an app does not use.
fn package_json(p: &PackageInfo) -> String {
    let js = format!("./{STEM}.js");
    let dts = format!("./{STEM}.d.ts");
    let wasm = format!("./{STEM}_bg.wasm");
    let files: Vec<String> = p.files.iter().map(|f| quote(f)).collect();
    format!(
        r#"{{
  "name": "moeplan-wasm",
  "version": {version},
  "description": {description},
  "license": {license},
  "type": "module",
  "main": {js},
  "module": {js},
  "types": {dts},
  "exports": {{
    ".": {{
      "types": {dts},
      "default": {js}
    }},
    {wasm}: {wasm},
    "./package.json": "./package.json"
  }},
  "files": [{files}],
  "sideEffects": false,
  "keywords": ["mixture-of-experts", "moe", "expert-placement", "wasm"]
}}
"#,
        version = quote(&p.version),
        description = quote(&p.description),
        license = quote(&p.license),
        js = quote(&js),
        dts = quote(&dts),
        wasm = quote(&wasm),
        files = files.join(", "),
    )
}

/// The package's README (docs/page.md documents the API in full).
const README: &str = r#"# moeplan-wasm

The moeplan planner (expert placement and replication for Mixture-of-Experts
serving) as an ES module with TypeScript declarations. It runs in browsers and
in Node; nothing is fetched but the `.wasm` beside the module.

```ts
import init, { plan, planners, presets, Planner } from "moeplan-wasm";
import type { PlanSettings } from "moeplan-wasm";

await init(); // fetches moeplan_wasm_bg.wasm next to the module
const bytes = new Uint8Array(await (await fetch("trace.json")).arrayBuffer());
const settings: PlanSettings = { nodes: 1, gpusPerNode: 8, algorithm: "eplb", redundantExperts: 8 };
const { plan: file, report, budget } = plan(bytes, settings);
console.log(report.balancedness, file.layers[0].gpus, budget);
```

In Node, hand the bytes to `initSync`:
`initSync({ module: readFileSync(new URL(import.meta.resolve("moeplan-wasm/moeplan_wasm_bg.wasm"))) })`.

- `plan(trace, settings)`: one call; `settings` is `PlanSettings` (the cluster,
  `algorithm`, and any planner's options in camelCase — a misspelt name is a
  type error and a thrown `Error`).
- `planners()`: every planner with its options, kinds and defaults.
- `presets()`: the built-in model shapes.
- `new Planner()`: `loadTrace(bytes)` / `generate(preset, batches, seed)` →
  `TraceStats`; `configure({ nodes, gpusPerNode, groups? }, replicasPerGpu?)`
  and `view(replicasPerGpu?, layer)` → `View`; `export(replicasPerGpu?,
  "moeplan" | "sglang")` → the file's text.

Every error is a thrown `Error` with one message; a `Planner` keeps its
previous trace when a new one is refused.
"#;
