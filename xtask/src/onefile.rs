//! The one-file page (`DIR/moeplan.html`): trunk's `index.html` with
//! everything it loads written into it, so that it opens from `file://`
//! with no server and fetches nothing.
//!
//! - the stylesheet becomes a `<style>`;
//! - trunk's start-up module becomes one inline `<script type="module">`
//!   holding the app's wasm-bindgen glue (`moeplan-app.js`) verbatim, then a
//!   block that builds the worker and starts the app with the wasm bytes
//!   decoded from base64 (`init({ module_or_path: bytes })`: no fetch);
//! - the worker is trunk's `worker.js` (wasm-bindgen `no-modules` glue
//!   defining `wasm_bindgen`) followed by a call handing it the worker wasm,
//!   put in a `Blob` whose object URL is `globalThis.moeplanWorkerUrl` before
//!   the app's wasm starts (the page reads it when it starts its worker);
//! - the reader worker likewise, from `reader.js` and its wasm, but as the
//!   script itself, `globalThis.moeplanReaderScript`: the page passes it to
//!   the planning worker, which makes its `blob:` URL and starts the reader
//!   when a file is read (a worker of a `file://` page, whose origin is
//!   opaque, may not start a `blob:` URL the page made);
//! - preload and modulepreload links go (they would fetch the files);
//!   integrity attributes go with the tags that carried them.
//!
//! Anything else that would load a file (`src=`, `href=` not `data:` or
//! `#`) fails the build rather than produce a page that breaks offline.

use std::path::{Path, PathBuf};

type Result<T = ()> = std::result::Result<T, String>;

/// The file trunk's start-up module imports: the app's glue.
const APP_JS: &str = "moeplan-app.js";
const APP_WASM: &str = "moeplan-app_bg.wasm";
const WORKER_JS: &str = "worker.js";
const WORKER_WASM: &str = "worker_bg.wasm";
const READER_JS: &str = "reader.js";
const READER_WASM: &str = "reader_bg.wasm";
pub const FILE_NAME: &str = "moeplan.html";

/// Writes `dir/moeplan.html` from the trunk build in `dir`; returns its path.
pub fn build(dir: &Path) -> Result<PathBuf> {
    let read_text = |name: &str| {
        std::fs::read_to_string(dir.join(name))
            .map_err(|e| format!("cannot read {}: {e}", dir.join(name).display()))
    };
    let html = read_text("index.html")?;
    let start = start_module(
        &read_text(APP_JS)?,
        &Packed::of(&dir.join(APP_WASM))?,
        &Worker::of(dir, WORKER_JS, WORKER_WASM)?,
        &Worker::of(dir, READER_JS, READER_WASM)?,
    )?;
    let page = inline(&html, &start, &|name| read_text(name))?;
    check_self_contained(&page)?;
    let out = dir.join(FILE_NAME);
    std::fs::write(&out, page).map_err(|e| format!("cannot write {}: {e}", out.display()))?;
    Ok(out)
}

/// The inline module: the app's glue, then the worker's blob URL, then the
/// app started on its bytes, as trunk's own start-up script does (it also
/// announces `TrunkApplicationStarted`).
fn start_module(
    app_js: &str,
    app_wasm: &Packed,
    worker: &Worker,
    reader: &Worker,
) -> Result<String> {
    // wasm-bindgen's `--target web` glue ends with
    // `export { initSync, __wbg_init as default };`: its init is whatever
    // the default export names.
    let init = default_export(app_js)
        .ok_or_else(|| format!("{APP_JS}: no `export {{ … as default }}` to start the app with"))?;
    let decode = DECODE;
    Ok(format!(
        "{glue}\n\
         {{\n\
         const moeplanBytes = {decode};\n\
         globalThis.moeplanWorkerUrl = URL.createObjectURL(new Blob({worker}, {{ type: \"text/javascript\" }}));\n\
         globalThis.moeplanReaderScript = {reader}.join(\"\");\n\
         const wasm = await {init}({{ module_or_path: await moeplanBytes(\"{app}\", {gz}) }});\n\
         dispatchEvent(new CustomEvent(\"TrunkApplicationStarted\", {{ detail: {{ wasm }} }}));\n\
         }}\n",
        glue = script_safe(app_js),
        worker = worker.blob_parts(),
        reader = reader.blob_parts(),
        app = app_wasm.base64,
        gz = app_wasm.gzip,
    ))
}

/// A worker as the one-file page and the `file://` embed carry it: its
/// wasm-bindgen `no-modules` glue and its wasm.
struct Worker {
    js: String,
    wasm: Packed,
}

