// The tutor page: one WebSocket to /tutor/ws, all conversation text set with
// textContent only, so a message can never become markup.
(function () {
  "use strict";

  var root = document.getElementById("tutor");
  var conversation = document.getElementById("conversation");
  var form = document.getElementById("composer");
  var input = document.getElementById("message");
  var sendButton = document.getElementById("send");
  var recalledEl = document.getElementById("recalled");
  var totalEl = document.getElementById("total");
  var statusEl = document.getElementById("status");

  var tokenForm = document.getElementById("token-form");
  var tokenInput = document.getElementById("token");

  var points = root.dataset.points;
  var learner = root.dataset.learner;
  var storageKey = "jurist.tutor." + points + "." + learner;
  var tokenKey = "jurist.token";
  var tokenRequired = root.dataset.tokenRequired === "true";
  var socket = null;
  var waiting = false;
  var THINKING = "the tutor is thinking…";

  // The API token (when the server has one) lives in this tab's sessionStorage only.
  function storedToken() {
    try { return window.sessionStorage.getItem(tokenKey); } catch (e) { return null; }
  }

  function rememberToken(token) {
    try { window.sessionStorage.setItem(tokenKey, token); } catch (e) { /* storage off: this page only */ }
  }

  function forgetToken() {
    try { window.sessionStorage.removeItem(tokenKey); } catch (e) { /* storage off */ }
  }

  function askToken(message) {
    tokenForm.hidden = false;
    setStatus(message, true);
    tokenInput.focus();
  }

  // A browser cannot set headers on a WebSocket: the token travels as a subprotocol,
  // "jurist.bearer." + base64url(token).
  function tokenProtocols(token) {
    var bytes = new TextEncoder().encode(token);
    var binary = "";
    for (var i = 0; i < bytes.length; i++) binary += String.fromCharCode(bytes[i]);
    var encoded = window.btoa(binary).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
    return ["jurist", "jurist.bearer." + encoded];
  }

  function storedSessionId() {
    var fromUrl = new URLSearchParams(window.location.search).get("session_id");
    if (fromUrl) return fromUrl;
    if (root.dataset.sessionId) return root.dataset.sessionId;
    try { return window.sessionStorage.getItem(storageKey); } catch (e) { return null; }
  }

  function rememberSessionId(id) {
    try { window.sessionStorage.setItem(storageKey, id); } catch (e) { /* storage off */ }
    var url = new URL(window.location.href);
    url.searchParams.set("session_id", id);
    window.history.replaceState(null, "", url.toString());
  }

  function forgetSessionId() {
    try { window.sessionStorage.removeItem(storageKey); } catch (e) { /* storage off */ }
    root.dataset.sessionId = "";
    var url = new URL(window.location.href);
    url.searchParams.delete("session_id");
    window.history.replaceState(null, "", url.toString());
  }

  function setStatus(text, isError) {
    statusEl.textContent = text;
    statusEl.classList.toggle("error", Boolean(isError));
  }

  function addMessage(role, content) {
    var item = document.createElement("li");
    item.className = "message " + (role === "user" ? "user" : "assistant");
    var who = document.createElement("span");
    who.className = "who";
    who.textContent = role === "user" ? "You" : "Tutor";
    var text = document.createElement("p");
    text.className = "text";
    text.textContent = content;
    item.appendChild(who);
    item.appendChild(text);
    conversation.appendChild(item);
    item.scrollIntoView({ block: "end" });
  }

  // Only when the operator shows progress (the server then sends progress frames).
  function setProgress(recalled, total, completed) {
    if (!recalledEl || !totalEl) return;
    recalledEl.textContent = String(recalled);
    totalEl.textContent = String(total);
    root.classList.toggle("completed", Boolean(completed));
    if (completed) setStatus("All points recalled. Well done!", false);
  }

  function setWaiting(value) {
    waiting = value;
    sendButton.disabled = value || !socket || socket.readyState !== WebSocket.OPEN;
    if (value) {
      setStatus(THINKING, false);
    } else if (statusEl.textContent === THINKING) {
      setStatus("connected", false); // the reply (or an error, which says so) has arrived
    }
  }

  function socketUrl(sessionId) {
    var scheme = window.location.protocol === "https:" ? "wss:" : "ws:";
    var params = new URLSearchParams({ points: points, learner: learner });
    if (sessionId) params.set("session_id", sessionId);
    return scheme + "//" + window.location.host + root.dataset.wsPath + "?" + params.toString();
  }

  function handle(frame) {
    switch (frame.type) {
      case "session":
        rememberSessionId(String(frame.session_id));
        setStatus("connected", false);
        setWaiting(false);
        break;
      case "history":
        conversation.replaceChildren();
        if (typeof frame.opening === "string" && frame.opening) addMessage("assistant", frame.opening);
        (frame.messages || []).forEach(function (m) { addMessage(m.role, String(m.content)); });
        break;
      case "assistant_message":
        addMessage("assistant", String(frame.content));
        setWaiting(false);
        break;
      case "progress":
        setProgress(Number(frame.recalled), Number(frame.total), frame.completed === true);
        break;
      case "error":
        setStatus(String(frame.message), true);
        setWaiting(false);
        break;
      default:
        break; // unknown frames are ignored
    }
  }

  function connect(sessionId) {
    var token = tokenRequired ? storedToken() : null;
    if (tokenRequired && !token) {
      askToken("This server needs its API token to start the tutor.");
      return;
    }
    setStatus("connecting…", false);
    socket = token ? new WebSocket(socketUrl(sessionId), tokenProtocols(token)) : new WebSocket(socketUrl(sessionId));
    socket.addEventListener("message", function (event) {
      var frame;
      try { frame = JSON.parse(event.data); } catch (e) { return; }
      if (frame && typeof frame.type === "string") handle(frame);
    });
    socket.addEventListener("close", function (event) {
      sendButton.disabled = true;
      if (event.code === 4401) {
        forgetToken(); // refused: ask again
        askToken("The API token was not accepted; enter it again.");
      } else if (event.code === 4404 && sessionId) {
        forgetSessionId(); // that session is gone: start a new one
        connect(null);
      } else if (event.code >= 4400) {
        // the error frame has already said why
      } else {
        setStatus("disconnected; reload the page to continue", true);
      }
    });
  }

  form.addEventListener("submit", function (event) {
    event.preventDefault();
    var content = input.value.trim();
    if (!content || waiting || !socket || socket.readyState !== WebSocket.OPEN) return;
    addMessage("user", content);
    socket.send(JSON.stringify({ type: "message", content: content }));
    input.value = "";
    setWaiting(true);
  });

  if (tokenForm) {
    tokenForm.addEventListener("submit", function (event) {
      event.preventDefault();
      var token = tokenInput.value.trim();
      if (!token) return;
      rememberToken(token);
      tokenInput.value = "";
      tokenForm.hidden = true;
      connect(storedSessionId());
    });
  }

  input.addEventListener("keydown", function (event) {
    if (event.key === "Enter" && !event.shiftKey) {
      event.preventDefault();
      form.requestSubmit();
    }
  });

  connect(storedSessionId());
})();
