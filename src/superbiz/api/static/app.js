// superbiz web page: chat over SSE (fetch + ReadableStream, since EventSource cannot POST),
// the governance trace of each turn, the knowledge map, documents. No build step.
"use strict";

const $ = (selector) => document.querySelector(selector);
const state = {
  sessionId: localStorage.getItem("superbiz.session") || newSessionId(),
  apiKey: localStorage.getItem("superbiz.apiKey") || "",
  info: { high_mark: 8, model: "?" },
  busy: false,
};

function newSessionId() {
  const random = crypto.getRandomValues(new Uint8Array(16));
  return "web-" + Array.from(random, (b) => b.toString(16).padStart(2, "0")).join("");
}

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = value;
    else if (key.startsWith("data-")) node.setAttribute(key, value);
    else node[key] = value;
  }
  for (const child of children) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function headers(json = true) {
  const h = {};
  if (json) h["Content-Type"] = "application/json";
  if (state.apiKey) h["X-API-Key"] = state.apiKey;
  return h;
}

async function errorMessage(response) {
  try {
    const body = await response.json();
    return body.message || body.detail || response.statusText;
  } catch {
    return `${response.status} ${response.statusText}`;
  }
}

// -- session -------------------------------------------------------------------------
function setSession(id) {
  state.sessionId = id;
  localStorage.setItem("superbiz.session", id);
  $("#session-id").textContent = id;
}

async function loadHistory() {
  const response = await fetch(`/api/sessions/${encodeURIComponent(state.sessionId)}`, {
    headers: headers(false),
  });
  if (!response.ok) return;
  const data = await response.json();
  for (const message of data.messages) {
    if (message.role === "user") addUserMessage(message.content);
    else {
      const bubble = addAssistantMessage();
      renderAnswer(bubble, { answer: message.content, citations: message.citations || [] });
      bubble.dataset.state = "done";
    }
  }
}

function resetChat() {
  $("#messages").replaceChildren(
    el("div", { class: "empty-hint", id: "empty-hint", text: "新会话 · New session" })
  );
  resetTrace();
}

// -- chat ------------------------------------------------------------------------------
function scrollDown() {
  const box = $("#messages");
  box.scrollTop = box.scrollHeight;
}

function addUserMessage(text) {
  $("#empty-hint")?.remove();
  $("#messages").append(el("div", { class: "message user", text }));
  scrollDown();
}

function addAssistantMessage() {
  $("#empty-hint")?.remove();
  const bubble = el(
    "div",
    { class: "message assistant", "data-state": "streaming" },
    el("div", { class: "answer-text" })
  );
  $("#messages").append(bubble);
  scrollDown();
  return bubble;
}

// Answer text with [n] citation markers set apart, built without innerHTML.
function answerNodes(text) {
  const nodes = [];
  let last = 0;
  for (const match of text.matchAll(/\[(\d+)\]/g)) {
    if (match.index > last) nodes.push(document.createTextNode(text.slice(last, match.index)));
    nodes.push(el("span", { class: "ref", text: match[0] }));
    last = match.index + match[0].length;
  }
  if (last < text.length) nodes.push(document.createTextNode(text.slice(last)));
  return nodes;
}

function renderAnswer(bubble, turn) {
  bubble.querySelector(".answer-text").replaceChildren(...answerNodes(turn.answer || ""));
  bubble.querySelector(".citations")?.remove();
  bubble.querySelector(".meta")?.remove();
  const citations = turn.citations || [];
  if (citations.length) {
    bubble.append(
      el(
        "ol",
        { class: "citations" },
        ...citations.map((c) =>
          el(
            "li",
            { value: c.ref || undefined },
            el("span", { class: "title", text: c.title }),
            " ",
            el("span", { class: "path", text: `${c.location || c.path} · ${c.domain}` })
          )
        )
      )
    );
  }
  if (turn.lookups) {
    const executed = turn.lookups.filter((l) => l.executed).length;
    const blocked = turn.lookups.filter((l) => !l.executed && !l.error).length;
    bubble.append(
      el("div", {
        class: "meta",
        text:
          `${turn.model || ""} · ${turn.steps} steps · ${executed} executed, ${blocked} blocked` +
          (turn.stopped_by === "step_cap" ? " · step cap reached" : "") +
          (turn.stopped_by === "malformed_calls" ? " · tool withdrawn (malformed calls)" : "") +
          ` · ${groundingText(turn)}`,
      })
    );
  }
}

