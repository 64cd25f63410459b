/* The trace explorer: shows one replayed step of a trace at a time.
 *
 * The page carries everything (conformance/explorer/page.py): the steps, links, exercise questions
 * and, for a saved divergence, both sides, as JSON in <script class="tx-data">; and a list of steps
 * whose items have ids step-0 .. step-N. This script renders the current step into .tx-panel and
 * keeps the URL at #step-N.
 *
 *   ← / →          previous / next step (not while typing in a form field)
 *   #step-12       deep link: opens step 12 (on load and on every hashchange)
 *   #exercise      opens the page in exercise mode at step 0
 *   buttons, slider, the list of steps, and the trace picker do the same by pointer.
 *
 * Exercise mode: a step with questions is first shown as the state before it and the op, with a
 * form; "check" compares each answer with the one the reference computed when the page was built
 * (nothing is computed here), then shows the step. Answers are kept per trace in localStorage
 * ("tx-exercise:<slug>"), so a step already answered shows its verdicts instead of the form; the
 * mode itself is remembered too ("tx-exercise:<slug>:on") until it is switched off.
 */
(function () {
  "use strict";

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }

  function link(item, cls) {
    var a = el(item.href ? "a" : "span", cls || null);
    if (item.href) a.href = item.href;
    if (item.title) a.title = item.title;
    a.appendChild(el("code", null, item.label));
    return a;
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

  /* The boxes of one state. `place` (a divergence's first difference) marks a box, block or row. */
  function stateGrid(data, st, marks, place) {
    var grid = el("div", "tx-grid");
    function mark(b, name) {
      b.dataset.box = name;
      if (place && place.box === name) b.classList.add("tx-diff");
      return b;
    }
    var tables = mark(box(data.semantics === "v1" ? "Block tables (per request, per KV-cache group)" : "Block tables (per sequence)", "tx-tables-box"), "tables");
    if (!st.tables.length) tables.appendChild(el("p", "tx-empty", "no request holds blocks"));
    var table = el("table", "tx-tables");
    st.tables.forEach(function (row) {
      var tr = el("tr");
      tr.dataset.req = row[0];
      if (place && place.box === "tables" && String(place.row) === String(row[0])) tr.classList.add("tx-diff");
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

    var free = mark(box("Free queue, in order (next allocation takes from the left)", "tx-free-box"), "free");
    var list = el("div", "tx-free");
    st.free.forEach(function (b) { list.appendChild(chip(b, marks)); });
    if (!st.free.length) list.appendChild(el("span", "tx-empty", "empty"));
    free.appendChild(list);
    grid.appendChild(free);

    if (st.evictable !== null) {
      var ev0 = mark(box("Evictor: cached blocks no sequence holds", "tx-evictor-box"), "evictor");
      var elist = el("div", "tx-evictor");
      st.evictable.forEach(function (b) { elist.appendChild(chip(b, marks)); });
      if (!st.evictable.length) elist.appendChild(el("span", "tx-empty", "empty"));
      ev0.appendChild(elist);
      grid.appendChild(ev0);
    }
    if (st.cpu_free !== null) {
      var cpu = mark(box("CPU free blocks", "tx-cpu-box"), "cpu");
      var clist = el("div", "tx-cpu");
      st.cpu_free.forEach(function (b) { clist.appendChild(el("span", "tx-chip", String(b))); });
      cpu.appendChild(clist);
      grid.appendChild(cpu);
    }

    var blocks = mark(box("Blocks: reference count and cached hash", "tx-blocks-box"), "blocks");
    var cells = el("div", "tx-blocks");
    for (var b = 0; b < data.num_blocks; b++) {
      var ref = st.refs[String(b)] || 0, h = st.hashes[String(b)] || "";
      var cell = el("div", "tx-block");
      cell.dataset.block = b;
      cell.dataset.ref = ref;
      cell.appendChild(el("span", "tx-bid", String(b)));
      cell.appendChild(el("span", "tx-ref", "ref " + ref));
      cell.appendChild(el("code", "tx-hash", h || "·"));
      if (ref > 0) cell.classList.add("tx-used");
      else if (h) cell.classList.add("tx-cached");
      if (place && place.box === "blocks" && place.block === b) cell.classList.add("tx-diff");
      (marks[b] || []).forEach(function (m) { cell.classList.add("tx-" + m); });
      cells.appendChild(cell);
    }
    blocks.appendChild(cells);
    grid.appendChild(blocks);

    var cached = mark(box("Prefix cache: hash (first 8 hex digits) → blocks", "tx-cached-box"), "cached");
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
    return grid;
  }

  /* The op line, and where it leads: upstream notes and the reference function. */
  function opHead(data, k) {
    var step = data.steps[k];
    var head = el("div", "tx-op");
    head.appendChild(el("span", "tx-k", String(k)));
    head.appendChild(el("code", "tx-opname", step.op));
    return head;
  }

  function opLinks(data, k) {
    var step = data.steps[k], links = step.name && data.links[step.name];
    if (!links) return null;
    var p = el("p", "tx-links");
    var rel = data.release || {};
    if (links.notes.length) {
      var label = "vLLM v" + rel.notes + " notes: ";
      if (rel.notes && rel.trace && rel.notes !== rel.trace) {
        label = "vLLM v" + rel.notes + " notes (this trace: v" + rel.trace + "; that release is not annotated): ";
      }
      p.appendChild(el("span", "tx-links-label", label));
      links.notes.forEach(function (n, i) {
        if (i) p.appendChild(document.createTextNode(" · "));
        p.appendChild(link(n, "tx-note-link"));
      });
    } else {
      p.appendChild(el("span", "tx-links-label", "no block-manager call in vLLM (the scheduler's own bookkeeping)"));
    }
    if (links.ref) {
      p.appendChild(el("span", "tx-links-label tx-links-ref", " reproduced by the reference's "));
      p.appendChild(link(links.ref, "tx-ref-link"));
    }
    return p;
  }

  function eventsLine(ev) {
    var notes = [];
    if (ev.evicted.length) notes.push(["tx-evicted", "evicted from the prefix cache: " + ev.evicted.join(", ")]);
    if (ev.cow.length) notes.push(["tx-cow-dst", "copy-on-write: " + ev.cow.map(function (p) { return p[0] + " → " + p[1]; }).join(", ")]);
    if (ev.swapped.length) notes.push(["tx-swap-src", "swapped: " + ev.swapped.map(function (p) { return p[0] + " → " + p[1]; }).join(", ")]);
    if (ev["new"].length) notes.push(["tx-new", "newly mapped: " + ev["new"].join(", ")]);
    if (!notes.length) return null;
    var line = el("p", "tx-events");
    notes.forEach(function (n) { line.appendChild(el("span", "tx-event " + n[0], n[1])); });
    return line;
  }

  function divergenceView(data, k) {
    var d = data.divergence;
    if (!d || d.step !== k) return null;
    var wrap = el("section", "tx-diverge");
    wrap.appendChild(el("h3", null, "Divergence at this step"));
    wrap.appendChild(el("pre", "tx-diverge-msg", d.message));
    if (d.first) {
      var f = el("p", "tx-first");
      f.appendChild(el("b", null, "first field that differs: "));
      f.appendChild(el("code", null, d.first));
      wrap.appendChild(f);
    }
    if (!d.sides) {
      wrap.appendChild(el("p", "tx-empty", "this trace file holds no saved states of the other side (saved before they were recorded); the state below is the reference's"));
      return wrap;
    }
    var cols = el("div", "tx-sides");
    d.sides.forEach(function (side) {
      var col = el("div", "tx-side");
      col.appendChild(el("h3", null, side.label));
      var out = el("p", "tx-out tx-side-out", side.out || "(no result)");
      if (d.place && d.place.box === "outcome") out.classList.add("tx-diff");
      col.appendChild(out);
      if (side.state) col.appendChild(stateGrid(data, side.state, {}, d.place));
      else col.appendChild(el("p", "tx-empty", "no state saved"));
      cols.appendChild(col);
    });
    wrap.appendChild(cols);
    return wrap;
  }

  function render(tx, data, k) {
    var step = data.steps[k], ev = step.events;
    var panel = tx.querySelector(".tx-panel");
    panel.textContent = "";
    panel.dataset.step = k;
    panel.dataset.view = "state";
    var head = opHead(data, k);
    if (step.out) head.appendChild(el("span", "tx-out", step.out));
    if (step.met !== null) {
      head.appendChild(el("span", "tx-badge " + (step.met ? "tx-ok" : "tx-bad"),
        step.met ? "meets vLLM's pinned values" : "differs from vLLM's pinned values"));
    }
    panel.appendChild(head);
    var links = opLinks(data, k);
    if (links) panel.appendChild(links);
    if (step.expect) panel.appendChild(el("p", "tx-expect", "vLLM's pinned values: " + JSON.stringify(step.expect)));
    var line = eventsLine(ev);
    if (line) panel.appendChild(line);
    var div = divergenceView(data, k);
    if (div) panel.appendChild(div);
    else panel.appendChild(stateGrid(data, step.state, blockMarks(ev), null));
  }

  // -- exercise mode ---------------------------------------------------------------------------

  function storageKey(data) { return "tx-exercise:" + data.slug; }

  function loadProgress(data) {
    try { return JSON.parse(window.localStorage.getItem(storageKey(data)) || "{}") || {}; }
    catch (e) { return {}; }
  }

  function saveProgress(data, progress) {
    try { window.localStorage.setItem(storageKey(data), JSON.stringify(progress)); } catch (e) { /* private mode */ }
  }

  /* An answer as typed: a list of ids, "refused", an integer, a block id or null, a number. */
  function parse(kind, text) {
    var t = text.trim().toLowerCase();
    if (!t) return undefined;
    if (kind === "ids") {
      if (t === "refused" || t === "null") return "refused";
      if (t === "none" || t === "empty" || t === "-" || t === "[]") return [];
      var ids = t.replace(/[\[\]()]/g, " ").split(/[\s,;]+/).filter(Boolean);
      if (!ids.every(function (x) { return /^\d+$/.test(x); })) return undefined;
      return ids.map(Number);
    }
    if (kind === "block") {
      if (t === "none" || t === "empty" || t === "-" || t === "null") return null;
      return /^\d+$/.test(t) ? Number(t) : undefined;
    }
    if (kind === "int") return /^-?\d+$/.test(t) ? Number(t) : undefined;
    var x = Number(t);
    return isNaN(x) ? undefined : x;
  }

  function same(kind, a, b) {
    if (kind === "number") return typeof a === "number" && Math.abs(a - b) <= 1e-6 * Math.max(1, Math.abs(b));
    return JSON.stringify(a) === JSON.stringify(b);
  }

  function shown(kind, v) {
    if (kind === "ids") return v === "refused" ? "refused (the op returns None)" : (v.length ? v.join(", ") : "none");
    if (kind === "block") return v === null ? "none (the queue is empty)" : String(v);
    return String(v);
  }

  function verdict(q, given, ok) {
    var p = el("p", "tx-verdict " + (ok ? "tx-right" : "tx-wrong"));
    p.dataset.q = q.id;
    p.appendChild(el("b", null, ok ? "✓ right" : "✗ not quite"));
    p.appendChild(document.createTextNode(" (" + q.label + ")" + (ok ? ": " + shown(q.kind, q.answer) + ". " :
      ": you said " + given + "; the reference computed " + shown(q.kind, q.answer) + ". ")));
    if (!ok && q.why) {
      p.appendChild(document.createTextNode("Why: "));
      p.appendChild(link({label: q.why.label, href: q.why.href}, "tx-why"));
    }
    return p;
  }

  function questionCard(tx, data, k, questions, onDone) {
    var panel = tx.querySelector(".tx-panel");
    panel.textContent = "";
    panel.dataset.step = k;
    panel.dataset.view = "question";
    var head = opHead(data, k);
    head.appendChild(el("span", "tx-out", "→ ?"));
    panel.appendChild(head);
    var links = opLinks(data, k);
    if (links) panel.appendChild(links);
    var form = el("form", "tx-ex-form");
    form.appendChild(el("p", "tx-ex-intro", "Predict before the step is shown (the state below is the one before this op):"));
    questions.forEach(function (q) {
      var row = el("div", "tx-ex-q");
      row.dataset.q = q.id;
      var label = el("label");
      var prompt = el("span", "tx-ex-prompt");
      prompt.innerHTML = q.prompt;  // built by the page's builder, its values escaped there
      label.appendChild(prompt);
      var input = el("input", "tx-ex-input");
      input.type = "text";
      input.name = q.id;
      input.autocomplete = "off";
      input.setAttribute("inputmode", q.kind === "ids" || q.kind === "block" ? "text" : "decimal");
      label.appendChild(input);
      row.appendChild(label);
      form.appendChild(row);
    });
    var check = el("button", "md-button tx-ex-check", "check");
    check.type = "submit";
    form.appendChild(check);
    var problem = el("p", "tx-ex-problem");
    form.appendChild(problem);
    form.addEventListener("submit", function (e) {
      e.preventDefault();
      var answers = {};
      var bad = questions.filter(function (q) {
        var text = form.querySelector("input[name='" + q.id + "']").value;
        answers[q.id] = {text: text, value: parse(q.kind, text)};
        return answers[q.id].value === undefined;
      });
      if (bad.length) {
        problem.textContent = "Answer every question first (" + (bad[0].kind === "ids" ? "block ids separated by commas, or none" : bad[0].kind === "block" ? "a block id, or none" : "a number") + ").";
        return;
      }
      onDone(answers);
    });
    panel.appendChild(form);
    panel.appendChild(stateGrid(data, data.steps[k - 1].state, {}, null));
    var first = form.querySelector("input");
    if (first) first.focus({preventScroll: true});
  }

  function setup(tx) {
    var data = JSON.parse(tx.querySelector("script.tx-data").textContent);
    var last = data.steps.length - 1;
    var range = tx.querySelector(".tx-range"), now = tx.querySelector(".tx-now");
    var steps = tx.querySelector(".tx-steps");
    var toggle = tx.querySelector(".tx-ex-toggle"), reset = tx.querySelector(".tx-ex-reset");
    var progressLine = tx.querySelector(".tx-ex-progress");
    var byStep = {};
    (data.questions || []).forEach(function (q) { (byStep[q.step] = byStep[q.step] || []).push(q); });
    var progress = loadProgress(data);
    var exercise = false;
    var current = -1;

    function showProgress() {
      if (!progressLine) return;
      var qs = data.questions, done = qs.filter(function (q) { return progress[q.id]; });
      var right = done.filter(function (q) { return progress[q.id].ok; });
      progressLine.textContent = exercise || done.length ?
        done.length + " of " + qs.length + " answered, " + right.length + " right" : "";
    }

    function showStep(k) {
      render(tx, data, k);
      var qs = exercise ? byStep[k] : null;
      if (qs && qs.every(function (q) { return progress[q.id]; })) {
        var box = el("section", "tx-ex-verdicts");
        qs.forEach(function (q) { box.appendChild(verdict(q, progress[q.id].given, progress[q.id].ok)); });
        var panel = tx.querySelector(".tx-panel");
        panel.insertBefore(box, panel.children[1] || null);
      }
    }

    function go(k, updateUrl, force) {
      k = Math.max(0, Math.min(last, k));
      if (k !== current || force) {
        current = k;
        var qs = exercise ? byStep[k] : null;
        if (qs && !qs.every(function (q) { return progress[q.id]; })) {
          questionCard(tx, data, k, qs, function (answers) {
            qs.forEach(function (q) {
              progress[q.id] = {ok: same(q.kind, answers[q.id].value, q.answer), given: answers[q.id].text.trim()};
            });
            saveProgress(data, progress);
            showProgress();
            showStep(k);
          });
        } else {
          showStep(k);
        }
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

    function setExercise(on) {
      exercise = on;
      try {
        if (on) window.localStorage.setItem(storageKey(data) + ":on", "1");
        else window.localStorage.removeItem(storageKey(data) + ":on");
      } catch (e) { /* private mode: the mode lasts as long as the page */ }
      tx.classList.toggle("tx-exercising", on);
      if (toggle) toggle.setAttribute("aria-pressed", on ? "true" : "false");
      if (reset) reset.hidden = !on;
      showProgress();
      go(current, false, true);
    }

    function fromHash() {
      var m = /^#step-(\d+)$/.exec(window.location.hash);
      return m ? parseInt(m[1], 10) : null;
    }

    tx.querySelector(".tx-prev").addEventListener("click", function () { go(current - 1, true); });
    tx.querySelector(".tx-next").addEventListener("click", function () { go(current + 1, true); });
    range.addEventListener("input", function () { go(parseInt(range.value, 10), true); });
    var select = tx.querySelector(".tx-select");
    if (select) select.addEventListener("change", function (e) { window.location.href = e.target.value; });
    if (toggle) toggle.addEventListener("click", function () { setExercise(!exercise); });
    if (reset) reset.addEventListener("click", function () {
      progress = {};
      saveProgress(data, progress);
      showProgress();
      go(current, false, true);
    });
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
      else if (window.location.hash === "#exercise" && toggle && !exercise) { go(0, false); setExercise(true); }
    });
    var start = fromHash();
    go(start === null ? 0 : start, false);
    var remembered = false;
    try { remembered = window.localStorage.getItem(storageKey(data) + ":on") === "1"; } catch (e) { /* none */ }
    if (toggle && (window.location.hash === "#exercise" || remembered)) setExercise(true);
    else showProgress();
    if (start !== null || window.location.hash === "#exercise") {
      window.requestAnimationFrame(function () { tx.scrollIntoView({ block: "start" }); });
    }
  }

  function init() { document.querySelectorAll("section.tx").forEach(setup); }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
