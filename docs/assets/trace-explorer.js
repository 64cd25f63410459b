/* The trace explorer: shows one replayed step of a trace at a time.
 *
 * The page carries everything (docs/hooks/trace_explorer.py): the steps as JSON in
 * <script class="tx-data">, and a list of steps whose items have ids step-0 .. step-N. This
 * script renders the state of the current step into .tx-panel and keeps the URL at #step-N.
 *
 *   ← / →          previous / next step (not while typing in a form field)
 *   #step-12       deep link: opens step 12 (on load and on every hashchange)
 *   buttons, slider, the list of steps, and the trace picker do the same by pointer.
 */
(function () {
  "use strict";

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }

  function chip(block, marks) {
    var c = el("span", "tx-chip", String(block));
    c.dataset.block = block;
    (marks[block] || []).forEach(function (m) { c.classList.add("tx-" + m); });
    return c;
  }

  function box(title, cls) {
    var b = el("section", "tx-box " + (cls || ""));
    b.appendChild(el("h3", null, title));
    return b;
  }

  function blockMarks(ev) {
    var marks = {};
    function add(b, m) { (marks[b] = marks[b] || []).push(m); }
    ev.evicted.forEach(function (b) { add(b, "evicted"); });
    ev["new"].forEach(function (b) { add(b, "new"); });
    ev.cow.forEach(function (p) { add(p[0], "cow-src"); add(p[1], "cow-dst"); });
    ev.swapped.forEach(function (p) { add(p[0], "swap-src"); });
    return marks;
  }

  function render(tx, data, k) {
    var step = data.steps[k], st = step.state, ev = step.events, marks = blockMarks(ev);
    var panel = tx.querySelector(".tx-panel");
    panel.textContent = "";
    panel.dataset.step = k;

    var head = el("div", "tx-op");
    head.appendChild(el("span", "tx-k", String(k)));
    head.appendChild(el("code", "tx-opname", step.op));
    if (step.out) head.appendChild(el("span", "tx-out", step.out));
    if (step.met !== null) {
      head.appendChild(el("span", "tx-badge " + (step.met ? "tx-ok" : "tx-bad"),
        step.met ? "meets vLLM's pinned values" : "differs from vLLM's pinned values"));
    }
    panel.appendChild(head);
    if (step.expect) {
      panel.appendChild(el("p", "tx-expect", "vLLM's test pins: " + JSON.stringify(step.expect)));
    }

    var notes = [];
    if (ev.evicted.length) notes.push(["tx-evicted", "evicted from the prefix cache: " + ev.evicted.join(", ")]);
    if (ev.cow.length) notes.push(["tx-cow-dst", "copy-on-write: " + ev.cow.map(function (p) { return p[0] + " → " + p[1]; }).join(", ")]);
    if (ev.swapped.length) notes.push(["tx-swap-src", "swapped: " + ev.swapped.map(function (p) { return p[0] + " → " + p[1]; }).join(", ")]);
    if (ev["new"].length) notes.push(["tx-new", "newly mapped: " + ev["new"].join(", ")]);
    if (notes.length) {
      var line = el("p", "tx-events");
      notes.forEach(function (n) { line.appendChild(el("span", "tx-event " + n[0], n[1])); });
      panel.appendChild(line);
    }

    var grid = el("div", "tx-grid");
    var tables = box(data.semantics === "v1" ? "Block tables (per request, per KV-cache group)" : "Block tables (per sequence)", "tx-tables-box");
    if (!st.tables.length) tables.appendChild(el("p", "tx-empty", "no request holds blocks"));
    var table = el("table", "tx-tables");
    st.tables.forEach(function (row) {
      var tr = el("tr");
      tr.dataset.req = row[0];
      tr.appendChild(el("th", null, String(row[0])));
      var td = el("td");
      row[1].forEach(function (group, g) {
        var span = el("span", "tx-group");
        span.dataset.group = g;
        group.forEach(function (b) { span.appendChild(chip(b, marks)); });
        if (!group.length) span.appendChild(el("span", "tx-empty", "–"));
        td.appendChild(span);
      });
      tr.appendChild(td);
      tr.appendChild(el("td", "tx-info", row[2]));
      table.appendChild(tr);
    });
    if (st.tables.length) tables.appendChild(table);
    grid.appendChild(tables);

    var free = box("Free queue, in order (next allocation takes from the left)", "tx-free-box");
    var list = el("div", "tx-free");
    st.free.forEach(function (b) { list.appendChild(chip(b, marks)); });
    if (!st.free.length) list.appendChild(el("span", "tx-empty", "empty"));
    free.appendChild(list);
    grid.appendChild(free);

    if (st.evictable !== null) {
      var ev0 = box("Evictor: cached blocks no sequence holds", "tx-evictor-box");
      var elist = el("div", "tx-evictor");
      st.evictable.forEach(function (b) { elist.appendChild(chip(b, marks)); });
      if (!st.evictable.length) elist.appendChild(el("span", "tx-empty", "empty"));
      ev0.appendChild(elist);
      grid.appendChild(ev0);
    }
    if (st.cpu_free !== null) {
      var cpu = box("CPU free blocks", "tx-cpu-box");
      var clist = el("div", "tx-cpu");
      st.cpu_free.forEach(function (b) { clist.appendChild(el("span", "tx-chip", String(b))); });
      cpu.appendChild(clist);
      grid.appendChild(cpu);
    }

    var blocks = box("Blocks: reference count and cached hash", "tx-blocks-box");
    var cells = el("div", "tx-blocks");
    var n = data.num_blocks;
    for (var b = 0; b < n; b++) {
      var ref = st.refs[String(b)] || 0, h = st.hashes[String(b)] || "";
      var cell = el("div", "tx-block");
      cell.dataset.block = b;
      cell.dataset.ref = ref;
      cell.appendChild(el("span", "tx-bid", String(b)));
      cell.appendChild(el("span", "tx-ref", "ref " + ref));
      cell.appendChild(el("code", "tx-hash", h || "·"));
      if (ref > 0) cell.classList.add("tx-used");
      else if (h) cell.classList.add("tx-cached");
      (marks[b] || []).forEach(function (m) { cell.classList.add("tx-" + m); });
      cells.appendChild(cell);
    }
    blocks.appendChild(cells);
    grid.appendChild(blocks);

    var cached = box("Prefix cache: hash (first 8 hex digits) → blocks", "tx-cached-box");
    if (!st.cached.length) cached.appendChild(el("p", "tx-empty", "empty"));
    else {
      var ct = el("table", "tx-cached");
      st.cached.forEach(function (row) {
        var tr = el("tr");
        var th = el("th");
        th.appendChild(el("code", null, row[0]));
        tr.appendChild(th);
        var td = el("td");
        row[1].forEach(function (b) { td.appendChild(chip(b, marks)); });
        tr.appendChild(td);
        ct.appendChild(tr);
      });
      cached.appendChild(ct);
    }
    grid.appendChild(cached);
    panel.appendChild(grid);
  }

  function setup(tx) {
    var data = JSON.parse(tx.querySelector("script.tx-data").textContent);
    var last = data.steps.length - 1;
    var range = tx.querySelector(".tx-range"), now = tx.querySelector(".tx-now");
    var steps = tx.querySelector(".tx-steps");
    var current = -1;

    function go(k, updateUrl) {
      k = Math.max(0, Math.min(last, k));
      if (k !== current) {
        current = k;
        render(tx, data, k);
        range.value = k;
        now.textContent = k;
        tx.querySelectorAll(".tx-steps li.tx-current").forEach(function (li) { li.classList.remove("tx-current"); });
        var li = document.getElementById("step-" + k);
        if (li) {
          li.classList.add("tx-current");
          steps.scrollTop = Math.max(0, li.offsetTop - steps.offsetTop - steps.clientHeight / 2);
        }
      }
      if (updateUrl && window.location.hash !== "#step-" + k) {
        history.replaceState(null, "", "#step-" + k);
      }
    }

    function fromHash() {
      var m = /^#step-(\d+)$/.exec(window.location.hash);
      return m ? parseInt(m[1], 10) : null;
    }

    tx.querySelector(".tx-prev").addEventListener("click", function () { go(current - 1, true); });
    tx.querySelector(".tx-next").addEventListener("click", function () { go(current + 1, true); });
    range.addEventListener("input", function () { go(parseInt(range.value, 10), true); });
    tx.querySelector(".tx-select").addEventListener("change", function (e) { window.location.href = e.target.value; });
    steps.addEventListener("click", function (e) {
      var a = e.target.closest && e.target.closest("a[href^='#step-']");
      if (!a) return;
      e.preventDefault();
      go(parseInt(a.getAttribute("href").slice(6), 10), true);
    });
    document.addEventListener("keydown", function (e) {
      if (e.altKey || e.ctrlKey || e.metaKey) return;
      var t = e.target, tag = t && t.tagName;
      if (tag === "INPUT" || tag === "SELECT" || tag === "TEXTAREA" || (t && t.isContentEditable)) return;
      if (e.key === "ArrowRight") { go(current + 1, true); e.preventDefault(); }
      else if (e.key === "ArrowLeft") { go(current - 1, true); e.preventDefault(); }
    });
    window.addEventListener("hashchange", function () {
      var k = fromHash();
      if (k !== null) go(k, false);
    });
    var start = fromHash();
    go(start === null ? 0 : start, false);
    if (start !== null) {
      window.requestAnimationFrame(function () { tx.scrollIntoView({ block: "start" }); });
    }
  }

  function init() { document.querySelectorAll("section.tx").forEach(setup); }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