// Whether the answer stands on the documents shown (checked citations), and who wrote it.
function groundingText(turn) {
  let text = turn.grounded ? "有据 grounded" : "无据 not grounded";
  if (turn.answer_source && turn.answer_source !== "model") {
    text += ` · ${turn.answer_source.replace("_", " ")}`;
  }
  if (turn.invalid_citations) text += ` · ${turn.invalid_citations} invalid citation(s) removed`;
  return text;
}

// Reads "event:" / "data:" blocks off a fetch body; calls onEvent(name, json) for each.
async function readEvents(response, onEvent) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder("utf-8");
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      let name = "message";
      const data = [];
      for (const line of block.split("\n")) {
        if (line.startsWith("event:")) name = line.slice(6).trim();
        else if (line.startsWith("data:")) data.push(line.slice(5).trimStart());
      }
      if (data.length) onEvent(name, JSON.parse(data.join("\n")));
    }
  }
}

async function ask(question) {
  state.busy = true;
  $("#ask-button").disabled = true;
  addUserMessage(question);
  const bubble = addAssistantMessage();
  const text = bubble.querySelector(".answer-text");
  resetTrace();
  let draftStep = null;
  try {
    const response = await fetch("/api/chat_stream", {
      method: "POST",
      headers: headers(),
      body: JSON.stringify({ session_id: state.sessionId, question }),
    });
    if (!response.ok) throw new Error(await errorMessage(response));
    await readEvents(response, (name, data) => {
      if (data.session_id && data.session_id !== state.sessionId) return;
      switch (name) {
        case "plan":
          showPlan(data);
          break;
        case "tool_call":
          text.textContent = ""; // text of a step that called a tool was not the answer
          addLookup(data);
          break;
        case "tool_result":
          showLookupResult(data);
          break;
        case "token":
          if (draftStep !== data.step) {
            text.textContent = "";
            draftStep = data.step;
          }
          text.append(data.text);
          scrollDown();
          break;
        case "answer":
          renderAnswer(bubble, data);
          showSummary(data);
          break;
        case "error":
          bubble.append(el("div", { class: "error", text: `错误 Error: ${data.message}` }));
          break;
        case "done":
          bubble.dataset.state = "done";
          break;
      }
    });
  } catch (error) {
    bubble.append(el("div", { class: "error", text: `错误 Error: ${error.message}` }));
  } finally {
    bubble.dataset.state = "done";
    state.busy = false;
    $("#ask-button").disabled = false;
    scrollDown();
  }
}

// -- trace panel ---------------------------------------------------------------------------
function resetTrace() {
  $("#plan").replaceChildren("尚无计划 No plan yet");
  $("#plan").className = "plan muted";
  $("#lookups").replaceChildren();
  $("#turn-summary").replaceChildren();
  setGauge(0, state.info.high_mark, "low");
}

// calls against the high mark; full at high water, which the evidence ceiling (enough
// planned lookups found documents) can reach before the calls do
function setGauge(calls, high, level) {
  $("#water-calls").textContent = `${calls}/${high}`;
  const levelNode = $("#water-level");
  levelNode.textContent = level;
  levelNode.className = `water water-${level}`;
  const fill = $("#gauge-fill");
  const share = level === "high" ? 100 : Math.min(100, (100 * calls) / Math.max(1, high));
  fill.style.width = `${share}%`;
  fill.className = `gauge-fill water-${level}`;
}

function showPlan(plan) {
  const box = $("#plan");
  box.className = "plan";
  const label = el("div", {}, el("b", { text: "计划 Plan" }), ` (${plan.source})`);
  if (!plan.need_retrieval) {
    const how = plan.direct_answer ? "直接回答 direct answer" : "用会话证据回答 answer from session evidence";
    box.replaceChildren(label, el("div", { text: how }));
    return;
  }
  box.replaceChildren(
    label,
    el(
      "div",
      {},
      ...plan.domains.map((d) => el("span", { class: "chip", title: d.sub_question, text: d.domain }))
    )
  );
}

function lookupItem(callId) {
  return document.querySelector(`#lookups li[data-call="${CSS.escape(callId)}"]`);
}

function addLookup(call) {
  if (lookupItem(call.call_id)) return;
  const item = el(
    "li",
    { class: "lookup pending", "data-call": call.call_id },
    el(
      "div",
      { class: "row" },
      el("span", { class: "query", text: call.arguments.query || "(no query)" }),
      el("span", { class: "badge level-PENDING", text: "…" })
    ),
    el("div", { class: "details", text: call.arguments.domain ? `domain ${call.arguments.domain}` : "" })
  );
  $("#lookups").append(item);
}

