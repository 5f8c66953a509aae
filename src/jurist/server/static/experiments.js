// The dashboard's "add to a dataset" form: a stored evaluation as a dataset item, with the expected
// answer typed in. Server data is only ever set with textContent.
(function () {
  "use strict";
  var form = document.getElementById("add-item-form");
  if (!form) return;
  var status = document.getElementById("add-status");
  var button = form.querySelector("button");
  form.addEventListener("submit", function (event) {
    event.preventDefault();
    var name = form.elements.dataset_name.value.trim();
    // getAttribute, not form.dataset: a form control of that name would shadow it
    var body = { evaluation_id: form.getAttribute("data-evaluation"), expected: form.elements.expected.value };
    if (form.elements.item_id.value.trim()) body.item_id = form.elements.item_id.value.trim();
    var headers = { "Content-Type": "application/json" };
    if (form.elements.token && form.elements.token.value) headers.Authorization = "Bearer " + form.elements.token.value;
    button.disabled = true;
    status.textContent = "Adding…";
    fetch("/api/datasets/" + encodeURIComponent(name) + "/items",
          { method: "POST", headers: headers, body: JSON.stringify(body) })
      .then(function (response) {
        return response.json().catch(function () { return {}; }).then(function (data) {
          if (!response.ok) {
            throw new Error(typeof data.detail === "string" ? data.detail : "HTTP " + response.status);
          }
          status.textContent = "Added: " + name + " version " + data.version.number + " (" +
            data.version.dataset_version + ", " + data.version.items + " items). ";
          var link = document.createElement("a");
          link.id = "added-link";
          link.href = "/evaluation/datasets/" + encodeURIComponent(name) + "?version=" +
            encodeURIComponent(data.version.dataset_version);
          link.textContent = "Open the dataset";
          status.appendChild(link);
          button.disabled = false;
        });
      })
      .catch(function (err) {
        status.textContent = "Not added: " + err.message;
        button.disabled = false;
      });
  });
})();
