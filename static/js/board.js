// The board's keyboard: j/k move between tasks, Enter opens one, / focuses the search, ? lists the keys.
// Written for this page (a few lines; no library): it survives htmx swaps of the results table.
(function () {
  "use strict";
  var current = -1;

  function rows() {
    return Array.prototype.slice.call(document.querySelectorAll("[data-board-rows] tbody tr[data-href]"));
  }

  function select(index) {
    var list = rows();
    if (!list.length) { return; }
    current = Math.max(0, Math.min(index, list.length - 1));
    list.forEach(function (row, i) {
      row.classList.toggle("is-current", i === current);
      if (i === current) { row.setAttribute("aria-selected", "true"); } else { row.removeAttribute("aria-selected"); }
    });
    var link = list[current].querySelector("a");
    if (link) { link.focus({preventScroll: true}); }
    list[current].scrollIntoView({block: "nearest"});
  }

  function help() {
    var dialog = document.getElementById("board-help");
    if (!dialog) { return; }
    if (dialog.open) { dialog.close(); } else { dialog.showModal(); }
  }

  function typing(target) {
    var tag = (target.tagName || "").toLowerCase();
    return tag === "input" || tag === "textarea" || tag === "select" || target.isContentEditable;
  }

  document.addEventListener("keydown", function (event) {
    if (event.ctrlKey || event.metaKey || event.altKey) { return; }
    if (typing(event.target)) {
      if (event.key === "Escape") { event.target.blur(); }
      return;
    }
    if (event.key === "j") { select(current + 1); event.preventDefault(); }
    else if (event.key === "k") { select(current - 1); event.preventDefault(); }
    else if (event.key === "Enter" && current >= 0 && rows()[current]) {
      window.location.href = rows()[current].getAttribute("data-href");
      event.preventDefault();
    } else if (event.key === "/") {
      var search = document.getElementById("board-search");
      if (search) { search.focus(); search.select(); event.preventDefault(); }
    } else if (event.key === "?") { help(); event.preventDefault(); }
  });

  document.addEventListener("click", function (event) {
    if (event.target.closest && event.target.closest("[data-board-help]")) { help(); }
  });

  // A new results table (htmx swap) starts with no task selected.
  document.body.addEventListener("htmx:afterSwap", function () { current = -1; });
})();