function showLookupResult(r) {
  let item = lookupItem(r.call_id);
  if (!item) {
    addLookup({ call_id: r.call_id, arguments: r.arguments || {} });
    item = lookupItem(r.call_id);
  }
  const level = r.error ? "ERROR" : r.relevance_level || "NONE";
  item.className = `lookup level-${level}${r.executed ? "" : " blocked"}`;
  item.dataset.level = level;
  const status = r.error ? "error" : r.executed ? "executed" : "blocked 拦截";
  const details = [
    el("div", {}, "domain ", el("b", { text: r.domain || "-" }), ` · ${status} · ${r.latency_ms} ms`),
  ];
  if (r.arguments && r.arguments.missing_dimension) {
    details.push(el("div", {}, "missing_dimension ", el("b", { text: r.arguments.missing_dimension })));
  }
  if (r.dedup_reason) details.push(el("div", {}, "dedup ", el("b", { class: "dedup", text: r.dedup_reason })));
  if (r.error) details.push(el("div", { class: "error", text: r.error }));
  if (r.primary) details.push(el("div", {}, "→ ", el("b", { text: r.primary.title }), ` (${r.primary.path})`));
  if (r.completeness_hint) details.push(el("div", { text: r.completeness_hint }));
  if (r.retrieved_domains && r.retrieved_domains.length) {
    details.push(el("div", { text: `retrieved this session: ${r.retrieved_domains.join(", ")}` }));
  }
  details.push(
    el(
      "div",
      {},
      "verdict ",
      el("span", { class: `verdict verdict-${r.verdict}`, text: r.verdict }),
      ` · water ${r.water_level} · ${r.calls}/${r.high_mark}`
    )
  );
  item.replaceChildren(
    el(
      "div",
      { class: "row" },
      el("span", { class: "query", text: (r.arguments && r.arguments.query) || r.query || "" }),
      el("span", { class: `badge level-${level}`, text: level })
    ),
    el("div", { class: "details" }, ...details)
  );
  setGauge(r.calls, r.high_mark, r.water_level);
}

function showSummary(turn) {
  const executed = turn.lookups.filter((l) => l.executed).length;
  const blocked = turn.lookups.filter((l) => !l.executed && !l.error).length;
  const last = turn.lookups[turn.lookups.length - 1];
  $("#turn-summary").replaceChildren(
    el("div", {
      text:
        `本轮 Turn ${turn.turn}: ${executed} executed, ${blocked} blocked, ${turn.steps} steps` +
        (last ? ` · final verdict ${last.verdict}` : " · no lookup needed"),
    })
  );
}

// -- knowledge map ---------------------------------------------------------------------------
async function loadMap() {
  const yaml = $("#map-yaml").checked;
  $("#map").hidden = yaml;
  $("#map-yaml-text").hidden = !yaml;
  if (yaml) {
    const response = await fetch("/api/knowledge/map?format=yaml");
    $("#map-yaml-text").textContent = response.ok ? await response.text() : await errorMessage(response);
    return;
  }
  const response = await fetch("/api/knowledge/map");
  if (!response.ok) {
    $("#map").replaceChildren(el("div", { class: "error", text: await errorMessage(response) }));
    return;
  }
  const data = await response.json();
  const domains = data.available_knowledge_domains;
  if (!domains.length) {
    $("#map").replaceChildren(el("div", { class: "muted", text: "知识库为空 The knowledge base is empty" }));
    return;
  }
  $("#map").replaceChildren(
    ...domains.map((d) =>
      el(
        "div",
        { class: "domain-card" },
        el("h3", { text: `${d.domain_id} (${d.document_count})` }),
        el("div", { text: d.description }),
        d.when_to_retrieve ? el("div", { class: "when", text: `何时检索 When: ${d.when_to_retrieve}` }) : null,
        el(
          "ul",
          {},
          ...(d.documents || []).map((doc) =>
            el(
              "li",
              {},
              doc.title,
              doc.covers && doc.covers.length
                ? el("span", { class: "covers", text: ` — ${doc.covers.join("、")}` })
                : null
            )
          )
        )
      )
    )
  );
}