impl Worker {
    fn of(dir: &Path, js: &str, wasm: &str) -> Result<Worker> {
        let text = std::fs::read_to_string(dir.join(js))
            .map_err(|e| format!("cannot read {}: {e}", dir.join(js).display()))?;
        if !text.contains("wasm_bindgen") {
            return Err(format!(
                "{js}: not wasm-bindgen `no-modules` glue (no `wasm_bindgen`)"
            ));
        }
        Ok(Worker {
            js: text,
            wasm: Packed::of(&dir.join(wasm))?,
        })
    }

    /// The parts of its script's `Blob`, as a JavaScript array: the glue,
    /// then its wasm started from the bytes it carries.
    fn blob_parts(&self) -> String {
        format!(
            "[{}, {}]",
            js_string(&self.js),
            js_string(&worker_tail(&self.wasm))
        )
    }
}

/// Decoding in the page and in the worker: base64 by the built-in where
/// the browser has it, `atob` otherwise; then gunzip by the browser's
/// DecompressionStream (Chromium 80, Firefox 113, Safari 16.4).
const DECODE: &str = "async (s, gz) => { \
                      const b = Uint8Array.fromBase64 ? Uint8Array.fromBase64(s) \
                      : Uint8Array.from(atob(s), (c) => c.charCodeAt(0)); \
                      return gz ? new Uint8Array(await new Response(new Blob([b]).stream()\
                      .pipeThrough(new DecompressionStream(\"gzip\"))).arrayBuffer()) : b; }";

/// What follows the worker's `no-modules` glue: its wasm started from the
/// bytes it carries.
fn worker_tail(worker_wasm: &Packed) -> String {
    format!(
        "\n({DECODE})(\"{}\", {}).then((b) => wasm_bindgen({{ module_or_path: b }}));\n",
        worker_wasm.base64, worker_wasm.gzip
    )
}

/// The docs embed for pages opened from `file://`, where a browser fetches
/// no module, wasm or worker file: `dir/moeplan-embed-file.js`, a classic
/// script holding the embed's module (`moeplan-embed.js`), the app's glue,
/// both workers and every wasm binary, which it hands to the module as blobs
/// (`globalThis.moeplanEmbedInline`) before it starts it. The stylesheets
/// stay beside it (a `<link>` loads from `file://`). Returns its path.
pub fn embed_for_file(dir: &Path) -> Result<PathBuf> {
    let read_text = |name: &str| {
        std::fs::read_to_string(dir.join(name))
            .map_err(|e| format!("cannot read {}: {e}", dir.join(name).display()))
    };
    let app_js = read_text(APP_JS)?;
    if default_export(&app_js).is_none() {
        return Err(format!(
            "{}: not wasm-bindgen's glue for the embed",
            dir.display()
        ));
    }
    let app = Packed::of(&dir.join(APP_WASM))?;
    let worker = Worker::of(dir, WORKER_JS, WORKER_WASM)?;
    let reader = Worker::of(dir, READER_JS, READER_WASM)?;
    let script = format!(
        "// moeplan's docs embed for pages opened from file:// (built by `cargo xtask dist`\n\
         // from moeplan-embed.js and the files beside it): load it with a classic\n\
         // <script src=\".../moeplan-embed-file.js\"> and write <moeplan-view> elements.\n\
         (() => {{\n\
         const decode = {DECODE};\n\
         const blob = (parts) => URL.createObjectURL(new Blob(parts, {{ type: \"text/javascript\" }}));\n\
         globalThis.moeplanEmbedInline = {{\n\
         base: new URL(\".\", document.currentScript.src).href,\n\
         glueUrl: blob([{glue}]),\n\
         workerUrl: blob({worker}),\n\
         readerScript: {reader}.join(\"\"),\n\
         wasm: () => decode(\"{app}\", {gz}),\n\
         }};\n\
         import(blob([{embed}]));\n\
         }})();\n",
        glue = js_string(&app_js),
        worker = worker.blob_parts(),
        reader = reader.blob_parts(),
        app = app.base64,
        gz = app.gzip,
        embed = js_string(&read_text("moeplan-embed.js")?),
    );
    let out = dir.join(EMBED_FILE_NAME);
    std::fs::write(&out, script).map_err(|e| format!("cannot write {}: {e}", out.display()))?;
    Ok(out)
}

/// The embed for `file://` pages ([`embed_for_file`]).
pub const EMBED_FILE_NAME: &str = "moeplan-embed-file.js";

/// A wasm binary as the page carries it: gzipped (a third of the size) when
/// `gzip` runs here, then base64.
struct Packed {
    base64: String,
    gzip: bool,
}

