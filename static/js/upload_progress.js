/* Upload progress for import forms ([data-upload-progress], posted by htmx): a <progress> that
   follows the upload (XMLHttpRequest's upload events, from htmx:beforeSend), then
   "processing" until the server answers. A file over the import limit (data-max-bytes) is
   refused before it is sent; a refusal htmx does not swap (413, a dropped connection) is
   shown in the form. Texts come from the box's data-text-* attributes, in the page's language. */
(function () {
  "use strict";

  var MB = 1024 * 1024;

  function box(form) { return form.querySelector("[data-upload-box]"); }

  function show(form, text, state) {
    var el = box(form);
    if (!el) return;
    el.hidden = false;
    el.dataset.state = state;
    el.querySelector(".upload-status").textContent = text;
  }

  function setProgress(form, fraction) {
    var bar = box(form).querySelector("progress");
    if (fraction === null) bar.removeAttribute("value");  // indeterminate while the server works
    else bar.value = Math.round(fraction * 100);
  }

  function file(form) {
    var input = form.querySelector("input[type='file']");
    return input && input.files && input.files[0];
  }

  function megabytes(bytes) { return (bytes / MB).toFixed(1) + " MB"; }

  function serverMessage(xhr) {
    // The refusal page's message (partials/domain_error.html), when the server sent one.
    if (!xhr || !xhr.responseText) return "";
    var doc = new DOMParser().parseFromString(xhr.responseText, "text/html");
    var message = doc.querySelector("#domain-error p");
    return message ? message.textContent.trim() : "";
  }

  function forForm(event) {
    var form = event.target.closest && event.target.closest("form[data-upload-progress]");
    return form && box(form) ? form : null;
  }

  document.addEventListener("htmx:confirm", function (event) {
    var form = forForm(event);
    var chosen = form && file(form);
    var limit = form && Number(form.dataset.maxBytes);
    if (chosen && limit && chosen.size > limit) {
      event.preventDefault();
      setProgress(form, 0);
      show(form, box(form).dataset.textTooLarge, "error");
    }
  });

  document.addEventListener("htmx:beforeRequest", function (event) {
    var form = forForm(event);
    if (!form) return;
    setProgress(form, 0);
    show(form, box(form).dataset.textUploading, "uploading");
  });

  // The upload's own events (htmx:xhr:progress also reports the answer's download, which
  // would restart the bar): progress while the body is sent, then "processing" once it is.
  document.addEventListener("htmx:beforeSend", function (event) {
    var form = forForm(event);
    var upload = event.detail.xhr && event.detail.xhr.upload;
    if (!form || !upload) return;
    var texts = box(form).dataset;
    upload.addEventListener("progress", function (progress) {
      if (!progress.lengthComputable || !progress.total || progress.loaded >= progress.total) return;
      setProgress(form, progress.loaded / progress.total);
      show(form, texts.textUploading + " " + Math.floor(100 * progress.loaded / progress.total) + "% · " +
           megabytes(progress.loaded) + " / " + megabytes(progress.total), "uploading");
    });
    upload.addEventListener("load", function () {
      setProgress(form, null);
      show(form, texts.textProcessing, "processing");
    });
  });

  document.addEventListener("htmx:afterRequest", function (event) {
    var form = forForm(event);
    if (!form || !document.body.contains(form)) return;  // swapped: the page shows the result
    var xhr = event.detail.xhr;
    if (event.detail.successful || (xhr && xhr.status === 422)) return;
    setProgress(form, 0);
    show(form, serverMessage(xhr) || box(form).dataset.textFailed, "error");
  });
})();
