// The live research evaluation page: follows the run's server-sent events and updates in place.
// Everything that comes from the run (the query, critiques, issues, reasons) is set with
// textContent only, never as HTML.
(function () {
  "use strict";

  var root = document.getElementById("live");
  if (!root) return;
  var STAGE_NAMES = { plan: "plan", retrieval: "retrieval", answer: "answer" };
  var LABELS = { plan: "Plan", retrieval: "Retrieval", answer: "Answer" };
  var MODES = { targeted_fix: "targeted fix", full_regeneration: "full regeneration",
                alternative_approach: "alternative approach" };
  var CHOICES = { proceed: "Proceed anyway", retry: "Retry search" };
  var lastSeq = 0;
  var finished = false;
  var countdown = null;

  // -- small helpers ---------------------------------------------------------------------
  function el(tag, cls, text) {
    var node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }
  function num(x) { return x === null || x === undefined ? "—" : Number(x).toFixed(2); }
  function width(x) { return Math.max(0, Math.min(100, Math.round(Number(x || 0) * 100))); }
  function stage(key) { return document.getElementById("stage-" + key); }
  function part(key, selector) { return stage(key).querySelector(selector); }

  function bar(score, threshold) {
    var node = el("span", "bar");
    var below = threshold !== null && threshold !== undefined && score < threshold;
    if (below) node.classList.add("below");
    node.setAttribute("role", "img");
    node.setAttribute("aria-label", num(score) + (threshold != null ? " (threshold " + num(threshold) + ")" : ""));
    var fill = el("span", "fill");
    fill.style.width = width(score) + "%";
    node.appendChild(fill);
    if (threshold !== null && threshold !== undefined) {
      var mark = el("span", "mark");
      mark.style.left = width(threshold) + "%";
      node.appendChild(mark);
    }
    return node;
  }

  function progress(key, fraction, text, state) {
    var s = stage(key);
    if (state) s.dataset.state = state;
    var b = s.querySelector(".bar.progress");
    b.querySelector(".fill").style.width = width(fraction) + "%";
    b.setAttribute("aria-valuenow", String(width(fraction)));
    s.querySelector(".progress-text").textContent = text;
  }

  function setBadge(box, cls, text) {
    var badge = box.querySelector("header .badge");
    badge.className = "badge " + cls;
    badge.textContent = text;
  }

  function attemptTitle(key, n, max) {
    if (key === "retrieval") return "Search " + n;
    return "Attempt " + n + (max ? "/" + max : "");
  }

  function attemptBox(key, n, max) {
    var list = part(key, ".attempts");
    var box = list.querySelector('.attempt[data-attempt="' + n + '"]');
    if (box) return box;
    box = el("article", "attempt");
    box.dataset.attempt = String(n);
    var head = el("header");
    head.appendChild(el("h3", null, attemptTitle(key, n, max)));
    head.appendChild(el("span", "badge running", "evaluating…"));
    head.appendChild(el("span", "muted overall"));
    box.appendChild(head);
    list.appendChild(box);
    return box;
  }

  function scoreLine(key, overall, passed, note) {
    var line = part(key, ".score-line");
    line.hidden = false;
    line.querySelector(".stage-overall").textContent = num(overall);
    var mark = line.querySelector(".stage-mark");
    mark.className = "stage-mark" + (passed === true ? " ok" : passed === false ? " bad" : "");
    mark.textContent = passed === true ? "✓" : passed === false ? "✗" : "";
    line.querySelector(".stage-note").textContent = note || "";
  }

  function notice(key, cls) {
    var box = el("div", "notice " + cls);
    (key ? part(key, ".notices") : document.getElementById("run-notices")).appendChild(box);
    return box;
  }

  function runStatus(text, cls) {
    var badge = document.getElementById("run-status");
    badge.className = "badge " + cls;
    badge.textContent = text;
  }

  // -- the decision: [Proceed anyway] [Retry search] -------------------------------------
  // The latest severe-failure notice still open (a search made again gets a notice of its own).
  function severeNotice(key, fresh) {
    var all = stage(key).querySelectorAll('.notice.severe:not([data-closed="true"])');
    if (all.length && !fresh) return all[all.length - 1];
    var box = notice(key, "fail severe");
    box.appendChild(el("strong", null, "⚠ " + LABELS[key] + " Quality Warning"));
    var actions = el("div", "actions");
    var details = el("button", "secondary view-details", "View details");
    details.type = "button";
    details.addEventListener("click", function () { part(key, "details.disclosure").open = true; });
    actions.appendChild(details);
    box.appendChild(actions);
    return box;
  }

  // A decision names the question it answers (the seq of the event that asked it): a click
  // that arrives late never answers a later question the user has not seen.
  function sendDecision(box, choice, decision) {
    var buttons = box.querySelectorAll("button.choice");
    Array.prototype.forEach.call(buttons, function (b) { b.disabled = true; });
    var status = box.querySelector(".sent") || box.appendChild(el("p", "sent muted"));
    status.textContent = "Sending…";
    var headers = { "Content-Type": "application/json" };
    var token = document.getElementById("decision-token");
    if (token && token.value) headers.Authorization = "Bearer " + token.value;
    fetch(root.dataset.decision, { method: "POST", headers: headers, body: JSON.stringify({ decision: decision, choice: choice }) })
      .then(function (response) {
        return response.json().catch(function () { return {}; }).then(function (data) {
          if (!response.ok) {
            throw new Error(typeof data.detail === "string" ? data.detail : "HTTP " + response.status);
          }
          status.textContent = "Sent: " + CHOICES[choice] + ".";
        });
      })
      .catch(function (err) {
        status.textContent = "Not sent: " + err.message;
        Array.prototype.forEach.call(buttons, function (b) { b.disabled = false; });
      });
  }

  function stopCountdown() {
    if (countdown !== null) window.clearInterval(countdown);
    countdown = null;
  }

  function askDecision(d) {
    var box = severeNotice(d.stage, false);
    box.dataset.waiting = "true";
    if (!box.querySelector(".severe-lines")) box.insertBefore(el("div", "reason", d.reason), box.querySelector(".actions"));
    var actions = box.querySelector(".actions");
    d.options.forEach(function (choice) {
      var button = el("button", "choice choice-" + choice + (choice === d["default"] ? "" : " secondary"),
                      CHOICES[choice] || choice);
      button.type = "button";
      button.dataset.choice = choice;
      button.addEventListener("click", function () { sendDecision(box, choice, d.seq); });
      actions.appendChild(button);
    });
    var left = el("p", "countdown muted");
    box.appendChild(left);
    var deadline = Date.parse(d.at) + d.timeout_s * 1000;
    if (isNaN(deadline) || deadline - Date.now() > d.timeout_s * 1000) deadline = Date.now() + d.timeout_s * 1000;
    function tick() {
      var seconds = Math.max(0, Math.ceil((deadline - Date.now()) / 1000));
      left.textContent = (CHOICES[d["default"]] || d["default"]) + " in " + seconds + " s unless you choose.";
    }
    tick();
    stopCountdown();
    countdown = window.setInterval(tick, 1000);
    progress(d.stage, 1, "Waiting for a decision", "running");
  }

  function decided(d) {
    stopCountdown();
    var box = severeNotice(d.stage, false);
    box.dataset.waiting = "false";
    box.dataset.closed = "true";
    Array.prototype.forEach.call(box.querySelectorAll("button.choice, .countdown, .sent"), function (n) { n.remove(); });
    var choice = CHOICES[d.choice] || d.choice;
    box.appendChild(el("p", "decided", "Decision: " + choice + (d.by === "user" ? "." : " (the default: no choice in time).")));
    if (d.choice === "retry") progress(d.stage, 0.25, "Searching again", "running");
    else progress(d.stage, 1, "Done", "done");
  }

  // -- one handler per event type ---------------------------------------------------------
  var handlers = {
    started: function (d) {
      document.getElementById("user-query").textContent = d.query;
      runStatus("running", "neutral");
    },

    attempt: function (d) {
      var n = d.attempt;
      var text = d.stage === "plan" ? "Evaluating plan (" + n + "/" + d.max_attempts + ")"
        : d.stage === "retrieval" ? "Evaluating retrieval" + (n > 1 ? " (search " + n + ")" : "")
        : n > 1 ? "Evaluating the regenerated answer" : "Evaluating answer";
      var fraction = d.max_attempts ? (n - 0.5) / d.max_attempts : 0.5;
      progress(d.stage, fraction, text, "running");
      attemptBox(d.stage, n, d.max_attempts);
    },

    evaluation: function (d) {
      var box = attemptBox(d.stage, d.attempt, d.max_attempts);
      if (d.passed === true) setBadge(box, "pass", "✓ Passed");
      else if (d.passed === false) setBadge(box, "fail", "✗ Failed");
      else setBadge(box, "neutral", "scored");
      box.querySelector("header .overall").textContent = "overall " + num(d.overall);
      var dims = el("ul", "dims");
      d.dimensions.forEach(function (dim) {
        var li = el("li", dim.below ? "below" : null);
        li.appendChild(el("span", "dim-label", dim.label));
        li.appendChild(el("span", "dim-score", num(dim.score)));
        li.appendChild(bar(dim.score, dim.threshold));
        if (dim.threshold !== null && dim.threshold !== undefined) {
          li.appendChild(el("span", "muted", "(threshold " + num(dim.threshold) + ")"));
        }
        dims.appendChild(li);
      });
      box.appendChild(dims);
      if (d.failed_rules.length) box.appendChild(el("p", "muted", "Below threshold: " + d.failed_rules.join("; ")));
      d.critiques.forEach(function (c) {
        var quote = el("blockquote", "critique");
        quote.appendChild(el("span", "who", c.role + " · " + c.model));
        if (c.text) quote.appendChild(el("span", "text", c.text));
        if (c.error) quote.appendChild(el("span", "error", "Error: " + c.error));
        box.appendChild(quote);
      });
      if (d.escalated) box.appendChild(el("p", "muted", "Escalated to a stronger model."));
      scoreLine(d.stage, d.overall, d.passed, d.stage === "plan" ? "attempt " + d.attempt : "");
      var verdict = d.passed === true ? "passed" : d.passed === false ? "failed" : "scored";
      var text = d.stage === "plan" ? "Attempt " + d.attempt + "/" + d.max_attempts + " " + verdict
        : LABELS[d.stage] + " " + verdict;
      var fraction = d.max_attempts ? d.attempt / d.max_attempts : 0.9;
      progress(d.stage, d.passed ? 1 : fraction, text);
    },

    thinking: function (d) {
      var box = attemptBox(d.stage, d.attempt - 1, null);
      var decision = el("div", "decision");
      if (d.critique) {
        var p = el("p");
        p.appendChild(el("strong", null, "Critique: "));
        p.appendChild(document.createTextNode("“" + d.critique + "”"));
        decision.appendChild(p);
      }
      if (d.issues.length) {
        var ul = el("ul");
        d.issues.forEach(function (i) { ul.appendChild(el("li", null, i.issue + (i.fix ? " → " + i.fix : ""))); });
        decision.appendChild(ul);
      }
      var next = d.stage === "plan" ? "→ Iterating with " + (MODES[d.mode] || d.mode || "a new attempt") + "…"
        : "→ Regenerating the answer with the evaluation's feedback…";
      decision.appendChild(el("p", "next", next));
      box.appendChild(decision);
      progress(d.stage, d.stage === "plan" && d.max_attempts ? (d.attempt - 1) / d.max_attempts : 0.5,
               d.stage === "plan" ? "Re-planning (attempt " + d.attempt + ")" : "Regenerating the answer");
    },

    flagged: function (d) {
      var box = severeNotice(d.stage, true);
      var lines = el("div", "severe-lines");
      d.dimensions.forEach(function (dim) {
        lines.appendChild(el("div", null, dim.label + ": " + num(dim.score) + (dim.hint ? " - " + dim.hint.charAt(0).toUpperCase() + dim.hint.slice(1) : "")));
      });
      if (!d.dimensions.length) lines.appendChild(el("div", null, "Overall: " + num(d.overall)));
      box.insertBefore(lines, box.querySelector(".actions"));
    },

    decision: askDecision,
    decided: decided,

    skipped: function (d) {
      var box = notice(d.stage, "warn skipped");
      box.appendChild(el("strong", null, "⚠ " + LABELS[d.stage] + " evaluation skipped"));
      box.appendChild(el("div", null, "Research continued without quality validation"));
      var more = el("details", "error-details");
      more.appendChild(el("summary", null, "View error details"));
      more.appendChild(el("pre", null, d.reason));
      box.appendChild(more);
      if (d.attempt) setBadge(attemptBox(d.stage, d.attempt, null), "warn", "skipped");
    },

    stage_done: function (d) {
      if (d.skipped) {
        progress(d.stage, 1, "Skipped", "skipped");
        return;
      }
      var chosen = d.stage === "plan" && d.attempts > 1 ? "attempt " + d.chosen_attempt + " used" : "";
      scoreLine(d.stage, d.overall, d.passed, chosen);
      progress(d.stage, 1, d.passed === false ? "Done, below the pass mark" : "Done", "done");
      var final = part(d.stage, ".final");
      final.hidden = false;
      final.textContent = "Final " + STAGE_NAMES[d.stage] + " score: " + num(d.overall);
      d.warnings.forEach(function (w) {
        if (/quality warning/i.test(w) || part(d.stage, ".notices").textContent.indexOf(w) >= 0) return;
        notice(d.stage, "warn").textContent = w;
      });
    },

    done: function (d) {
      finished = true;
      stopCountdown();
      runStatus("done", "pass");
      var summary = document.getElementById("run-summary");
      summary.textContent = "Overall score " + num(d.overall_score) + (d.evaluation_skipped ? " (some evaluation skipped)" : "") + " · ";
      var link = el("a", null, "the stored record");
      link.href = root.dataset.record;
      summary.appendChild(link);
    },

    error: function (d) {
      finished = true;
      stopCountdown();
      runStatus("stopped", "fail");
      notice(null, "fail").textContent = "The research stopped: " + d.error_type + ": " + d.error;
    }
  };

  // -- the stream ------------------------------------------------------------------------
  var source = new EventSource(root.dataset.events);
  Object.keys(handlers).forEach(function (type) {
    source.addEventListener(type, function (message) {
      var data = JSON.parse(message.data);
      if (data.seq <= lastSeq) return;  // already shown (a reconnect resumes after the last one)
      lastSeq = data.seq;
      handlers[type](data);
      if (finished) source.close();
    });
  });
  source.addEventListener("open", function () {
    if (!finished) runStatus("running", "neutral");
  });
  source.addEventListener("error", function () {
    if (finished) return;
    if (source.readyState === EventSource.CLOSED) {
      runStatus("no longer live", "warn");
      var box = notice(null, "warn");
      box.appendChild(document.createTextNode("This run is no longer followed live. "));
      var link = el("a", null, "See its stored record");
      link.href = root.dataset.record;
      box.appendChild(link);
    } else {
      runStatus("reconnecting…", "warn");
    }
  });
})();