impl Packed {
    fn of(file: &Path) -> Result<Packed> {
        // `-n`: no name or time stamp, so the same build gives the same page.
        let gz = std::process::Command::new("gzip")
            .args(["-9", "-n", "-c"])
            .arg(file)
            .output()
            .ok()
            .filter(|o| o.status.success() && !o.stdout.is_empty());
        if let Some(gz) = gz {
            return Ok(Packed {
                base64: base64(&gz.stdout),
                gzip: true,
            });
        }
        eprintln!(
            "onefile: gzip did not run; {} goes in uncompressed",
            file.display()
        );
        let bytes =
            std::fs::read(file).map_err(|e| format!("cannot read {}: {e}", file.display()))?;
        Ok(Packed {
            base64: base64(&bytes),
            gzip: false,
        })
    }
}

/// The local name in `export { …, NAME as default }`.
fn default_export(js: &str) -> Option<&str> {
    js.lines().rev().find_map(|line| {
        let inner = line
            .trim()
            .strip_prefix("export {")?
            .trim_end()
            .strip_suffix("};")?;
        inner.split(',').find_map(|item| {
            let (name, alias) = item.trim().split_once(" as ")?;
            (alias.trim() == "default").then_some(name.trim())
        })
    })
}

/// Trunk's page with its links and start-up script replaced: every `<link>`
/// is inlined, dropped or kept (only `data:`), every `<script>` must be
/// trunk's start-up module (replaced by `start`).
fn inline(html: &str, start: &str, read: &dyn Fn(&str) -> Result<String>) -> Result<String> {
    let mut out = String::with_capacity(html.len() + start.len() + 4096);
    let mut rest = html;
    let mut started = false;
    while let Some(at) = next_tag(rest) {
        out.push_str(&rest[..at]);
        rest = &rest[at..];
        let end = rest.find('>').ok_or("index.html: a tag is not closed")? + 1;
        let tag = &rest[..end];
        if tag.starts_with("<link") {
            let rel = attr(tag, "rel").unwrap_or_default();
            let href = attr(tag, "href").unwrap_or_default();
            match rel {
                "modulepreload" | "preload" => {}
                "stylesheet" if !href.starts_with("data:") => {
                    let css = read(href.trim_start_matches("./"))?;
                    if css.to_ascii_lowercase().contains("</style") {
                        return Err(format!("{href}: contains `</style`, cannot be inlined"));
                    }
                    out.push_str("<style>\n");
                    out.push_str(&css);
                    out.push_str("</style>");
                }
                _ if href.starts_with("data:") => out.push_str(tag),
                _ => return Err(format!("index.html: cannot inline {tag}")),
            }
            rest = &rest[end..];
        } else {
            // A script: up to its closing tag.
            let close = rest
                .find("</script>")
                .ok_or("index.html: a script is not closed")?;
            let body = &rest[end..close];
            let trunk_start = attr(tag, "type") == Some("module")
                && attr(tag, "src").is_none()
                && body.contains(&format!("from './{APP_JS}'"));
            if !trunk_start || started {
                return Err(format!(
                    "index.html: unexpected script {tag}{}",
                    body.trim()
                ));
            }
            started = true;
            out.push_str("<script type=\"module\">\n");
            out.push_str(start);
            out.push_str("</script>");
            rest = &rest[close + "</script>".len()..];
        }
    }
    out.push_str(rest);
    if started {
        Ok(out)
    } else {
        Err(format!(
            "index.html: no start-up module importing ./{APP_JS}"
        ))
    }
}

/// Where the next `<link` or `<script` tag starts.
fn next_tag(s: &str) -> Option<usize> {
    [s.find("<link"), s.find("<script")]
        .into_iter()
        .flatten()
        .min()
}

/// An attribute's value in one tag (double or single quotes).
fn attr<'a>(tag: &'a str, name: &str) -> Option<&'a str> {
    let mut from = 0;
    while let Some(i) = tag[from..].find(name) {
        let at = from + i;
        from = at + name.len();
        let before = tag[..at].chars().next_back();
        if !before.is_some_and(char::is_whitespace) {
            continue;
        }
        let after = tag[from..].trim_start();
        let Some(value) = after.strip_prefix('=') else {
            continue;
        };
        let value = value.trim_start();
        let quote = value.chars().next()?;
        if quote == '"' || quote == '\'' {
            let v = &value[1..];
            return v.find(quote).map(|e| &v[..e]);
        }
        let e = value
            .find(|c: char| c.is_whitespace() || c == '>' || c == '/')
            .unwrap_or(value.len());
        return Some(&value[..e]);
    }
    None
}

