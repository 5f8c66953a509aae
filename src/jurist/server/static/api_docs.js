// Starts Swagger UI on /docs (from this server's files: no inline script, no CDN).
(function () {
  "use strict";
  var node = document.getElementById("swagger-ui");
  if (!node || typeof window.SwaggerUIBundle === "undefined") return;
  var SwaggerUIBundle = window.SwaggerUIBundle;
  window.ui = SwaggerUIBundle({
    url: node.dataset.openapiUrl,
    dom_id: "#swagger-ui",
    layout: "BaseLayout",
    deepLinking: true,
    showExtensions: true,
    showCommonExtensions: true,
    validatorUrl: null,  // no badge fetched from swagger.io
    presets: [SwaggerUIBundle.presets.apis, SwaggerUIBundle.SwaggerUIStandalonePreset]
  });
})();
