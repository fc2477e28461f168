// The moeplan docs embed: the one module a documentation page includes.
//
//   <script type="module" src="moeplan-embed.js"></script>
//   <moeplan-view preset="deepseek-v3" nodes="4" gpus-per-node="8" charts="curve"></moeplan-view>
//
// Defines <moeplan-view>, whose attributes configure one live embed (see
// docs/page.md), and exports mount(element, options) for pages that build
// their own elements. Each embed renders the planner page's own charts
// (the same wasm) inside its own shadow root, so element ids and styles
// never meet another embed's or the docs page's, and plans in its own
// worker, so embeds never see one another's answers. Everything it loads
// lies beside this file.
//
// From file:// a browser fetches no module, wasm or worker file, so
// `cargo xtask dist` also writes moeplan-embed-file.js, a classic script
// that carries the glue, every wasm binary and both workers, and sets
// `globalThis.moeplanEmbedInline` before it starts this module from a blob:
// then everything below comes from memory instead of the folder.

const inline = globalThis.moeplanEmbedInline;
// The folder this module lies in (a blob's URL has none).
const here = inline?.base ?? import.meta.url;
const { default: init, mount: mountWasm } = await import(inline?.glueUrl ?? "./moeplan-app.js");

// Read by the wasm when it starts (after the import above evaluates, before
// init() runs its main): do not mount the whole page on <body>; start
// workers from this folder, whichever page includes the module.
globalThis.moeplanEmbed = true;
globalThis.moeplanWorkerUrl = inline?.workerUrl ?? new URL("./worker_loader.js", here).href;
// The planning worker starts the file reader when a file is dropped: from
// this folder, or from its script (from file://, whose origin is opaque, a
// worker may start only a blob: URL it made itself).
if (inline) globalThis.moeplanReaderScript = inline.readerScript;
else globalThis.moeplanReaderUrl = new URL("./reader_loader.js", here).href;

const styles = ["./style.css", "./embed.css"].map((f) => new URL(f, here).href);

// One wasm for every embed on the page, started once.
let started;
const start = () =>
  (started ??= (async () => init({
    module_or_path: inline ? await inline.wasm() : new URL("./moeplan-app_bg.wasm", here),
  }))());

// Attributes every element may carry that are not the embed's options.
const globalAttribute = /^(id|class|style|title|hidden|lang|dir|slot|part|role|tabindex|data-.*|aria-.*)$/;

function showError(box, message) {
  const p = document.createElement("p");
  p.className = "status error moeplan-error";
  p.setAttribute("role", "alert");
  p.textContent = message;
  box.replaceChildren(p);
}

/// Mounts one embed into `element` (in its shadow root, made if missing).
/// `options`: attribute names and string values, as <moeplan-view> takes
/// them. A bad option, or a trace that cannot be fetched, is one line shown
/// in the element; the promise still resolves.
export async function mount(element, options = {}) {
  const root = element.shadowRoot ?? element.attachShadow({ mode: "open" });
  const links = styles.map((href) => Object.assign(document.createElement("link"), { rel: "stylesheet", href }));
  const box = document.createElement("div");
  box.className = "moeplan-root";
  root.replaceChildren(...links, box);
  const opts = { ...options };
  try {
    if (opts.trace) {
      // Fetched by the docs page (its origin, its cookies), read by the
      // worker as a dropped file would be.
      const url = new URL(opts.trace, document.baseURI);
      const response = await fetch(url);
      if (!response.ok) throw new Error(`trace="${opts.trace}": ${response.status} ${response.statusText}`.trim());
      const name = decodeURIComponent(url.pathname.split("/").pop() || "trace");
      opts.traceFile = new File([await response.blob()], name);
    }
    await start();
    mountWasm(box, opts);
  } catch (e) {
    // The wasm shows its own errors (and throws them): keep its line.
    if (!box.hasChildNodes()) showError(box, `moeplan: ${e?.message ?? e}`);
  }
}

class MoeplanView extends HTMLElement {
  connectedCallback() {
    // Attributes are read once: an embed moved in the document stays as it is.
    if (this.moeplanMounted) return;
    this.moeplanMounted = true;
    const options = {};
    for (const a of this.attributes) if (!globalAttribute.test(a.name)) options[a.name] = a.value;
    mount(this, options);
  }
}

if (!customElements.get("moeplan-view")) customElements.define("moeplan-view", MoeplanView);
