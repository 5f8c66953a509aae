// The dashboard's few behaviours: draw the charts, keep GET filter URLs clean,
// run the pattern analysis, and save labels. Data is only ever set with textContent.
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

  // The overview's period and its dates: choosing a period clears the dates; a date makes it a custom range.
  function periodForm(form) {
    var period = form.elements.period;
    if (!period) return;
    period.addEventListener("change", function () {
      if (period.value) { form.elements.since.value = ""; form.elements.until.value = ""; }
    });
    ["since", "until"].forEach(function (name) {
      form.elements[name].addEventListener("change", function () {
        if (form.elements[name].value) period.value = "";
      });
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

  // A label on the trace page: one rubric's score (or pass/fail) by the named annotator.
  function labelForm(form) {
    var status = form.querySelector(".label-status");
    var button = form.querySelector("button");
    form.addEventListener("submit", function (event) {
      event.preventDefault();
      var annotator = document.getElementById("label-annotator");
      if (!annotator || !annotator.value.trim()) {
        status.textContent = "Give your name first.";
        return;
      }
      var verdict = form.elements.verdict.value;
      var body = { evaluation_id: form.dataset.evaluation, rubric: form.dataset.rubric,
                   annotator: annotator.value.trim() };
      if (verdict === "pass" || verdict === "fail") body.passed = verdict === "pass";
      else body.score = Number(verdict.slice("score:".length));
      if (form.elements.note.value) body.note = form.elements.note.value;
      var headers = { "Content-Type": "application/json" };
      var token = document.getElementById("label-token");
      if (token && token.value) headers.Authorization = "Bearer " + token.value;
      button.disabled = true;
      status.textContent = "Saving…";
      fetch(form.dataset.endpoint, { method: "POST", headers: headers, body: JSON.stringify(body) })
        .then(function (response) {
          return response.json().catch(function () { return {}; }).then(function (data) {
            if (!response.ok) {
              throw new Error(typeof data.detail === "string" ? data.detail : "HTTP " + response.status);
            }
            status.textContent = "Saved. Reloading…";
            window.location.reload();
          });
        })
        .catch(function (err) {
          status.textContent = "Not saved: " + err.message;
          button.disabled = false;
        });
    });
  }

  // A prompt-lab form (activate a version, start or end an A/B test): its fields as a JSON
  // body (empty ones left out, data-type="number" ones as numbers) to data-endpoint.
  function jsonForm(form) {
    var status = form.querySelector(".form-status");
    var button = form.querySelector("button");
    form.addEventListener("submit", function (event) {
      event.preventDefault();
      var body = {};
      if (form.dataset.fixedPrompt) body.prompt = form.dataset.fixedPrompt;
      var headers = { "Content-Type": "application/json" };
      Array.prototype.forEach.call(form.elements, function (el) {
        if (!el.name || el.value === "") return;
        if (el.name === "token") headers.Authorization = "Bearer " + el.value;
        else body[el.name] = el.dataset.type === "number" ? Number(el.value) : el.value;
      });
      button.disabled = true;
      status.textContent = "Saving…";
      fetch(form.dataset.endpoint, { method: form.dataset.method || "POST", headers: headers,
                                     body: JSON.stringify(body) })
        .then(function (response) {
          return response.json().catch(function () { return {}; }).then(function (data) {
            if (!response.ok) {
              throw new Error(typeof data.detail === "string" ? data.detail : "HTTP " + response.status);
            }
            status.textContent = "Saved. Reloading…";
            window.location.reload();
          });
        })
        .catch(function (err) {
          status.textContent = "Not saved: " + err.message;
          button.disabled = false;
        });
    });
  }

  document.querySelectorAll("form[data-strip-empty]").forEach(stripEmpty);
  document.querySelectorAll("form.json-form").forEach(jsonForm);
  document.querySelectorAll("form.label-form").forEach(labelForm);
  var overview = document.getElementById("overview-filters");
  if (overview) periodForm(overview);
  var analyze = document.getElementById("analyze-form");
  if (analyze) analysisForm(analyze);
  if (document.readyState === "complete") drawCharts();
  else window.addEventListener("load", drawCharts);
})();
