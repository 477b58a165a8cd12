// /api/docs/: starts the vendored Swagger UI. Loaded as a file because the CSP refuses
// inline scripts; settings come from data attributes on #swagger-ui.
"use strict";
(function () {
  const root = document.getElementById("swagger-ui");
  const csrfHeader = root.dataset.csrfHeader;
  const csrfToken = root.dataset.csrfToken;
  window.ui = SwaggerUIBundle({
    url: root.dataset.schemaUrl,
    dom_id: "#swagger-ui",
    presets: [SwaggerUIBundle.presets.apis],
    layout: "BaseLayout",
    deepLinking: true,
    // No badge from validator.swagger.io: the page never contacts another host.
    validatorUrl: null,
    requestInterceptor: function (request) {
      // The session's CSRF token on "Try it out" writes, as the API's session auth expects.
      if (!["GET", undefined].includes(request.method)) {
        request.headers[csrfHeader] = csrfToken;
      }
      return request;
    },
  });
})();
