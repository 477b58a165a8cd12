/* Site-wide behaviour: dismissable toasts, and htmx requests that land on the sign-in page. */
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

  document.addEventListener("click", function (event) {
    var button = event.target.closest("[data-dismiss='toast']");
    if (button) dismiss(button.closest(".toast"));
  });

  document.addEventListener("DOMContentLoaded", function () {
    armToasts(document);
    if (!window.htmx) return;
    window.htmx.onLoad(armToasts);

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
