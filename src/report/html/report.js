// stateval report: filters for the case index, and deep links that open what they
// point at. Reading needs none of it: every fold is a <details>, every link an anchor.
(() => {
  "use strict";
  const byId = (id) => document.getElementById(id);
  const safe = /^[A-Za-z0-9\-_.~]$/;
  const enc = (s) =>
    Array.from(new TextEncoder().encode(s), (b) => {
      const c = String.fromCharCode(b);
      return safe.test(c) ? c : "%" + b.toString(16).toUpperCase().padStart(2, "0");
    }).join("");

  // An anchor the page wrote (`case/ID/run/K/seq/N`, the id percent-encoded), or one a
  // person typed with the id as it reads.
  const target = () => {
    const hash = location.hash.slice(1);
    if (!hash) return null;
    const direct = byId(hash);
    if (direct) return direct;
    const m = /^case\/(.*?)(\/run\/\d+(?:\/(?:seq|turn)\/[^/]+)?)?$/.exec(hash);
    if (!m) return null;
    try {
      return byId("case/" + enc(decodeURIComponent(m[1])) + (m[2] || ""));
    } catch (_) {
      return null;
    }
  };

  // A link into a case shows that case alone (report.css, body.focus).
  const focus = (el) => {
    const shown = el && el.closest(".case");
    for (const c of document.querySelectorAll(".case.focused")) c.classList.remove("focused");
    if (shown) shown.classList.add("focused");
    document.body.classList.toggle("focus", Boolean(shown));
  };

  const reveal = () => {
    const el = target();
    focus(el);
    if (!el) return;
    for (let d = el.closest("details"); d; d = d.parentElement && d.parentElement.closest("details")) d.open = true;
    if (el.tagName === "DETAILS") el.open = true;
    el.scrollIntoView({ block: "start" });
  };
  addEventListener("hashchange", reveal);
  reveal();

  const filters = byId("filters");
  if (filters) {
    filters.hidden = false;
    const q = byId("q");
    const tag = byId("tag");
    const status = byId("status");
    const count = byId("shown");
    const rows = Array.from(document.querySelectorAll("tr[data-case]"), (row) => ({
      row,
      tags: JSON.parse(row.dataset.tags),
      section: byId(row.dataset.case),
    }));
    const apply = () => {
      const text = q.value.trim().toLowerCase();
      let shown = 0;
      for (const r of rows) {
        const ok =
          (!status.value || r.row.dataset.status === status.value) &&
          (!tag.value || r.tags.includes(tag.value)) &&
          (!text || r.row.dataset.search.includes(text));
        r.row.hidden = !ok;
        if (r.section) r.section.hidden = !ok;
        if (ok) shown += 1;
      }
      count.textContent = shown + " of " + rows.length + " cases shown";
    };
    for (const input of [q, tag, status]) input.addEventListener("input", apply);
    apply();
  }

  // Print what is shown, unfolded; fold it back afterwards.
  let opened = [];
  addEventListener("beforeprint", () => {
    opened = Array.from(document.querySelectorAll("details:not([open])")).filter((d) => !d.closest("[hidden]"));
    for (const d of opened) d.open = true;
  });
  addEventListener("afterprint", () => {
    for (const d of opened) d.open = false;
    opened = [];
  });
})();
