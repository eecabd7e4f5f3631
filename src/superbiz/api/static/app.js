// superbiz web page: chat over SSE (fetch + ReadableStream, since EventSource cannot POST),
// answers as safe Markdown (markdown.js), the passage behind each citation, this browser's
// sessions, the governance trace of each turn, the knowledge map, documents, sources, gaps
// (feedback.js). No build step; every server string goes in as text or through Markdown.
"use strict";

const $ = (selector) => document.querySelector(selector);
const state = {
  sessionId: localStorage.getItem("superbiz.session") || newSessionId(),
  apiKey: localStorage.getItem("superbiz.apiKey") || "",
  info: { high_mark: 8, model: "?" },
  busy: false,
  controller: null,
  follow: true,
  // session id → its owner, as the last session list named them (admins: everyone's)
  owners: {},
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

// -- sessions ------------------------------------------------------------------------------
// Without an API key a session id is all that keeps a session private, so the list shows
// the sessions this browser started (remembered in localStorage); with a key, the key's.
const KNOWN = "superbiz.sessions";

function knownSessions() {
  try {
    const ids = JSON.parse(localStorage.getItem(KNOWN) || "[]");
    return Array.isArray(ids) ? ids.filter((id) => typeof id === "string") : [];
  } catch {
    return [];
  }
}

function remember(id) {
  const ids = [id, ...knownSessions().filter((known) => known !== id)].slice(0, 200);
  localStorage.setItem(KNOWN, JSON.stringify(ids));
}

function forget(id) {
  localStorage.setItem(KNOWN, JSON.stringify(knownSessions().filter((known) => known !== id)));
}

// Another person's session, which an admin reads and may not change: the page offers no
// asking, rating, renaming or deleting in it (the routes refuse them anyway).
function othersSession(id) {
  const owner = state.owners[id];
  return Boolean(owner && Auth.me && owner !== Auth.me.name);
}

function setSession(id) {
  state.sessionId = id;
  const readOnly = othersSession(id);
  $("#tab-chat").classList.toggle("read-only", readOnly);
  $("#ask-form").hidden = readOnly;
  $("#read-only-note").hidden = !readOnly;
  $("#read-only-note").textContent = readOnly ? t("readOnly", { owner: state.owners[id] }) : "";
  localStorage.setItem("superbiz.session", id);
  $("#session-id").textContent = id;
  for (const item of document.querySelectorAll("#session-list li[data-session]")) {
    item.classList.toggle("current", item.dataset.session === id);
    item.querySelector(".session-open")?.setAttribute("aria-current", item.dataset.session === id);
  }
}

async function loadSessions() {
  // signed in (a key, or the provider): the server lists the person's own sessions
  const mine = state.info.auth_required && Auth.me;
  const ids = knownSessions();
  let sessions = [];
  if (mine || ids.length) {
    const everyone = mine && Auth.can("all_sessions") && $("#all-sessions").checked;
    const query = everyone ? "?all=true" : mine ? "" : "?" + ids.map((id) => `id=${encodeURIComponent(id)}`).join("&");
    const response = await fetch(`/api/sessions${query}`, { headers: headers(false) });
    if (response.ok) sessions = (await response.json()).sessions;
  }
  for (const s of sessions) if (s.owner) state.owners[s.session_id] = s.owner;
  $("#session-list").replaceChildren(
    ...(sessions.length
      ? sessions.map(sessionItem)
      : [el("li", { class: "muted small", text: t("noSessions") })])
  );
  setSession(state.sessionId);
}

function sessionItem(session) {
  const open = el(
    "button",
    { type: "button", class: "session-open" },
    el("span", { class: "session-title", text: session.title || session.first_question || session.session_id }),
    el("time", { class: "session-time", dateTime: session.updated_at, text: new Date(session.updated_at).toLocaleString() })
  );
  open.addEventListener("click", () => openSession(session.session_id));
  const rename = el("button", { type: "button", class: "session-rename icon", text: "✎", title: t("rename") });
  rename.setAttribute("aria-label", `${t("rename")}: ${session.title || session.first_question}`);
  rename.addEventListener("click", () => startRename(item, session));
  const remove = el("button", { type: "button", class: "session-delete icon", text: "×", title: t("delete") });
  remove.setAttribute("aria-label", `${t("delete")}: ${session.title || session.first_question}`);
  remove.addEventListener("click", () => deleteSession(session.session_id));
  const item = othersSession(session.session_id)
    ? el("li", { "data-session": session.session_id }, open, el("span", { class: "session-owner muted small", text: session.owner }))
    : el("li", { "data-session": session.session_id }, open, rename, remove);
  return item;
}

function startRename(item, session) {
  const input = el("input", { type: "text", class: "rename-input", maxLength: 200, value: session.title || session.first_question || "" });
  input.setAttribute("aria-label", t("renameTo"));
  const save = el("button", { type: "button", class: "rename-save", text: t("save") });
  const form = el("form", { class: "rename-form" }, input, save);
  const submit = async (event) => {
    event.preventDefault();
    const response = await fetch(`/api/sessions/${encodeURIComponent(session.session_id)}`, {
      method: "PATCH",
      headers: headers(),
      body: JSON.stringify({ title: input.value.trim() || null }),
    });
    if (!response.ok) alert(await errorMessage(response));
    await loadSessions();
  };
  form.addEventListener("submit", submit);
  save.addEventListener("click", submit);
  input.addEventListener("keydown", (event) => {
    if (event.key === "Escape") loadSessions();
  });
  item.replaceChildren(form);
  input.focus();
  input.select();
}

async function deleteSession(id) {
  if (!confirm(t("confirmDelete"))) return;
  const response = await fetch(`/api/sessions/${encodeURIComponent(id)}`, {
    method: "DELETE",
    headers: headers(false),
  });
  if (!response.ok && response.status !== 404) {
    alert(await errorMessage(response));
    return;
  }
  forget(id);
  if (id === state.sessionId) {
    setSession(newSessionId());
    resetChat();
  }
  await loadSessions();
}

async function openSession(id) {
  if (state.busy) return;
  setSession(id);
  resetChat();
  showTab("chat");
  await loadHistory();
}

// The session's turns: each answer with its citations, and its trace from the record.
async function loadHistory() {
  const id = encodeURIComponent(state.sessionId);
  const [history, recorded] = await Promise.all([
    fetch(`/api/sessions/${id}`, { headers: headers(false) }),
    fetch(`/api/sessions/${id}/invocations`, { headers: headers(false) }),
  ]);
  if (!history.ok) return;
  const data = await history.json();
  state.recorded = recorded.ok ? (await recorded.json()).invocations : [];
  state.plans = {};
  let lastTurn = null;
  for (const message of data.messages) {
    if (message.role === "user") {
      addUserMessage(message.content);
      continue;
    }
    const bubble = addAssistantMessage();
    state.plans[message.turn] = message.plan;
    renderAnswer(bubble, {
      turn: message.turn,
      answer: message.content,
      citations: message.citations || [],
      related: message.related || [],
    });
    const trace = el("button", { type: "button", class: "show-trace link", text: t("showTrace") });
    trace.addEventListener("click", () => showRecordedTrace(message.turn));
    bubble.append(trace);
    bubble.dataset.state = "done";
    lastTurn = message.turn;
  }
  if (lastTurn !== null) showRecordedTrace(lastTurn);
  scrollDown(true);
}

// A recorded turn in the trace panel, as the live events drew it.
function showRecordedTrace(turn) {
  resetTrace();
  if (state.plans && state.plans[turn]) showPlan(state.plans[turn]);
  const calls = (state.recorded || []).filter((call) => call.turn === turn);
  calls.forEach((call, index) => {
    const details = call.retrieval_details || {};
    showLookupResult({
      ...call,
      call_id: `recorded-${call.id ?? index}`,
      calls: index + 1,
      high_mark: state.info.high_mark,
      retrieved_domains: details.retrieved_domains,
      completeness_hint: details.completeness_hint,
    });
  });
  $("#turn-summary").replaceChildren(el("div", { text: `Turn ${turn}: ${calls.length} recorded lookup(s)` }));
  for (const bubble of document.querySelectorAll(".message.assistant")) {
    bubble.classList.toggle("traced", Number(bubble.dataset.turn) === turn);
  }
}

function resetChat() {
  $("#messages").replaceChildren(el("div", { class: "empty-hint", id: "empty-hint", text: t("newHint") }));
  resetTrace();
}

// -- chat ------------------------------------------------------------------------------
// Follows the answer down only while the reader is at the bottom: reading above is not
// interrupted by the stream.
function nearBottom() {
  const box = $("#messages");
  return box.scrollHeight - box.scrollTop - box.clientHeight < 64;
}

function scrollDown(force = false) {
  const box = $("#messages");
  if (force || state.follow) box.scrollTop = box.scrollHeight;
}

function addUserMessage(text) {
  $("#empty-hint")?.remove();
  $("#messages").append(el("div", { class: "message user", text }));
  scrollDown(true);
}

function addAssistantMessage() {
  $("#empty-hint")?.remove();
  const bubble = el(
    "div",
    { class: "message assistant", "data-state": "streaming" },
    el("div", { class: "answer-text markdown" })
  );
  $("#messages").append(bubble);
  scrollDown(true);
  return bubble;
}

function renderAnswer(bubble, turn) {
  if (turn.turn) bubble.dataset.turn = turn.turn;
  // what the answer quotes, in quote order, then what it only lists as related
  const citations = turn.citations || [];
  const related = turn.related || [];
  bubble.citations = [...citations, ...related];
  bubble.querySelector(".answer-text").replaceChildren(Markdown.render(turn.answer || ""));
  for (const old of bubble.querySelectorAll(".citations, .meta, .thumbs")) old.remove();
  for (const [list, label, kind] of [
    [citations, t("sources_"), "citations"],
    [related, t("related_"), "citations related"],
  ]) {
    if (!list.length) continue;
    bubble.append(
      el(
        "ol",
        { class: kind, "aria-label": label, title: label },
        ...list.map((c) =>
          el(
            "li",
            { value: c.ref || undefined },
            el(
              "button",
              { type: "button", class: "citation link", "data-ref": c.ref },
              el("span", { class: "title", text: c.title }),
              " ",
              el("span", { class: "path", text: `${c.location || c.path} · ${c.domain}` })
            )
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
  if (turn.turn) bubble.append(Feedback.thumbs(state.sessionId, turn.turn));
}

// Whether the answer stands on the documents shown (checked citations), and who wrote it.
function groundingText(turn) {
  let text = turn.grounded ? t("grounded") : t("notGrounded");
  if (turn.answer_source === "no_evidence" && (turn.related || []).length) {
    text += ` · ${t("onlyRelated")}`;
  } else if (turn.answer_source && turn.answer_source !== "model") {
    text += ` · ${turn.answer_source.replace("_", " ")}`;
  }
  if (turn.invalid_citations) text += ` · ${turn.invalid_citations} invalid citation(s) removed`;
  return text;
}

// -- citations -------------------------------------------------------------------------------
// [n] or a source under an answer opens the passage the model was shown.
async function openPassage(bubble, ref) {
  const turn = bubble.dataset.turn;
  const citation = (bubble.citations || []).find((c) => String(c.ref) === String(ref));
  if (!turn || !citation) return;
  const response = await fetch(
    `/api/sessions/${encodeURIComponent(state.sessionId)}/turns/${turn}/citations/${ref}`,
    { headers: headers(false) }
  );
  const dialog = $("#passage");
  if (!response.ok) {
    $("#passage-title").textContent = citation.title;
    $("#passage-excerpt").replaceChildren(el("p", { class: "error", text: await errorMessage(response) }));
    $("#passage-link").hidden = true;
    dialog.showModal();
    return;
  }
  const passage = await response.json();
  $("#passage-title").textContent = `[${ref}] ${passage.title}`;
  const level = passage.relevance_level;
  $("#passage-level").textContent = level || t("levelUnknown");
  $("#passage-level").className = `badge level-${level || "NONE"}`;
  $("#passage-domain").textContent = passage.domain;
  $("#passage-path").textContent = passage.path;
  $("#passage-headings").textContent = (passage.heading_path || []).join(" › ");
  $("#passage-excerpt").replaceChildren(Markdown.render(passage.excerpt, { refs: false }));
  const web = [passage.url, citation.web_url, citation.url].find((u) => /^https?:\/\//i.test(u || ""));
  const link = $("#passage-link");
  link.href = web || passage.document_url;
  link.dataset.keyed = web || !state.apiKey ? "" : "1";
  link.hidden = false;
  dialog.showModal();
}

// With an API key the document's text is fetched with it (a plain link cannot send the
// key) and shown as text in a new tab.
async function openKeyedDocument(event) {
  const link = event.currentTarget;
  if (!link.dataset.keyed) return;
  event.preventDefault();
  const opened = window.open("", "_blank");
  const response = await fetch(link.href, { headers: headers(false) });
  const text = response.ok ? await response.text() : await errorMessage(response);
  const url = URL.createObjectURL(new Blob([text], { type: "text/plain;charset=utf-8" }));
  if (opened) {
    opened.opener = null;
    opened.location = url;
  }
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
  state.controller = new AbortController();
  $("#ask-button").hidden = true;
  $("#stop-button").hidden = false;
  addUserMessage(question);
  const bubble = addAssistantMessage();
  const text = bubble.querySelector(".answer-text");
  resetTrace();
  let draftStep = null;
  let draft = "";
  let frame = 0;
  // the draft is re-rendered at most once a frame; the reader's place is kept
  const drawDraft = () => {
    frame = 0;
    const follow = state.follow;
    text.replaceChildren(Markdown.render(draft, { refs: false }));
    state.follow = follow;
    scrollDown();
  };
  try {
    const response = await fetch("/api/chat_stream", {
      method: "POST",
      headers: headers(),
      body: JSON.stringify({ session_id: state.sessionId, question }),
      signal: state.controller.signal,
    });
    if (!response.ok) throw new Error(await errorMessage(response));
    remember(state.sessionId);
    await readEvents(response, (name, data) => {
      if (data.session_id && data.session_id !== state.sessionId) return;
      switch (name) {
        case "plan":
          showPlan(data);
          break;
        case "tool_call":
          draft = ""; // text of a step that called a tool was not the answer
          text.replaceChildren();
          addLookup(data);
          break;
        case "tool_result":
          showLookupResult(data);
          break;
        case "token":
          if (draftStep !== data.step) {
            draft = "";
            draftStep = data.step;
          }
          draft += data.text;
          if (!frame) frame = requestAnimationFrame(drawDraft);
          break;
        case "answer":
          if (frame) cancelAnimationFrame(frame);
          frame = -1; // no draft after the answer
          renderAnswer(bubble, data);
          showSummary(data);
          break;
        case "error":
          bubble.append(el("div", { class: "error", text: `${t("error")}: ${data.message}` }));
          break;
        case "done":
          bubble.dataset.state = "done";
          break;
      }
    });
  } catch (error) {
    const stopped = error.name === "AbortError";
    if (stopped && frame > 0) cancelAnimationFrame(frame);
    bubble.append(
      el("div", { class: stopped ? "stopped muted" : "error", text: stopped ? t("stopped") : `${t("error")}: ${error.message}` })
    );
  } finally {
    bubble.dataset.state = "done";
    state.busy = false;
    state.controller = null;
    $("#ask-button").hidden = false;
    $("#stop-button").hidden = true;
    scrollDown();
    loadSessions();
  }
}

// -- trace panel ---------------------------------------------------------------------------
function resetTrace() {
  $("#plan").replaceChildren(t("noPlan"));
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
  const label = el("div", {}, el("b", { text: t("plan") }), ` (${plan.source})`);
  if (!plan.need_retrieval) {
    const how = plan.direct_answer ? t("directAnswer") : t("fromEvidence");
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
  const status = r.error ? "error" : r.executed ? "executed" : "blocked";
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
        `Turn ${turn.turn}: ${executed} executed, ${blocked} blocked, ${turn.steps} steps` +
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
    const response = await fetch("/api/knowledge/map?format=yaml", { headers: headers(false) });
    $("#map-yaml-text").textContent = response.ok ? await response.text() : await errorMessage(response);
    return;
  }
  const response = await fetch("/api/knowledge/map", { headers: headers(false) });
  if (!response.ok) {
    $("#map").replaceChildren(el("div", { class: "error", text: await errorMessage(response) }));
    return;
  }
  const data = await response.json();
  const domains = data.available_knowledge_domains;
  if (!domains.length) {
    $("#map").replaceChildren(el("div", { class: "muted", text: t("emptyKb") }));
    return;
  }
  $("#map").replaceChildren(
    ...domains.map((d) =>
      el(
        "div",
        { class: "domain-card" },
        el("h3", { text: `${d.domain_id} (${d.document_count})` }),
        el("div", { text: d.description }),
        d.when_to_retrieve ? el("div", { class: "when", text: `${t("when")}: ${d.when_to_retrieve}` }) : null,
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
  const response = await fetch("/api/documents", { headers: headers(false) });
  if (!response.ok) return;
  const data = await response.json();
  $("#doc-rows").replaceChildren(
    ...data.documents.map((doc) => {
      const remove = Auth.can("delete_documents") ? el("button", { type: "button", text: t("delete") }) : null;
      remove?.setAttribute("aria-label", `${t("delete")}: ${doc.path}`);
      remove?.addEventListener("click", () => deleteDocument(doc.id));
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
  if (!confirm(`${t("delete")} ${id}?`)) return;
  const response = await fetch(`/api/documents/${id.split("/").map(encodeURIComponent).join("/")}`, {
    method: "DELETE",
    headers: headers(false),
  });
  setStatus(response.ok ? `${t("deleted")} ${id}` : await errorMessage(response), response.ok);
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
  setStatus(t("uploading"), true);
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

// -- sources ---------------------------------------------------------------------------------
// Each folder or Git repository and its last sync; a failed sync shows its error (the
// documents of the last good sync stay searchable). All text goes in as text.
async function loadSources() {
  const response = await fetch("/api/sources", { headers: headers(false) });
  if (!response.ok) return;
  const data = await response.json();
  $("#sources-schedule").textContent = data.sync_interval_s
    ? `Git sources sync every ${data.sync_interval_s} s`
    : "scheduled sync off (sources.sync-interval-s)";
  $("#source-rows").replaceChildren(
    ...data.sources.map((source) => {
      const where = `${source.location}${source.branch ? ` @ ${source.branch}` : ""}${
        source.subdir ? ` /${source.subdir}` : ""
      }`;
      const counts = Object.entries(source.counts || {})
        .map(([key, n]) => `${n} ${key}`)
        .join(", ");
      const state = source.error
        ? el("span", { class: "status fail", text: `error: ${source.error}` })
        : el("span", { class: "status ok", text: "ok" });
      return el(
        "tr",
        { "data-source": source.name },
        el("td", {}, source.name, el("span", { class: "path", text: `${source.kind}: ${where}` })),
        el("td", { text: (source.commit || "").slice(0, 12) }),
        el("td", { text: source.synced_at || "never" }),
        el("td", { text: counts }),
        el("td", {}, state)
      );
    })
  );
}

// -- wiring ---------------------------------------------------------------------------------
function showTab(name) {
  for (const button of document.querySelectorAll(".tab-button")) {
    const active = button.dataset.tab === name;
    button.classList.toggle("active", active);
    button.setAttribute("aria-selected", active);
  }
  for (const tab of document.querySelectorAll(".tab")) {
    tab.classList.toggle("active", tab.id === `tab-${name}`);
  }
  if (name === "map") loadMap();
  if (name === "docs") loadDocuments();
  if (name === "sources") loadSources();
  if (name === "gaps") Feedback.loadGaps();
  if (name === "audit") Auth.loadAudit();
}

function showModelBadge() {
  if (!state.info.model || state.info.model === "?") return;
  $("#model-badge").textContent = state.info.extractive ? t("extractive") : `${t("model")} ${state.info.model}`;
}

async function init() {
  applyLanguage(LANG);
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
  $("#stop-button").addEventListener("click", () => state.controller && state.controller.abort());
  $("#messages").addEventListener("scroll", () => (state.follow = nearBottom()), { passive: true });
  $("#messages").addEventListener("click", (event) => {
    const target = event.target.closest("button.ref, button.citation");
    const bubble = target && target.closest(".message.assistant");
    if (bubble) openPassage(bubble, target.dataset.ref);
  });
  $("#passage-close").addEventListener("click", () => $("#passage").close());
  $("#passage-link").addEventListener("click", openKeyedDocument);
  $("#new-session").addEventListener("click", () => {
    if (state.busy) return;
    setSession(newSessionId());
    resetChat();
    showTab("chat");
    $("#question").focus();
  });
  $("#lang").addEventListener("change", (event) => {
    localStorage.setItem("superbiz.lang", event.target.value);
    applyLanguage(event.target.value);
    showModelBadge();
    if (!$("#lookups").children.length) resetTrace();
    loadSessions();
  });
  $("#api-key").value = state.apiKey;
  $("#api-key").addEventListener("change", async (event) => {
    state.apiKey = event.target.value.trim();
    localStorage.setItem("superbiz.apiKey", state.apiKey);
    await Auth.load();
    Auth.apply();
    loadSessions();
  });
  $("#sign-out").addEventListener("click", Auth.signOut);
  $("#all-sessions").addEventListener("change", loadSessions);
  $("#refresh-audit").addEventListener("click", Auth.loadAudit);
  $("#refresh-map").addEventListener("click", loadMap);
  $("#map-yaml").addEventListener("change", loadMap);
  $("#upload-form").addEventListener("submit", upload);
  $("#refresh-sources").addEventListener("click", loadSources);
  $("#refresh-gaps").addEventListener("click", Feedback.loadGaps);

  try {
    const response = await fetch("/api/info");
    state.info = await response.json();
    showModelBadge();
    $("#api-key").hidden = !state.info.auth_required || state.info.sign_in === "oidc";
    // the file picker offers what the service ingests (ingest.extensions)
    $("#upload-file").accept = state.info.extensions.join(",");
  } catch {
    $("#model-badge").textContent = t("offline");
  }
  const status = await Auth.load().catch(() => 0);
  // a refused sign-in comes back as one word (/auth/callback); the page words it
  const refused = new URLSearchParams(location.search).get("sign_in_error");
  if (refused) history.replaceState(null, "", location.pathname);
  if (state.info.sign_in === "oidc" && status === 401) {
    const known = refused && /^[a-z_]+$/.test(refused) && I18N.en[`signInErr_${refused}`];
    Auth.showGate(refused ? (known ? t(`signInErr_${refused}`) : t("signInFailed")) : "");
    document.body.dataset.ready = "true";
    return;
  }
  Auth.apply();
  resetTrace();
  await Promise.all([loadHistory(), loadSessions()]);
  document.body.dataset.ready = "true";
}

init();
