/* The guidelines panel of the annotation page (annotation/_guidelines_panel.html): the key g or
   the "Guidelines" button opens and closes it, Esc closes it, and a rubric item's dimension
   opens it at that dimension's section. g is ignored while the focus is in a text field, so it
   can be typed in a note. Without JavaScript the dimension links open the guidelines page. */
(function () {
  "use strict";

  var returnFocus = null;

  function panel() { return document.getElementById("guidelines-panel"); }

  function isOpen() {
    var p = panel();
    return !!p && !p.hidden;
  }

  function isTyping(el) {
    if (!el || !el.tagName) return false;
    if (el.isContentEditable || el.tagName === "TEXTAREA" || el.tagName === "SELECT") return true;
    return el.tagName === "INPUT" && ["radio", "checkbox", "button", "submit"].indexOf(el.type) === -1;
  }

  function setOpen(open, sectionId) {
    var p = panel();
    if (!p) return;
    if (open && !isOpen()) returnFocus = document.activeElement;
    p.hidden = !open;
    document.body.classList.toggle("guidelines-open", open);
    Array.prototype.forEach.call(document.querySelectorAll("[data-guidelines-toggle]"), function (button) {
      button.setAttribute("aria-expanded", open ? "true" : "false");
    });
    if (open) {
      var body = p.querySelector(".guidelines-panel-body");
      var section = sectionId ? p.querySelector("#" + sectionId) : null;
      if (body) body.scrollTop = section ? section.offsetTop - body.offsetTop - 8 : body.scrollTop;
      p.focus({ preventScroll: true });
    } else if (returnFocus && document.contains(returnFocus)) {
      returnFocus.focus({ preventScroll: true });
      returnFocus = null;
    }
  }

  // Capture phase on window: runs before the page's own shortcuts (static/js/annotate.js, on
  // document), which skip a key whose default was prevented.
  window.addEventListener("keydown", function (event) {
    if (!panel() || event.defaultPrevented || event.isComposing) return;
    if (event.ctrlKey || event.metaKey || event.altKey || isTyping(event.target)) return;
    var help = document.getElementById("help");
    if (help && help.open) return;
    if (event.key === "g") {
      event.preventDefault();
      setOpen(!isOpen());
    } else if (event.key === "Escape" && isOpen()) {
      event.preventDefault();
      setOpen(false);
    }
  }, true);

  document.addEventListener("click", function (event) {
    var target = event.target.closest ? event.target : null;
    if (!target || !panel()) return;
    if (target.closest("[data-guidelines-toggle]")) {
      setOpen(!isOpen());
    } else if (target.closest("[data-guidelines-close]")) {
      setOpen(false);
    } else {
      var link = target.closest("[data-guidelines-section]");
      if (!link || event.ctrlKey || event.metaKey || event.shiftKey) return;  // a new tab as asked
      event.preventDefault();
      setOpen(true, link.getAttribute("data-guidelines-section"));
    }
  });
})();
