// The chat page: each message goes to this server's gated POST /v1/chat/completions as a
// stream; the answer, its evaluations and every LLM call of the request are shown. Every
// piece of text (the person's, the model's, the judge's) is set with textContent only,
// so none of it can become markup.
(function () {
  "use strict";

  var root = document.getElementById("chat");
  var conversation = document.getElementById("conversation");
  var form = document.getElementById("composer");
  var input = document.getElementById("message");
  var sendButton = document.getElementById("send");
  var statusEl = document.getElementById("status");
  var modelInput = document.getElementById("model");
  var modelList = document.getElementById("models");
  var continueBar = document.getElementById("continue-bar");
  var continueButton = document.getElementById("continue");
  var tokenForm = document.getElementById("token-form");
  var tokenInput = document.getElementById("token");

  var tokenRequired = root.dataset.tokenRequired === "true";
  var tokenKey = "jurist.token"; // the same entry the tutor page keeps
  var RECORD_WAIT_S = 20; // each record request waits this long on the server for the record
  var RECORD_WAIT_MS = 120000; // a judge slower than this is not waited for by the page

  var history = []; // the conversation as sent: user turns and accepted answers
  var continueContext = null; // note 004's continueContext of the last failed request
  var busy = false;

  // -- the API token (when the server has one): this tab's sessionStorage only -----------
  function storedToken() {
    try { return window.sessionStorage.getItem(tokenKey); } catch (e) { return null; }
  }

  function rememberToken(token) {
    try { window.sessionStorage.setItem(tokenKey, token); } catch (e) { /* storage off */ }
  }

  function forgetToken() {
    try { window.sessionStorage.removeItem(tokenKey); } catch (e) { /* storage off */ }
  }

  function askToken(message) {
    if (!tokenForm) return;
    tokenForm.hidden = false;
    setStatus(message, true);
    tokenInput.focus();
  }

  // -- small helpers -----------------------------------------------------------------------
  function setStatus(text, isError) {
    statusEl.textContent = text;
    statusEl.classList.toggle("error", Boolean(isError));
  }

  function el(tag, className, text) {
    var node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  function setBusy(value) {
    busy = value;
    sendButton.disabled = value;
    continueButton.disabled = value;
  }

  function newTraceId() {
    var bytes = new Uint8Array(16);
    window.crypto.getRandomValues(bytes);
    return Array.prototype.map.call(bytes, function (b) { return (b < 16 ? "0" : "") + b.toString(16); }).join("");
  }

  function scrollDown(node) {
    node.scrollIntoView({ block: "end" });
  }

  // -- the conversation ----------------------------------------------------------------------
  function addUser(content) {
    var item = el("li", "message user");
    item.appendChild(el("span", "who", "You"));
    item.appendChild(el("p", "text", content));
    conversation.appendChild(item);
    scrollDown(item);
  }

  // One answer: its text, notes (thinking, revision, errors), evaluations and calls.
  function addTurn(traceId, continuation) {
    var item = el("li", "message assistant pending");
    item.dataset.traceId = traceId;
    item.appendChild(el("span", "who", continuation ? "Assistant (continued)" : "Assistant"));
    var turn = {
      item: item,
      traceId: traceId,
      text: el("p", "text"),
      notes: el("ul", "notes"),
      evaluations: el("div", "evaluations"),
      calls: el("details", "calls"),
      link: el("p", "trace-link"),
      streamed: "",
      finished: false,
    };
    turn.evaluations.hidden = true;
    turn.calls.hidden = true;
    turn.link.hidden = true;
    item.appendChild(turn.text);
    item.appendChild(turn.notes);
    item.appendChild(turn.evaluations);
    item.appendChild(turn.calls);
    item.appendChild(turn.link);
    conversation.appendChild(item);
    scrollDown(item);
    return turn;
  }

  function addNote(turn, text, kind) {
    var note = el("li", "note " + (kind || ""), text);
    turn.notes.appendChild(note);
    scrollDown(turn.item);
  }

  // Note 004's display: "Attempt 1: not comprehensive — <reason>".
  function describe(ev) {
    var head = "Attempt " + ev.attempt + ": ";
    var detail = "";
    var state = "fail";
    if (ev.skipped) {
      head += "not evaluated";
      detail = ev.reason;
      state = "skipped";
    } else if (typeof ev.comprehensive === "boolean") {
      head += ev.comprehensive ? "comprehensive" : "not comprehensive";
      detail = ev.reason;
      state = ev.comprehensive ? "pass" : "fail";
    } else if (typeof ev.quality_score === "number") {
      head += "quality " + ev.quality_score.toFixed(2) + (ev.passed ? ", passed" : ", below the threshold");
      detail = (ev.issues || []).join("; ");
      state = ev.passed ? "pass" : "fail";
    } else {
      head += ev.passed ? "passed" : "not passed";
      state = ev.passed ? "pass" : "fail";
    }
    return { head: head, detail: detail ? String(detail) : "", state: state };
  }

  // An evaluation event (the gate's Evaluation) in the shape of note 004's list.
  function listEntry(data) {
    var entry = { attempt: data.attempt, passed: data.passed };
    if (data.passed === null && data.skipped_reason) {
      entry.skipped = true;
      entry.reason = data.skipped_reason;
    } else {
      if (typeof data.comprehensive === "boolean") { entry.comprehensive = data.comprehensive; entry.reason = data.reason || ""; }
      if (typeof data.quality_score === "number") { entry.quality_score = data.quality_score; entry.issues = data.issues || []; }
    }
    return entry;
  }

  function renderEvaluations(turn, list, pending) {
    var box = turn.evaluations;
    box.replaceChildren();
    box.hidden = false;
    box.appendChild(el("p", "heading", "Response evaluation"));
    var items = el("ol", "evaluation-list");
    (list || []).forEach(function (ev) {
      var d = describe(ev);
      var row = el("li", "evaluation " + d.state);
      row.appendChild(el("span", "head", d.head));
      if (d.detail) row.appendChild(el("span", "detail", " — " + d.detail));
      items.appendChild(row);
    });
    box.appendChild(items);
    if (pending) box.appendChild(el("p", "pending-note", "evaluating… (the judge answers after the reply)"));
    else if (!list || list.length === 0) box.appendChild(el("p", "pending-note", "no evaluation"));
  }

  function fmt(value, unit) {
    return value === null || value === undefined ? "n/a" : String(Math.round(Number(value))) + unit;
  }

  function renderCalls(turn, calls) {
    var box = turn.calls;
    box.replaceChildren();
    box.hidden = false;
    box.open = true;
    box.appendChild(el("summary", null, "LLM calls (" + calls.length + ")"));
    var table = el("table", "call-table");
    var head = el("tr");
    ["call", "model", "tokens", "latency", "status"].forEach(function (h) { head.appendChild(el("th", null, h)); });
    var thead = el("thead");
    thead.appendChild(head);
    table.appendChild(thead);
    var body = el("tbody");
    calls.forEach(function (c) {
      var row = el("tr", "call " + (c.status === "ok" ? "ok" : "failed"));
      row.appendChild(el("td", "type", String(c.type) + " #" + String(c.iteration)));
      row.appendChild(el("td", "model", c.model));
      row.appendChild(el("td", "num", fmt(c.tokens, "")));
      row.appendChild(el("td", "num", fmt(c.latency_ms, " ms")));
      row.appendChild(el("td", "status", c.error ? String(c.status) + ": " + String(c.error) : c.status));
      body.appendChild(row);
    });
    table.appendChild(body);
    box.appendChild(table);
  }

  // The gate's record (the proxy's `jurist` field, or the stored one).
  function renderRecord(turn, record) {
    if (!record) return;
    if (typeof record.answer === "string" && record.answer && !record.error) turn.text.textContent = record.answer;
    var list = record.evaluations_list || [];
    if (!record.error) renderEvaluations(turn, list, record.evaluation_pending === true);
    if (Array.isArray(record.llm_calls)) renderCalls(turn, record.llm_calls);
  }

  // The stored record of a request: with feedback off it carries the evaluation made after
  // the answer was sent. The server holds the request until that evaluation has ended (at
  // most RECORD_WAIT_S); asked again once more if it is not there, within RECORD_WAIT_MS.
  function followRecord(turn) {
    var deadline = Date.now() + RECORD_WAIT_MS;
    var url = root.dataset.recordPath + encodeURIComponent(turn.traceId) + "?wait=" + RECORD_WAIT_S;
    var missing = 0;
    function notStored(text) {
      var note = turn.evaluations.querySelector(".pending-note");
      if (note) note.textContent = text;
    }
    function poll() {
      fetch(url, { headers: { Accept: "application/json" } }).then(function (response) {
        if (response.status === 404) missing += 1;
        return response.status === 200 ? response.json() : null;
      }).then(function (stored) {
        if (stored && stored.record) {
          renderRecord(turn, stored.record);
          turn.link.replaceChildren();
          var a = el("a", null, "this request in the dashboard");
          a.href = root.dataset.tracePage + encodeURIComponent(stored.evaluation_id);
          turn.link.appendChild(a);
          turn.link.hidden = false;
          turn.item.classList.add("recorded");
          return;
        }
        if (missing >= 2) notStored("no stored record of this request");
        else if (Date.now() < deadline) window.setTimeout(poll, 1000);
        else notStored("no stored evaluation yet");
      }).catch(function () {
        if (Date.now() < deadline) window.setTimeout(poll, 1000);
      });
    }
    poll();
  }

  function offerContinue(context) {
    if (!context || !Array.isArray(context.messages)) return;
    continueContext = context;
    continueBar.hidden = false;
  }

  function errorText(error, status) {
    var code = error && error.code ? " (" + String(error.code) + ")" : "";
    var message = error && (error.message || error.error) ? String(error.message || error.error) : "the request failed";
    return "Error" + (status ? " " + status : "") + code + ": " + message;
  }

  // -- one request -----------------------------------------------------------------------------
  function parseBlock(block, onData) {
    var data = block.split("\n").filter(function (line) { return line.indexOf("data:") === 0; })
      .map(function (line) { return line.slice(5).replace(/^ /, ""); }).join("\n");
    if (!data || data === "[DONE]") return;
    var parsed;
    try { parsed = JSON.parse(data); } catch (e) { return; }
    if (parsed && typeof parsed === "object") onData(parsed);
  }

  async function readStream(response, onData) {
    var reader = response.body.getReader();
    var decoder = new TextDecoder();
    var buffer = "";
    for (;;) {
      var chunk = await reader.read();
      if (chunk.done) break;
      buffer += decoder.decode(chunk.value, { stream: true }).replace(/\r\n/g, "\n");
      var blocks = buffer.split("\n\n");
      buffer = blocks.pop();
      blocks.forEach(function (block) { parseBlock(block, onData); });
    }
    buffer += decoder.decode();
    if (buffer.trim()) parseBlock(buffer, onData);
  }

  function onEvent(turn, messages, kind, data, chunk) {
    switch (kind) {
      case "thinking":
        addNote(turn, String(data.message || "") + (data.feedback ? " Feedback: " + String(data.feedback) : ""), "thinking");
        break;
      case "revision":
        addNote(turn, "Attempt " + data.attempt + " replaces attempt " + data.replaces + ".", "revision");
        break;
      case "evaluation":
        turn.live = (turn.live || []).concat([listEntry(data)]);
        renderEvaluations(turn, turn.live, false);
        break;
      case "done":
        finish(turn, messages, data);
        break;
      case "error":
        fail(turn, data, chunk && chunk.error);
        break;
      default:
        break; // other events are not shown
    }
  }

  function finish(turn, messages, record) {
    if (turn.finished) return;
    turn.finished = true;
    turn.item.classList.remove("pending");
    var answer = typeof record.answer === "string" ? record.answer : turn.streamed;
    turn.text.textContent = answer;
    renderRecord(turn, record);
    history = messages.concat([{ role: "assistant", content: answer }]);
    setStatus("", false);
  }

  function fail(turn, data, error) {
    if (turn.finished) return;
    turn.finished = true;
    turn.item.classList.remove("pending");
    turn.item.classList.add("failed");
    if (!turn.text.textContent) turn.text.textContent = data && data.partial_answer ? String(data.partial_answer) : "";
    addNote(turn, errorText(error || data, data && data.status), "error");
    var context = (data && data.continueContext) || (error && error.continueContext);
    if ((data && data.showContinueButton) || (error && error.showContinueButton)) offerContinue(context);
    setStatus("The request failed." + (continueContext ? " Continue Processing resends it with its full context." : ""), true);
  }

  async function request(messages, isContinuation, model) {
    var token = tokenRequired ? storedToken() : null;
    if (tokenRequired && !token) {
      askToken("This server needs its API token: enter it, then send again.");
      return;
    }
    var traceId = newTraceId();
    var headers = { "Content-Type": "application/json", Accept: "text/event-stream", "X-Jurist-Trace-Id": traceId };
    if (token) headers.Authorization = "Bearer " + token;
    var body = { model: model, messages: messages, stream: true };
    if (isContinuation) body.isContinuation = true;
    continueBar.hidden = true;
    continueContext = null;
    setBusy(true);
    setStatus(isContinuation ? "continuing…" : "the gate is working…", false);
    var turn = addTurn(traceId, isContinuation);
    var record = true; // follow the stored record afterwards
    try {
      var response = await fetch(root.dataset.completionsPath, {
        method: "POST", headers: headers, body: JSON.stringify(body), credentials: "same-origin",
      });
      if (!response.ok) {
        var payload = null;
        try { payload = await response.json(); } catch (e) { payload = null; }
        var error = payload && payload.error ? payload.error : { message: response.statusText };
        if (response.status === 401 && tokenRequired) {
          forgetToken();
          turn.item.remove();
          record = false;
          askToken("The API token was not accepted; enter it again, then send again.");
          return;
        }
        record = Boolean(error.showContinueButton); // the gate recorded the failed request
        fail(turn, { status: response.status }, error);
        return;
      }
      await readStream(response, function (chunk) {
        if (chunk.jurist_event) {
          onEvent(turn, messages, chunk.jurist_event.type, chunk.jurist_event.data || {}, chunk);
          return;
        }
        var choice = chunk.choices && chunk.choices[0];
        if (choice && choice.delta && typeof choice.delta.content === "string" && !turn.finished) {
          turn.streamed += choice.delta.content;
          turn.text.textContent = turn.streamed;
        }
        if (chunk.jurist && !turn.finished) finish(turn, messages, chunk.jurist);
      });
      if (!turn.finished) fail(turn, { error: "the answer ended before it was complete" }, null);
    } catch (exc) {
      fail(turn, { error: String(exc && exc.message ? exc.message : exc) }, null);
    } finally {
      setBusy(false);
      if (record) followRecord(turn);
    }
  }

  // -- wiring ----------------------------------------------------------------------------------
  form.addEventListener("submit", function (event) {
    event.preventDefault();
    var content = input.value.trim();
    var model = modelInput.value.trim();
    if (!content || busy) return;
    if (!model) {
      setStatus("Name the upstream model to ask first.", true);
      modelInput.focus();
      return;
    }
    if (tokenRequired && !storedToken()) {
      askToken("This server needs its API token: enter it, then send again.");
      return;
    }
    var messages = history.concat([{ role: "user", content: content }]);
    addUser(content);
    input.value = "";
    request(messages, false, model);
  });

  continueButton.addEventListener("click", function () {
    if (!continueContext || busy) return;
    var context = continueContext;
    request(context.messages, true, context.model || modelInput.value.trim());
  });

  input.addEventListener("keydown", function (event) {
    if (event.key === "Enter" && !event.shiftKey) {
      event.preventDefault();
      form.requestSubmit();
    }
  });

  document.getElementById("model-form").addEventListener("submit", function (event) {
    event.preventDefault();
    input.focus();
  });

  if (tokenForm) {
    tokenForm.addEventListener("submit", function (event) {
      event.preventDefault();
      var token = tokenInput.value.trim();
      if (!token) return;
      rememberToken(token);
      tokenInput.value = "";
      tokenForm.hidden = true;
      setStatus("", false);
      input.focus();
    });
    if (!storedToken()) askToken("This server needs its API token.");
  }

  // The upstream's models, offered in the model field (the ?model= of the page wins).
  modelInput.value = root.dataset.model || "";
  fetch(root.dataset.modelsPath, { headers: { Accept: "application/json" } }).then(function (response) {
    return response.ok ? response.json() : null;
  }).then(function (list) {
    var ids = list && Array.isArray(list.data) ? list.data.map(function (m) { return m && m.id; })
      .filter(function (id) { return typeof id === "string" && id; }) : [];
    ids.forEach(function (id) {
      var option = document.createElement("option");
      option.value = id;
      modelList.appendChild(option);
    });
    if (!modelInput.value && ids.length) modelInput.value = ids[0];
  }).catch(function () { /* no list: the field stays free text */ });
})();
