// Starts the docs embed, copied beside the book into embed/ by `cargo xtask
// book`, on chapters that carry a <moeplan-view> widget; other chapters load
// nothing more. mdBook includes this as a classic script on every chapter,
// so the embed is loaded relative to this file (the book's root), whatever
// the chapter's folder: as a module from a server, and from file:// (where
// a browser fetches no module, wasm or worker file) as the classic script
// that carries all of them, moeplan-embed-file.js.
(() => {
  const here = document.currentScript?.src;
  if (!here || !document.querySelector("moeplan-view")) return;
  const failed = (e) => {
    for (const el of document.querySelectorAll("moeplan-view")) {
      const p = document.createElement("p");
      p.className = "moeplan-error";
      p.setAttribute("role", "alert");
      p.textContent = `the live widget did not start: ${e?.message ?? e}`;
      el.replaceChildren(p);
    }
  };
  if (location.protocol === "file:") {
    const s = document.createElement("script");
    s.src = new URL("embed/moeplan-embed-file.js", here).href;
    s.onerror = () => failed(new Error(`${s.src} did not load`));
    document.head.append(s);
  } else {
    import(new URL("embed/moeplan-embed.js", here).href).catch(failed);
  }
})();
