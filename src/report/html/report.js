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
  const canonical = (hash) => {
    if (byId(hash)) return hash;
    const m = /^case\/(.*?)(\/run\/\d+(?:\/(?:seq|turn)\/[^/]+)?)?$/.exec(hash);
    if (!m) return hash;
    try {
      return "case/" + enc(decodeURIComponent(m[1])) + (m[2] || "");
    } catch (_) {
      return hash;
    }
  };
  const target = () => {
    const hash = location.hash.slice(1);
    return hash ? byId(canonical(hash)) : null;
  };

  // A link into a case shows that case alone (report.css, body.focus).
  const focus = (el) => {
    const shown = el && el.closest(".case");
    for (const c of document.querySelectorAll(".case.focused")) c.classList.remove("focused");
    if (shown) shown.classList.add("focused");
    document.body.classList.toggle("focus", Boolean(shown));
  };

  // Long runs (timeline.rs, VIRTUAL_TURNS): their turns are JSON, and only the turns
  // near the viewport are in the DOM. Heights are measured once drawn and estimated
  // until then; spacers above and below stand in for the rest.
  const MARGIN = 800; // px drawn beyond each edge of the viewport
  const lists = new Map(); // container id -> list
  const active = new Set(); // lists near the viewport
  let all = false; // printing: every turn drawn

  const plain = (html) =>
    html
      .replace(/<[^>]*>/g, " ")
      .replace(/&lt;/g, "<")
      .replace(/&gt;/g, ">")
      .replace(/&quot;/g, '"')
      .replace(/&#39;/g, "'")
      .replace(/&amp;/g, "&")
      .toLowerCase();

  const makeList = (el) => {
    const data = JSON.parse(el.querySelector('script[type="application/json"]').textContent);
    const n = data.length;
    const open = Uint8Array.from(data, (d) => d[3]);
    const h = new Float64Array(n).fill(30);
    const measured = new Uint8Array(n);
    const shown = new Map(); // index -> wrapper
    const texts = new Array(n);
    const list = { el, data, n, open, h, measured, shown, texts, pin: -1 };
    el.querySelector(".vnote").hidden = true;

    const find = document.createElement("div");
    find.className = "vfind";
    const label = document.createElement("label");
    const input = document.createElement("input");
    input.type = "search";
    input.autocomplete = "off";
    input.placeholder = "text in any of its " + n + " turns; Enter for the next";
    label.append("Find in this run ", input);
    const status = document.createElement("span");
    status.className = "muted";
    status.setAttribute("aria-live", "polite");
    find.append(label, status);
    list.top = document.createElement("div");
    list.box = document.createElement("div");
    list.bottom = document.createElement("div");
    el.append(find, list.top, list.box, list.bottom);

    let at = -1;
    input.addEventListener("keydown", (e) => {
      if (e.key !== "Enter") return;
      e.preventDefault();
      const q = input.value.trim().toLowerCase();
      if (!q) return;
      const hits = [];
      for (let i = 0; i < n; i++) {
        if (texts[i] === undefined) texts[i] = plain(data[i][4]);
        if (texts[i].includes(q)) hits.push(i);
      }
      if (!hits.length) {
        status.textContent = "not found";
        return;
      }
      const next = hits.find((i) => i > at);
      at = next === undefined ? hits[0] : next;
      status.textContent = "match " + (hits.indexOf(at) + 1) + " of " + hits.length;
      open[at] = 1;
      show(list, at);
      const w = shown.get(at);
      if (w) w.scrollIntoView({ block: "center" });
    });
    list.box.addEventListener(
      "toggle",
      (e) => {
        const w = e.target.parentElement;
        if (w && w.classList.contains("vi")) {
          open[Number(w.dataset.i)] = e.target.open ? 1 : 0;
          measured[Number(w.dataset.i)] = 0;
          schedule();
        }
      },
      true,
    );
    return list;
  };

  const make = (list, i) => {
    const w = document.createElement("div");
    w.className = "vi";
    w.dataset.i = i;
    const t = document.createElement("template");
    t.innerHTML = list.data[i][4];
    const d = t.content.firstElementChild;
    if (d && d.tagName === "DETAILS") d.open = Boolean(list.open[i]);
    w.append(t.content);
    return w;
  };

  // Draw the turns of `list` near the viewport (all of them when printing), keeping a
  // focused or pinned turn, and size the spacers.
  const update = (list) => {
    if (!list.el.getClientRects().length) return; // folded or filtered out
    const { n, h, shown } = list;
    for (let pass = 0; pass < 3; pass++) {
      const base = list.top.getBoundingClientRect().top;
      const from = -base - MARGIN;
      const to = innerHeight - base + MARGIN;
      let start = n;
      let end = n;
      let y = 0;
      for (let i = 0; i < n; i++) {
        if (start === n && y + h[i] > from) start = i;
        if (y > to) {
          end = i;
          break;
        }
        y += h[i];
      }
      if (all) [start, end] = [0, n];
      const focused = document.activeElement && document.activeElement.closest(".vi");
      for (const keep of [list.pin, focused && list.box.contains(focused) ? Number(focused.dataset.i) : -1]) {
        if (keep < 0 || keep < start - 50 || keep >= end + 50) continue;
        start = Math.min(start, keep);
        end = Math.max(end, keep + 1);
      }
      for (const [i, w] of shown) {
        if (i < start || i >= end) {
          w.remove();
          shown.delete(i);
        }
      }
      let prev = null;
      let added = false;
      for (let i = start; i < end; i++) {
        let w = shown.get(i);
        if (!w) {
          w = make(list, i);
          shown.set(i, w);
          if (prev) prev.after(w);
          else list.box.prepend(w);
          added = true;
        }
        prev = w;
      }
      let changed = false;
      let sum = 0;
      let count = 0;
      for (const [i, w] of shown) {
        if (!list.measured[i]) {
          const height = w.offsetHeight;
          if (height !== h[i]) changed = true;
          h[i] = height;
          list.measured[i] = 1;
        }
      }
      for (let i = 0; i < n; i++) {
        if (list.measured[i] && !list.open[i]) {
          sum += h[i];
          count += 1;
        }
      }
      const guess = count ? sum / count : 30;
      for (let i = 0; i < n; i++) if (!list.measured[i]) h[i] = guess;
      let above = 0;
      let below = 0;
      for (let i = 0; i < start; i++) above += h[i];
      for (let i = end; i < n; i++) below += h[i];
      list.top.style.height = above + "px";
      list.bottom.style.height = below + "px";
      if (!added && !changed) break;
    }
  };

  let frame = 0;
  const schedule = () => {
    if (frame) return;
    frame = requestAnimationFrame(() => {
      frame = 0;
      for (const list of active) update(list);
    });
  };

  // Bring turn `i` of `list` into the DOM at the top of the viewport.
  const show = (list, i) => {
    for (let d = list.el.closest("details"); d; d = d.parentElement && d.parentElement.closest("details")) d.open = true;
    update(list);
    let y = 0;
    for (let j = 0; j < i; j++) y += list.h[j];
    scrollTo(0, scrollY + list.top.getBoundingClientRect().top + y);
    list.pin = i;
    update(list);
    list.pin = -1;
  };

  const observer = new IntersectionObserver(
    (entries) => {
      for (const e of entries) {
        const list = lists.get(e.target.id);
        if (e.isIntersecting) active.add(list);
        else active.delete(list);
      }
      schedule();
    },
    { rootMargin: MARGIN + "px 0px" },
  );
  for (const el of document.querySelectorAll(".vlist")) {
    lists.set(el.id, makeList(el));
    observer.observe(el);
  }
  addEventListener("scroll", schedule, { passive: true });
  addEventListener("resize", () => {
    for (const list of lists.values()) list.measured.fill(0);
    schedule();
  });
  // a run unfolded: its list has a size now
  document.addEventListener("toggle", schedule, true);

  // A link to an event or turn of a long run that is not drawn: draw it first.
  const materialise = (hash) => {
    const m = /^(.*\/run\/\d+)\/(seq|turn)\/([^/]+)$/.exec(hash);
    const list = m && lists.get(m[1] + "/turns");
    if (!list) return null;
    const i =
      m[2] === "turn"
        ? list.data.findIndex((d) => d[0] === m[3])
        : list.data.findIndex((d) => d[1] <= Number(m[3]) && Number(m[3]) <= d[2]);
    if (i < 0) return null;
    focus(list.el);
    list.open[i] = 1;
    show(list, i);
    return byId(hash);
  };

  const reveal = () => {
    let el = target();
    if (!el && location.hash.length > 1) el = materialise(canonical(location.hash.slice(1)));
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

  // Print what is shown, unfolded (every turn of a long run drawn); fold it back
  // afterwards.
  let opened = [];
  addEventListener("beforeprint", () => {
    all = true;
    for (const list of lists.values()) update(list);
    opened = Array.from(document.querySelectorAll("details:not([open])")).filter((d) => !d.closest("[hidden]"));
    for (const d of opened) d.open = true;
  });
  addEventListener("afterprint", () => {
    for (const d of opened) d.open = false;
    opened = [];
    all = false;
    schedule();
  });
})();
