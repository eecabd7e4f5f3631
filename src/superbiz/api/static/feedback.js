// Feedback and gaps, against the routes of the knowledge-gaps issue:
//   POST /api/sessions/{session_id}/turns/{turn}/feedback  {"rating": "up"|"down", "comment": "…"}
//   GET  /api/gaps  → {questions, gaps, clusters: [{domain, count, examples, last_asked, …}]}
"use strict";

const Feedback = (() => {
  // Thumbs under an answer of `turn` in `sessionId`; a thumbs-down asks for a comment.
  function thumbs(sessionId, turn) {
    const box = el("div", { class: "thumbs" });
    const status = el("span", { class: "muted small", role: "status" });
    const comment = el("input", { type: "text", class: "comment", maxLength: 2000, hidden: true });
    comment.setAttribute("aria-label", t("comment"));
    comment.placeholder = t("comment");
    const send = el("button", { type: "button", class: "send-comment", hidden: true, text: t("send") });
    const up = el("button", { type: "button", class: "thumb-up", text: t("helpful") });
    const down = el("button", { type: "button", class: "thumb-down", text: t("notHelpful") });
    up.addEventListener("click", () => rate(sessionId, turn, "up", null, box, status));
    down.addEventListener("click", () => {
      rate(sessionId, turn, "down", null, box, status);
      comment.hidden = send.hidden = false;
      comment.focus();
    });
    send.addEventListener("click", () =>
      rate(sessionId, turn, "down", comment.value.trim() || null, box, status)
    );
    box.append(up, down, comment, send, status);
    return box;
  }

  async function rate(sessionId, turn, rating, comment, box, status) {
    const response = await fetch(
      `/api/sessions/${encodeURIComponent(sessionId)}/turns/${turn}/feedback`,
      { method: "POST", headers: headers(), body: JSON.stringify({ rating, comment }) }
    );
    if (!response.ok) {
      status.textContent = await errorMessage(response);
      return;
    }
    box.dataset.rating = rating;
    status.textContent = t("thanks");
  }

  async function loadGaps() {
    const response = await fetch("/api/gaps", { headers: headers(false) });
    const list = document.getElementById("gap-list");
    if (!response.ok) {
      list.replaceChildren(el("li", { class: "error", text: await errorMessage(response) }));
      return;
    }
    const report = await response.json();
    document.getElementById("gaps-summary").textContent = report.gaps
      ? t("gapsSummary", { gaps: report.gaps, questions: report.questions })
      : t("noGaps");
    list.replaceChildren(...(report.clusters || []).map(gapItem));
  }

  function gapItem(cluster) {
    const [first, ...others] = cluster.examples || [];
    return el(
      "li",
      { class: "gap" },
      el("div", { class: "gap-head" }, el("strong", { text: first || "?" }), " ",
        el("span", { class: "chip", text: cluster.domain || "-" })),
      el("div", {
        class: "muted small",
        text: [
          t("askedTimes", { count: cluster.count }),
          t("sessionsN", { n: cluster.sessions }),
          cluster.thumbs_down ? t("thumbsDown", { n: cluster.thumbs_down }) : "",
          cluster.last_asked ? `${t("lastAsked")} ${new Date(cluster.last_asked).toLocaleString()}` : "",
        ].filter(Boolean).join(" · "),
      }),
      others.length ? el("ul", { class: "small" }, ...others.map((q) => el("li", { text: q }))) : null,
      (cluster.closest_documents || []).length
        ? el("div", { class: "small" }, `${t("closest")}: `,
            (cluster.closest_documents || []).map((d) => d.title || d.path).join(", "))
        : null,
      ...(cluster.comments || []).map((c) => el("blockquote", { class: "small", text: c }))
    );
  }

  return { thumbs, loadGaps };
})();