/// JavaScript text made safe inside `<script>`: the HTML parser ends a
/// script at `</script` and changes state at `<!--` and `<script`. In
/// wasm-bindgen's glue those can only appear in strings, regular
/// expressions or comments, where these escapes read the same.
fn script_safe(js: &str) -> String {
    let lower = js.to_ascii_lowercase();
    let mut out = String::with_capacity(js.len());
    let mut last = 0;
    for (i, _) in lower.match_indices('<') {
        let escape = if lower[i..].starts_with("</script") {
            "<\\/"
        } else if lower[i..].starts_with("<!--") || lower[i..].starts_with("<script") {
            "\\x3C"
        } else {
            continue;
        };
        out.push_str(&js[last..i]);
        out.push_str(escape);
        // `</` is replaced whole, `<` alone otherwise.
        last = i + if escape.ends_with('/') { 2 } else { 1 };
    }
    out.push_str(&js[last..]);
    out
}

/// A JavaScript string literal of `s`, with `<` escaped so that no `</script`
/// or `<!--` can appear in the page.
fn js_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + s.len() / 8 + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '<' => out.push_str("\\u003c"),
            // Line and paragraph separators end a string in older engines.
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Standard base64 with padding.
pub fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk.first().copied().unwrap_or(0),
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[(n >> (18 - 6 * i)) as usize & 63]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Fails when the page still names anything to load: every `src=` and
/// `href=` must be `data:` or a fragment.
fn check_self_contained(page: &str) -> Result {
    // Only markup counts: the inline script's text may well contain `src=`.
    let mut markup = String::new();
    let mut rest = page;
    while let Some(open) = rest.find("<script") {
        markup.push_str(&rest[..open]);
        let Some(close) = rest[open..].find("</script>") else {
            return Err(format!("{FILE_NAME}: a script is not closed"));
        };
        let tag_end = rest[open..].find('>').unwrap_or(close);
        markup.push_str(&rest[open..open + tag_end + 1]);
        rest = &rest[open + close..];
    }
    markup.push_str(rest);
    for name in ["src", "href"] {
        let mut from = 0;
        while let Some(i) = markup[from..].find(&format!("{name}=")) {
            let at = from + i;
            from = at + name.len() + 1;
            let value = markup[from..].trim_start_matches(['"', '\'']);
            if !(value.starts_with("data:") || value.starts_with('#')) {
                let shown: String = markup[at..].chars().take(80).collect();
                return Err(format!("{FILE_NAME} still loads a file: {shown}"));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_rfc4648() {
        let cases = [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ];
        for (plain, encoded) in cases {
            assert_eq!(base64(plain.as_bytes()), encoded);
        }
        assert_eq!(base64(&[0xff, 0xfe, 0xfd]), "//79");
    }

    #[test]
    fn strings_cannot_close_the_script() {
        let s = js_string("a</script>\"\\\n\u{2028}");
        assert!(!s.contains('<'));
        assert_eq!(s, "\"a\\u003c/script>\\\"\\\\\\n\\u2028\"");
        let glue = script_safe("const a = '</SCRIPT><!-- <script>' </ 2;");
        assert_eq!(glue, "const a = '<\\/SCRIPT>\\x3C!-- \\x3Cscript>' </ 2;");
    }

    #[test]
    fn default_export_is_found() {
        let js = "let wasm;\nexport { initSync, __wbg_init as default };\n";
        assert_eq!(default_export(js), Some("__wbg_init"));
        assert_eq!(default_export("export { a };"), None);
    }

    #[test]
    fn inlines_trunk_page() {
        let html = "<head><link rel=\"icon\" href=\"data:,\">\
            <link rel=\"stylesheet\" href=\"./style.css\" integrity=\"sha384-x\"/>\
            <script type=\"module\">\nimport init, * as bindings from './moeplan-app.js';\n</script>\
            <link rel=\"modulepreload\" href=\"./moeplan-app.js\"><link rel=\"preload\" href=\"./moeplan-app_bg.wasm\" as=\"fetch\"></head>";
        let read = |name: &str| {
            if name == "style.css" {
                Ok("body { color: red }\n".to_string())
            } else {
                Err(format!("no {name}"))
            }
        };
        let page = inline(html, "START\n", &read).unwrap();
        assert!(page.contains("<style>\nbody { color: red }\n</style>"));
        assert!(page.contains("<script type=\"module\">\nSTART\n</script>"));
        assert!(!page.contains("preload") && !page.contains("integrity"));
        check_self_contained(&page).unwrap();
        // Anything else that loads is refused.
        let img = html.replace("</head>", "<script src=\"x.js\"></script></head>");
        assert!(inline(&img, "START\n", &read).is_err());
        assert!(check_self_contained("<img src=\"x.png\">").is_err());
        assert!(check_self_contained("<a href=\"#top\">").is_ok());
    }
}
