/* Site-wide behaviour: dismissable toasts, file pickers in the page language, and htmx requests
   that land on the sign-in page. */
(function () {
  "use strict";

  var TOAST_MS = 5000;

  function armToasts(root) {
    var toasts = root.querySelectorAll ? root.querySelectorAll(".toast") : [];
    Array.prototype.forEach.call(toasts, function (toast) {
      if (toast.dataset.armed) return;
      toast.dataset.armed = "1";
      // Errors stay until dismissed; everything else fades on its own.
      if (!toast.classList.contains("toast-error")) {
        window.setTimeout(function () { dismiss(toast); }, TOAST_MS);
      }
    });
  }

  function dismiss(toast) {
    toast.classList.add("is-leaving");
    window.setTimeout(function () { toast.remove(); }, 260);
  }

  // A native file input labels itself in the browser's language ("Choose File"), not the
  // page's; wrap it in a button and a file name written in the page's language (texts from
  // <body data-file-choose data-file-none>). Without JavaScript the native input stays.
  function enhanceFileInputs(root) {
    var inputs = root.querySelectorAll ? root.querySelectorAll("input[type='file']:not([data-enhanced])") : [];
    var texts = document.body.dataset;
    Array.prototype.forEach.call(inputs, function (input) {
      input.dataset.enhanced = "1";
      var picker = document.createElement("label");
      var button = document.createElement("span");
      var name = document.createElement("span");
      picker.className = "file-pick";
      button.className = "btn btn-small file-button";
      button.setAttribute("aria-hidden", "true");
      button.textContent = texts.fileChoose;
      name.className = "file-name";
      name.textContent = texts.fileNone;
      input.classList.add("file-input");
      input.parentNode.insertBefore(picker, input);
      picker.appendChild(input);
      picker.appendChild(button);
      picker.appendChild(name);
      input.addEventListener("change", function () {
        var names = Array.prototype.map.call(input.files || [], function (file) { return file.name; });
        name.textContent = names.length ? names.join(", ") : texts.fileNone;
        picker.classList.toggle("has-file", names.length > 0);
      });
    });
  }

  document.addEventListener("click", function (event) {
    var button = event.target.closest("[data-dismiss='toast']");
    if (button) dismiss(button.closest(".toast"));
  });

  document.addEventListener("DOMContentLoaded", function () {
    armToasts(document);
    enhanceFileInputs(document);
    if (!window.htmx) return;
    window.htmx.onLoad(armToasts);
    window.htmx.onLoad(enhanceFileInputs);

    // A request made after the session ended is redirected to the sign-in page: go there
    // (keeping this page as `next`) instead of swapping a sign-in form into a fragment.
    document.body.addEventListener("htmx:beforeSwap", function (event) {
      var xhr = event.detail.xhr;
      if (!xhr || !xhr.responseURL) return;
      var url = new URL(xhr.responseURL);
      var login = document.body.dataset.loginUrl;
      if (login && url.pathname === login) {
        event.detail.shouldSwap = false;
        window.location.assign(url.pathname + "?next=" + encodeURIComponent(window.location.pathname));
      }
    });
  });
})();
