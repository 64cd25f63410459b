/* Annotated source pages: highlight the line, range or note named in the URL fragment.
 *
 *   #L12        line 12          (the browser scrolls to it; we highlight it)
 *   #L12-L20    lines 12..20     (no element has this id: we highlight and scroll ourselves)
 *   #note.id    a note           (highlight the note and the lines it covers)
 *   #reference.x.Symbol  a symbol on a reference source page (its note, or span.ann-sym for an
 *               attribute; highlight the symbol's lines)
 *
 * Note ids contain dots, so they are looked up with getElementById (or CSS.escape in selectors),
 * never as raw selectors. Runs on load and on every hashchange. Shift-click on a line number
 * extends the current line into a range.
 */
(function () {
  "use strict";

  var RANGE = /^L(\d+)(?:-L(\d+))?$/;

  function clear() {
    document.querySelectorAll(".ann-hl").forEach(function (el) { el.classList.remove("ann-hl"); });
    document.querySelectorAll(".ann-target").forEach(function (el) { el.classList.remove("ann-target"); });
  }

  function markLines(start, end) {
    var first = null;
    for (var n = start; n <= end; n++) {
      var line = document.getElementById("L" + n);
      if (line) {
        line.classList.add("ann-hl");
        if (!first) first = line;
      }
    }
    return first;
  }

  function apply() {
    if (!document.querySelector(".ann")) return;
    clear();
    var raw = window.location.hash.slice(1);
    if (!raw) return;
    var id;
    try { id = decodeURIComponent(raw); } catch (e) { id = raw; }
    var match = RANGE.exec(id);
    var target = null;
    if (match) {
      var start = parseInt(match[1], 10);
      var end = match[2] ? parseInt(match[2], 10) : start;
      if (end < start) { var t = start; start = end; end = t; }
      target = markLines(start, end);
    } else {
      var el = document.getElementById(id);
      if (!el) el = document.querySelector("#" + CSS.escape(id));
      if (el && (el.classList.contains("ann-note") || el.classList.contains("ann-sym"))) {
        el.classList.add("ann-target");
        markLines(parseInt(el.dataset.start, 10), parseInt(el.dataset.end, 10));
        target = el;
      }
    }
    if (target) {
      /* Wait one frame so the layout (sticky notes, fonts) has settled. */
      window.requestAnimationFrame(function () {
        target.scrollIntoView({ block: match ? "center" : "start" });
      });
    }
  }

  document.addEventListener("click", function (event) {
    var link = event.target.closest && event.target.closest("a.ann-ln");
    if (!link || !event.shiftKey) return;
    var current = RANGE.exec(decodeURIComponent(window.location.hash.slice(1)));
    var clicked = parseInt(link.textContent, 10);
    if (!current) return;
    event.preventDefault();
    var a = parseInt(current[1], 10);
    var lo = Math.min(a, clicked), hi = Math.max(a, clicked);
    window.location.hash = lo === hi ? "L" + lo : "L" + lo + "-L" + hi;
  });

  window.addEventListener("hashchange", apply);
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", apply);
  } else {
    apply();
  }
})();

/* "cite" controls on annotated source pages.
 *
 * A note's head carries button.ann-cite with the note's citation in data-cite-md and
 * data-cite-plain, built at site build time (docs/hooks/source_page.py, annotations/cite.py).
 * The line named by the URL (#L12) gets the same control; its text is the page's line template
 * (div.ann[data-cite-line-md|plain]) with the line number and the line's build-time hash
 * (a.ann-ln[data-h]) put in. Clicking opens a small popover that shows the Markdown form (a
 * "Plain text" tab switches) with the text selected, and copies it with navigator.clipboard;
 * where the clipboard is refused, the selected text is there to copy by hand.
 */