// -- documents -------------------------------------------------------------------------------
function formatSize(bytes) {
  return bytes < 1024 ? `${bytes} B` : `${(bytes / 1024).toFixed(1)} KB`;
}

async function loadDocuments() {
  const response = await fetch("/api/documents");
  if (!response.ok) return;
  const data = await response.json();
  $("#doc-rows").replaceChildren(
    ...data.documents.map((doc) => {
      const remove = el("button", { type: "button", text: "删除 Delete" });
      remove.addEventListener("click", () => deleteDocument(doc.id));
      return el(
        "tr",
        { "data-path": doc.path },
        el(
          "td",
          {},
          doc.title,
          doc.uploaded ? el("span", { class: "uploaded", text: "uploaded" }) : null,
          el("span", { class: "path", text: doc.path })
        ),
        el("td", { text: doc.domain }),
        el("td", { text: doc.chunk_count }),
        el("td", { text: formatSize(doc.size_bytes) }),
        el("td", {}, remove)
      );
    })
  );
}

async function deleteDocument(id) {
  if (!confirm(`删除 Delete ${id}?`)) return;
  const response = await fetch(`/api/documents/${id.split("/").map(encodeURIComponent).join("/")}`, {
    method: "DELETE",
    headers: headers(false),
  });
  setStatus(response.ok ? `已删除 deleted ${id}` : await errorMessage(response), response.ok);
  await loadDocuments();
}

function setStatus(text, ok) {
  const status = $("#upload-status");
  status.textContent = text;
  status.className = `status ${ok ? "ok" : "fail"}`;
}

async function upload(event) {
  event.preventDefault();
  const file = $("#upload-file").files[0];
  if (!file) return;
  const form = new FormData();
  form.append("file", file);
  const domain = $("#upload-domain").value.trim();
  if (domain) form.append("domain", domain);
  $("#upload-button").disabled = true;
  setStatus("上传中 uploading…", true);
  try {
    const response = await fetch("/api/documents", { method: "POST", headers: headers(false), body: form });
    if (response.ok) {
      const data = await response.json();
      setStatus(`${data.status}: ${data.document.path} (${data.document.domain})`, true);
      $("#upload-form").reset();
    } else {
      setStatus(await errorMessage(response), false);
    }
  } finally {
    $("#upload-button").disabled = false;
  }
  await loadDocuments();
}

// -- wiring ---------------------------------------------------------------------------------
function showTab(name) {
  for (const button of document.querySelectorAll(".tab-button")) {
    button.classList.toggle("active", button.dataset.tab === name);
  }
  for (const tab of document.querySelectorAll(".tab")) {
    tab.classList.toggle("active", tab.id === `tab-${name}`);
  }
  if (name === "map") loadMap();
  if (name === "docs") loadDocuments();
}

async function init() {
  setSession(state.sessionId);
  for (const button of document.querySelectorAll(".tab-button")) {
    button.addEventListener("click", () => showTab(button.dataset.tab));
  }
  $("#ask-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const question = $("#question").value.trim();
    if (!question || state.busy) return;
    $("#question").value = "";
    ask(question);
  });
  $("#question").addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      $("#ask-form").requestSubmit();
    }
  });
  $("#new-session").addEventListener("click", () => {
    setSession(newSessionId());
    resetChat();
  });
  $("#clear-session").addEventListener("click", async () => {
    const response = await fetch("/api/chat/clear", {
      method: "POST",
      headers: headers(),
      body: JSON.stringify({ session_id: state.sessionId }),
    });
    if (response.ok) resetChat();
    else alert(await errorMessage(response));
  });
  $("#api-key").value = state.apiKey;
  $("#api-key").addEventListener("change", (event) => {
    state.apiKey = event.target.value.trim();
    localStorage.setItem("superbiz.apiKey", state.apiKey);
  });
  $("#refresh-map").addEventListener("click", loadMap);
  $("#map-yaml").addEventListener("change", loadMap);
  $("#upload-form").addEventListener("submit", upload);

  try {
    const response = await fetch("/api/info");
    state.info = await response.json();
    $("#model-badge").textContent = state.info.extractive
      ? "extractive 抽取式 (no LLM)"
      : `model ${state.info.model}`;
    $("#api-key").hidden = !state.info.auth_required;
    // the file picker offers what the service ingests (ingest.extensions)
    $("#upload-file").accept = state.info.extensions.join(",");
  } catch {
    $("#model-badge").textContent = "offline";
  }
  resetTrace();
  await loadHistory();
}

init();
