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