(function () {
  "use strict";

  var LINE = /^L(\d+)$/;
  var pop = null;
  var opener = null;

  function popover() {
    if (pop) return pop;
    pop = document.createElement("div");
    pop.className = "ann-cite-pop";
    pop.setAttribute("role", "dialog");
    pop.setAttribute("aria-label", "Citation");
    pop.hidden = true;
    pop.innerHTML =
      '<div class="ann-cite-tabs">' +
      '<button type="button" data-form="md" aria-pressed="true">Markdown</button>' +
      '<button type="button" data-form="plain" aria-pressed="false">Plain text</button>' +
      '<button type="button" class="ann-cite-close" aria-label="Close">×</button></div>' +
      '<textarea readonly spellcheck="false" aria-label="citation"></textarea>' +
      '<p class="ann-cite-status" aria-live="polite"></p>';
    document.body.appendChild(pop);
    return pop;
  }

  function place(button) {
    var rect = button.getBoundingClientRect();
    var room = document.documentElement.clientWidth;
    var width = Math.min(448, room - 16);
    var left = Math.max(8, Math.min(rect.right - width, room - width - 8));
    pop.style.width = width + "px";
    pop.style.left = (left + window.scrollX) + "px";
    pop.style.top = (rect.bottom + window.scrollY + 4) + "px";
  }

  function copy(text) {
    var area = pop.querySelector("textarea");
    var status = pop.querySelector(".ann-cite-status");
    area.value = text;
    area.focus();
    area.select();
    pop.dataset.copied = "pending";
    function byHand() {
      var ok = false;
      try { ok = document.execCommand("copy"); } catch (e) { ok = false; }
      pop.dataset.copied = ok ? "yes" : "no";
      status.textContent = ok ? "Copied." : "The citation is selected: press Ctrl+C (⌘C) to copy it.";
    }
    if (navigator.clipboard && navigator.clipboard.writeText) {
      navigator.clipboard.writeText(text).then(function () {
        pop.dataset.copied = "yes";
        status.textContent = "Copied to the clipboard.";
      }, byHand);
    } else {
      byHand();
    }
  }

  function show(form) {
    pop.querySelectorAll("[data-form]").forEach(function (b) {
      b.setAttribute("aria-pressed", b.dataset.form === form ? "true" : "false");
    });
    pop.dataset.form = form;
    copy(form === "plain" ? opener.dataset.citePlain : opener.dataset.citeMd);
  }

  function open(button) {
    popover();
    opener = button;
    pop.hidden = false;
    place(button);
    show("md");
  }

  function close() {
    if (pop && !pop.hidden) {
      pop.hidden = true;
      if (opener) opener.focus();
    }
  }

  /* The line named by the URL gets a cite control filled from the page's template. */
  function lineControl() {
    document.querySelectorAll(".ann-line-cite").forEach(function (el) { el.remove(); });
    var match = LINE.exec(window.location.hash.slice(1));
    if (!match) return;
    var line = document.getElementById("L" + match[1]);
    var page = line && line.closest(".ann[data-cite-line-md]");
    var number = line && line.querySelector("a.ann-ln[data-h]");
    if (!page || !number) return;
    function fill(template) {
      return template.split("{line}").join(match[1]).split("{hash}").join(number.dataset.h);
    }
    var button = document.createElement("button");
    button.type = "button";
    button.className = "ann-cite ann-line-cite";
    button.textContent = "cite";
    button.title = "copy a citation of line " + match[1];
    button.dataset.citeMd = fill(page.dataset.citeLineMd);
    button.dataset.citePlain = fill(page.dataset.citeLinePlain);
    line.appendChild(button);
  }

  document.addEventListener("click", function (event) {
    var target = event.target;
    var button = target.closest && target.closest("button.ann-cite");
    if (button) {
      event.preventDefault();
      open(button);
      return;
    }
    if (!pop || pop.hidden) return;
    var tab = target.closest && target.closest(".ann-cite-pop [data-form]");
    if (tab) { show(tab.dataset.form); return; }
    if (target.closest && target.closest(".ann-cite-close")) { close(); return; }
    if (!(target.closest && target.closest(".ann-cite-pop"))) close();
  });
  document.addEventListener("keydown", function (event) {
    if (event.key === "Escape") close();
  });
  window.addEventListener("hashchange", lineControl);
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", lineControl);
  } else {
    lineControl();
  }
})();
