// Starts the docs embed (embed/moeplan-embed.js, copied beside the book by
// `cargo xtask book`) on chapters that carry a <moeplan-view> widget; other
// chapters load nothing more. mdBook includes this as a classic script on
// every chapter, so the module is imported dynamically, relative to this
// file (the book's root), whatever the chapter's folder.
(() => {
  const here = document.currentScript?.src;
  if (!here || !document.querySelector("moeplan-view")) return;
  import(new URL("embed/moeplan-embed.js", here).href).catch((e) => {
    for (const el of document.querySelectorAll("moeplan-view")) {
      const p = document.createElement("p");
      p.className = "moeplan-error";
      p.setAttribute("role", "alert");
      p.textContent = `the live widget did not start: ${e.message ?? e}`;
      el.replaceChildren(p);
    }
  });
})();
