/* The annotation and calibration pages: keyboard marking, autosaved drafts with a copy in this
   browser, and submit on Enter; on the annotation page also the lease countdown with "keep
   working" (w), and the skip (s) and give-back dialogs. The keyboard map is written out in the
   page's help dialog. */
(function () {
  "use strict";

  var STORE_PREFIX = "rubrica:draft:";
  var SAVE_DELAY_MS = 400;
  var RETRY_MS = 5000;
  var KEEP_LOCAL_MS = 14 * 24 * 3600 * 1000;

  var strings = {};
  var current = -1;
  var saveTimer = null;
  var retryTimer = null;
  // `version` counts edits; a save confirms the local copy only if no edit came after it.
  var version = 0;
  var sentVersion = 0;

  function byId(id) { return document.getElementById(id); }
  function submitButton() {
    var f = form();
    return byId("submit-btn") || (f && f.querySelector("button[type='submit'].btn-primary"));
  }
  function form() { return byId("annotate-form"); }
  function items() {
    var f = form();
    return f ? Array.prototype.slice.call(f.querySelectorAll(".item")) : [];
  }
  function format(template, values) {
    return template.replace(/%\((\w+)\)s/g, function (_, name) { return String(values[name]); });
  }
  function valueOf(item) {
    var checked = item.querySelector(".toggle-input:checked");
    return checked ? Number(checked.value) : null;
  }
  function firstUnmarked() {
    return items().findIndex(function (item) { return valueOf(item) === null; });
  }
  function nextUnmarked(from) {
    var list = items();
    for (var step = 1; step <= list.length; step++) {
      var i = (from + step) % list.length;
      if (valueOf(list[i]) === null) return i;
    }
    return -1;
  }

  /* ---- Local copy ------------------------------------------------------------- */

  function storeKey() { return STORE_PREFIX + form().dataset.assignment; }

  function snapshot() {
    var labels = {};
    var notes = {};
    items().forEach(function (item) {
      var value = valueOf(item);
      if (value !== null) labels[item.dataset.key] = value;
      var text = item.querySelector("textarea");
      if (text && text.value.trim()) notes[item.dataset.key] = text.value;
    });
    return { labels: labels, notes: notes };
  }

  function writeLocal(synced) {
    var copy = snapshot();
    copy.synced = synced;
    copy.at = Date.now();
    try {
      window.localStorage.setItem(storeKey(), JSON.stringify(copy));
    } catch (error) {
      // Storage full or disabled: the server copy still saves.
    }
  }

  function readLocal(key) {
    try {
      return JSON.parse(window.localStorage.getItem(key) || "null");
    } catch (error) {
      return null;
    }
  }

  function pruneLocal() {
    try {
      for (var i = window.localStorage.length - 1; i >= 0; i--) {
        var key = window.localStorage.key(i);
        if (key && key.indexOf(STORE_PREFIX) === 0) {
          var copy = readLocal(key);
          if (!copy || Date.now() - (copy.at || 0) > KEEP_LOCAL_MS) window.localStorage.removeItem(key);
        }
      }
    } catch (error) {
      // Storage disabled: nothing to prune.
    }
  }

  /* Unsynced marks in this browser are the newest thing the expert did here (the
     network failed, or the tab closed before the save), so they win over the server's
     draft; a synced copy defers to the server, which may have newer work from elsewhere. */
  function reconcile() {
    var local = readLocal(storeKey());
    if (!local || local.synced) return;
    var restored = false;
    items().forEach(function (item) {
      var key = item.dataset.key;
      if (Object.prototype.hasOwnProperty.call(local.labels || {}, key)) {
        var input = item.querySelector(".toggle-input[value='" + local.labels[key] + "']");
        if (input && !input.checked) { input.checked = true; restored = true; }
      }
      var text = item.querySelector("textarea");
      var note = (local.notes || {})[key] || "";
      if (text && note && text.value !== note) {
        text.value = note;
        text.closest("details").open = true;
        restored = true;
      }
    });
    if (restored) {
      flash(strings.restored);
      version += 1;
      scheduleSave(0);
    }
  }

  /* ---- Saving ------------------------------------------------------------------ */

  function setStatus(state, text) {
    var status = byId("save-status");
    if (!status) return;
    status.dataset.state = state;
    var dot = document.createElement("span");
    dot.className = "save-dot";
    dot.setAttribute("aria-hidden", "true");
    status.replaceChildren(dot, document.createTextNode(text));
  }

  function scheduleSave(delay) {
    window.clearTimeout(saveTimer);
    window.clearTimeout(retryTimer);
    setStatus("saving", strings.saving);
    saveTimer = window.setTimeout(saveNow, delay === undefined ? SAVE_DELAY_MS : delay);
  }

  function saveNow() {
    window.clearTimeout(saveTimer);
    saveTimer = null;
    var trigger = byId("autosave");
    if (trigger && window.htmx) window.htmx.trigger(trigger, "rubrica-autosave");
  }

  /* A save still pending when the page goes away is sent with keepalive, so closing the
     tab right after a mark loses nothing. HX-Request asks for the status fragment, not a
     redirect with a "saved" message meant for a person. */
  function flush() {
    var f = form();
    if (!f || saveTimer === null) return;
    window.clearTimeout(saveTimer);
    saveTimer = null;
    var token = document.querySelector("meta[name='csrf-token']");
    var sending = version;
    window.fetch(f.dataset.draftUrl, {
      method: "POST",
      body: new FormData(f),
      keepalive: true,
      credentials: "same-origin",
      headers: { "X-CSRFToken": token ? token.content : "", "HX-Request": "true" }
    }).then(function (response) {
      if (response.ok && sending === version) writeLocal(true);
    }).catch(function () { /* The local copy keeps the marks for the next visit. */ });
  }

  function changed() {
    version += 1;
    writeLocal(false);
    refresh();
    scheduleSave();
  }

  /* ---- Display ----------------------------------------------------------------- */

  function flash(text) {
    var el = byId("flash");
    if (el) el.textContent = text || "";
  }

  function refresh() {
    var list = items();
    var done = 0;
    list.forEach(function (item) {
      var value = valueOf(item);
      if (value === null) {
        delete item.dataset.value;
        return;
      }
      done += 1;
      item.dataset.value = String(value);
      if (item.classList.contains("is-missing")) {
        item.classList.remove("is-missing");
        var missing = item.querySelector(".item-missing");
        if (missing) missing.remove();
      }
    });
    byId("progress-done").textContent = String(done);
    byId("progress-bar").value = done;
    var ready = list.length > 0 && done === list.length;
    form().classList.toggle("is-ready", ready);
    var hint = byId("submit-hint");
    if (!hint.dataset.idle) hint.dataset.idle = hint.textContent;
    hint.textContent = ready ? strings.ready : hint.dataset.idle;
  }

  function setCurrent(index, options) {
    var list = items();
    if (!list.length) return;
    var opts = options || {};
    current = Math.max(0, Math.min(index, list.length - 1));
    list.forEach(function (item, i) { item.classList.toggle("is-current", i === current); });
    var item = list[current];
    if (opts.focus !== false) item.focus({ preventScroll: true });
    if (opts.scroll !== false) item.scrollIntoView({ block: "nearest" });
  }

  function mark(value) {
    var list = items();
    if (!list.length) return;
    if (current < 0) setCurrent(Math.max(firstUnmarked(), 0));
    var item = list[current];
    item.querySelector(".toggle-input[value='" + value + "']").checked = true;
    afterMark(item);
  }

  function afterMark(item) {
    flash("");
    changed();
    item.classList.remove("just-marked");
    void item.offsetWidth;  // restart the confirmation animation
    item.classList.add("just-marked");
    var next = nextUnmarked(items().indexOf(item));
    if (next !== -1) setCurrent(next);
  }

  function openNote() {
    var item = items()[current];
    if (!item) return;
    var details = item.querySelector("details.note");
    details.open = true;
    details.querySelector("textarea").focus();
  }

  function submitOrJump() {
    var list = items();
    var missing = list.filter(function (item) { return valueOf(item) === null; });
    if (missing.length) {
      var index = list.indexOf(missing[0]);
      setCurrent(index);
      flash(format(strings.unlabelled, { count: missing.length, position: missing[0].dataset.position }));
      return;
    }
    window.clearTimeout(saveTimer);
    saveTimer = null;
    flash(strings.submitting);
    form().requestSubmit(submitButton());
  }

  /* ---- Keyboard -------------------------------------------------------------------- */

  function isTyping(el) {
    if (!el || !el.tagName) return false;
    if (el.isContentEditable || el.tagName === "TEXTAREA" || el.tagName === "SELECT") return true;
    return el.tagName === "INPUT" && ["radio", "checkbox", "button", "submit"].indexOf(el.type) === -1;
  }

  function activatesOnEnter(el) {
    return !!el && !!el.closest && !!el.closest("button, a[href], summary");
  }

  function toggleHelp() {
    var help = byId("help");
    if (!help) return;
    if (help.open) help.close(); else help.showModal();
  }

  function onKey(event) {
    if (event.defaultPrevented || event.isComposing || event.ctrlKey || event.metaKey || event.altKey) return;
    var help = byId("help");
    if (help && help.open) {
      if (event.key === "?") { event.preventDefault(); help.close(); }
      return;  // Esc closes the dialog natively.
    }
    var skip = byId("skip-dialog");
    if (skip && skip.open) { onSkipKey(event); return; }
    var release = byId("release-dialog");
    if (release && release.open) return;  // its buttons take Enter and Esc
    if (isTyping(event.target)) {
      if (event.key === "Escape") {
        var item = event.target.closest(".item");
        if (item) { event.preventDefault(); setCurrent(items().indexOf(item)); }
      }
      return;
    }
    if (!form()) return;
    var key = event.key;
    if (key === "?") {
      toggleHelp();
    } else if (key === "j") {
      setCurrent(current + 1);
    } else if (key === "k") {
      setCurrent(current - 1);
    } else if (key === "Home") {  // g is the guidelines panel (static/js/guidelines.js)
      setCurrent(0);
    } else if (key === "G" || key === "End") {
      setCurrent(items().length - 1);
    } else if (key === "h" || key === "1") {
      mark(1);
    } else if (key === "m" || key === "0") {
      mark(0);
    } else if (key === "n") {
      openNote();
    } else if (key === "w" && byId("lease-extend")) {
      keepWorking();
    } else if (key === "s" && byId("skip-dialog")) {
      openDialog("skip-dialog");
    } else if (key === "Enter") {
      if (activatesOnEnter(event.target)) return;
      submitOrJump();
    } else if (/^[2-9]$/.test(key) && Number(key) <= items().length) {
      setCurrent(Number(key) - 1);
    } else {
      return;
    }
    event.preventDefault();
  }

  /* ---- Lease: countdown, keep working, skip, give back ------------------------------------ */

  var clockTimer = null;
  var deadline = 0;

  function clock() { return byId("lease-clock"); }

  function clockText(seconds) {
    var m = Math.floor(seconds / 60);
    var s = seconds % 60;
    var h = Math.floor(m / 60);
    var pad = function (n) { return (n < 10 ? "0" : "") + n; };
    return h ? h + ":" + pad(m % 60) + ":" + pad(s) : m + ":" + pad(s);
  }

  /* The deadline is counted from this browser's clock at the moment the server said how many
     seconds were left, so a skewed clock on the expert's machine does not matter. */
  function startClock() {
    var el = clock();
    window.clearInterval(clockTimer);
    if (!el || el.dataset.state !== "leased") return;
    deadline = Date.now() + Number(el.dataset.secondsLeft) * 1000;
    tick();
    clockTimer = window.setInterval(tick, 1000);
  }

  function tick() {
    var el = clock();
    if (!el) { window.clearInterval(clockTimer); return; }
    var left = Math.max(0, Math.round((deadline - Date.now()) / 1000));
    var time = byId("lease-time");
    if (time) time.textContent = clockText(left);
    var warn = Number(el.dataset.warn);
    var was = el.dataset.level;
    var level = left === 0 ? "over" : (left <= warn ? "warn" : "ok");
    el.dataset.level = level;
    if (level !== was && was !== undefined) {
      if (level === "warn") flash(format(strings.lease_warning, { minutes: Math.max(1, Math.ceil(warn / 60)) }));
      if (level === "over") flash(strings.lease_over);
    }
    if (level === "over") window.clearInterval(clockTimer);
  }

  /* A draft save extends the lease on the server too: restart the countdown at the full timeout. */
  function leaseRenewed() {
    var el = clock();
    if (!el || el.dataset.state !== "leased" || el.dataset.level === "over") return;
    el.dataset.secondsLeft = el.dataset.timeout;
    delete el.dataset.level;
    startClock();
  }

  function keepWorking() {
    var button = byId("lease-extend");
    if (button) button.click();
  }

  function openDialog(id) {
    var dialog = byId(id);
    if (!dialog || dialog.open) return;
    dialog.showModal();
    var first = dialog.querySelector("input[type='radio']:checked, input[type='radio'], button[type='submit']");
    if (first) first.focus();
  }

  function onSkipKey(event) {
    var dialog = byId("skip-dialog");
    var typing = isTyping(event.target);
    if (!typing && /^[1-9]$/.test(event.key)) {
      var radio = dialog.querySelector("input[name='reason'][data-key='" + event.key + "']");
      if (radio) {
        event.preventDefault();
        radio.checked = true;
        radio.focus();
        if (radio.value === "other") byId("skip-text").focus();
      }
    } else if (event.key === "Enter" && !event.shiftKey && (!typing || event.target.tagName !== "TEXTAREA")) {
      if (activatesOnEnter(event.target)) return;
      event.preventDefault();
      var skipForm = byId("skip-form");
      if (skipForm) skipForm.requestSubmit(byId("skip-confirm"));
    }
  }

  /* ---- Wiring ------------------------------------------------------------------------ */

  function init() {
    var data = byId("annotate-strings");
    strings = data ? JSON.parse(data.textContent) : {};
    var workspace = byId("workspace");
    if (!workspace) return;
    if (workspace.dataset.state === "submitted") {
      try { window.localStorage.removeItem(STORE_PREFIX + workspace.dataset.assignment); } catch (error) { /* disabled */ }
      var next = byId("next-task");
      if (next) next.focus();
      return;
    }
    startClock();
    if (!form()) return;
    version = 0;
    sentVersion = 0;
    current = -1;
    reconcile();
    refresh();
    var list = items();
    var missing = list.findIndex(function (item) { return item.classList.contains("is-missing"); });
    var first = missing !== -1 ? missing : firstUnmarked();
    setCurrent(first !== -1 ? first : 0, { scroll: missing !== -1 });
  }

  document.addEventListener("keydown", onKey);

  document.addEventListener("change", function (event) {
    var input = event.target;
    if (!input.classList || !input.classList.contains("toggle-input") || !input.closest("#annotate-form")) return;
    afterMark(input.closest(".item"));
  });

  // A submitted form carries every mark: a pending autosave would only race it.
  document.addEventListener("submit", function (event) {
    if (event.target === form()) { window.clearTimeout(saveTimer); saveTimer = null; }
  });

  document.addEventListener("input", function (event) {
    if (event.target.tagName === "TEXTAREA" && event.target.closest("#annotate-form")) changed();
  });

  document.addEventListener("click", function (event) {
    var target = event.target;
    if (target.closest("#help-open")) { toggleHelp(); return; }
    if (target.closest("#help-close")) { byId("help").close(); return; }
    if (target.closest("#skip-open")) { openDialog("skip-dialog"); return; }
    if (target.closest("#release-open")) { openDialog("release-dialog"); return; }
    var closer = target.closest("[data-close-dialog]");
    if (closer) { closer.closest("dialog").close(); return; }
    var item = target.closest("#annotate-form .item");
    if (!item) return;
    // A click in a note or on its toggle keeps the focus where the click put it.
    var keepFocus = !!target.closest("textarea, summary, label, input");
    setCurrent(items().indexOf(item), { focus: !keepFocus, scroll: false });
  });

  document.addEventListener("DOMContentLoaded", function () {
    pruneLocal();
    init();
    var body = document.body;
    body.addEventListener("htmx:load", function (event) {
      if (event.target.id === "workspace") init();
    });
    body.addEventListener("htmx:configRequest", function (event) {
      if (event.detail.elt.id === "autosave") sentVersion = version;
    });
    body.addEventListener("htmx:load", function (event) {
      if (event.target.id === "lease-clock") {
        startClock();
        if (event.target.querySelector("[role='status']")) flash(strings.lease_extended);
      }
    });
    body.addEventListener("htmx:afterRequest", function (event) {
      if (event.detail.elt.id !== "autosave") return;
      var status = event.detail.xhr ? event.detail.xhr.status : 0;
      if (status >= 200 && status < 300) {
        if (sentVersion === version) writeLocal(true);
        if (form() && form().dataset.leased !== undefined) leaseRenewed();
        return;
      }
      // A 422 swapped in the reason (a too-long note, a submitted task); anything else
      // is the network or the server: keep the local copy and try again.
      if (status === 422) return;
      setStatus("offline", navigator.onLine === false ? strings.offline : strings.unsaved);
      window.clearTimeout(retryTimer);
      retryTimer = window.setTimeout(saveNow, RETRY_MS);
    });
    window.addEventListener("online", function () {
      var local = form() && readLocal(storeKey());
      if (local && !local.synced) saveNow();
    });
    window.addEventListener("pagehide", flush);
    document.addEventListener("visibilitychange", function () {
      if (document.visibilityState === "hidden") flush();
    });
  });
})();
