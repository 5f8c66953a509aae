// The dashboard's few behaviours: draw the charts, keep GET filter URLs clean,
// and run the pattern analysis. Data is only ever set with textContent.
(function () {
  "use strict";

  function drawCharts() {
    if (typeof window.Plotly === "undefined") return;
    document.querySelectorAll("script.chart-data").forEach(function (node) {
      var target = document.getElementById(node.dataset.target);
      if (!target) return;
      var fig = JSON.parse(node.textContent);
      window.Plotly.newPlot(target, fig.data || [], fig.layout || {},
        { displayModeBar: false, responsive: true });
    });
  }

  // Empty fields are left out of the query string (an empty number is not a number).
  function stripEmpty(form) {
    form.addEventListener("submit", function () {
      Array.prototype.forEach.call(form.elements, function (el) {
        if (el.name && el.value === "") el.disabled = true;
      });
      window.setTimeout(function () {
        Array.prototype.forEach.call(form.elements, function (el) { el.disabled = false; });
      }, 0);
    });
  }

  function analysisForm(form) {
    var status = document.getElementById("analyze-status");
    var button = form.querySelector("button");
    form.addEventListener("submit", function (event) {
      event.preventDefault();
      var body = {};
      var kind = form.elements.kind ? form.elements.kind.value : "";
      if (kind) body.kind = kind;
      var headers = { "Content-Type": "application/json" };
      var token = form.elements.token ? form.elements.token.value : "";
      if (token) headers.Authorization = "Bearer " + token;
      button.disabled = true;
      status.textContent = "Analysing…";
      fetch(form.dataset.endpoint, { method: "POST", headers: headers, body: JSON.stringify(body) })
        .then(function (response) {
          return response.json().catch(function () { return {}; }).then(function (data) {
            if (!response.ok) {
              throw new Error(typeof data.detail === "string" ? data.detail : "HTTP " + response.status);
            }
            status.textContent = "Done: " + ((data.patterns || []).length) + " patterns. Reloading…";
            window.location.reload();
          });
        })
        .catch(function (err) {
          status.textContent = "The analysis failed: " + err.message;
          button.disabled = false;
        });
    });
  }

  document.querySelectorAll("form[data-strip-empty]").forEach(stripEmpty);
  var analyze = document.getElementById("analyze-form");
  if (analyze) analysisForm(analyze);
  if (document.readyState === "complete") drawCharts();
  else window.addEventListener("load", drawCharts);
})();
