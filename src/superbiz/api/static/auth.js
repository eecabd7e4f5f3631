// Who is signed in and what the page offers them: the sign-in screen (auth.oidc), the
// name, role and sign-out in the top bar, controls hidden by role (data-needs="…", the
// capabilities of /api/me), and the admins' Audit tab (the trail and the people, each
// person's role changeable). The routes refuse what a role may not do whatever the page shows.
"use strict";

const Auth = (() => {
  let me = null;

  // Without sign-in configured (/api/me answers as the local user) everything is offered.
  function can(capability) {
    return !me || me.can.includes(capability);
  }

  async function load() {
    const response = await fetch("/api/me", { headers: headers(false) });
    me = response.ok ? await response.json() : null;
    return response.status;
  }

  function apply() {
    for (const node of document.querySelectorAll("[data-needs]")) {
      node.hidden = !can(node.dataset.needs);
    }
    const signedIn = me && me.via === "sign_in";
    $("#who").hidden = !me || me.via === "local";
    $("#who-name").textContent = me ? me.name : "";
    $("#who-role").textContent = me ? me.role : "";
    $("#who-role").dataset.role = me ? me.role : "";
    $("#sign-out").hidden = !signedIn;
  }

  function showGate(message) {
    $("#sign-in").hidden = false;
    $("#app").hidden = true;
    const next = location.pathname + location.search;
    $("#sign-in-link").href = `/auth/login?next=${encodeURIComponent(next)}`;
    $("#sign-in-error").textContent = message || "";
    $("#sign-in-error").hidden = !message;
  }

  async function signOut() {
    const response = await fetch("/auth/logout", { method: "POST" });
    const body = response.ok ? await response.json() : {};
    localStorage.removeItem("superbiz.session");
    if (body.end_session_url) location.assign(body.end_session_url);
    else location.reload();
  }

  // -- the admins' Audit tab ---------------------------------------------------------------
  async function loadAudit() {
    const [events, people] = await Promise.all([
      fetch("/api/audit?limit=200", { headers: headers(false) }),
      fetch("/api/users", { headers: headers(false) }),
    ]);
    if (events.ok) {
      const data = await events.json();
      $("#audit-rows").replaceChildren(...data.events.map(eventRow));
    }
    if (people.ok) {
      const data = await people.json();
      $("#people-rows").replaceChildren(...data.users.map(personRow));
    }
  }

  function eventRow(event) {
    const detail = Object.entries(event.detail || {})
      .map(([key, value]) => `${key}: ${Array.isArray(value) ? value.join(", ") : value}`)
      .join("; ");
    return el(
      "tr",
      { "data-action": event.action },
      el("td", {}, el("time", { dateTime: event.at, text: new Date(event.at).toLocaleString() })),
      el("td", { text: event.actor }),
      el("td", { text: event.action }),
      el("td", { class: "path", text: event.target || "" }),
      el("td", { text: detail }),
      el("td", { text: event.address || "" })
    );
  }

  function personRow(person) {
    const select = el("select", {});
    select.setAttribute("aria-label", `${t("role")}: ${person.name}`);
    for (const role of ["reader", "editor", "admin"]) {
      select.append(el("option", { value: role, text: role, selected: role === person.assigned_role }));
    }
    const status = el("span", { class: "status", role: "status" });
    select.addEventListener("change", async () => {
      const response = await fetch(`/api/users/${encodeURIComponent(person.name)}`, {
        method: "PATCH",
        headers: headers(),
        body: JSON.stringify({ role: select.value }),
      });
      status.textContent = response.ok ? t("roleSaved") : await errorMessage(response);
    });
    return el(
      "tr",
      { "data-person": person.name },
      el("td", { text: person.name }),
      el("td", {}, select, person.role !== person.assigned_role ? ` → ${person.role}` : "", status),
      el("td", { text: person.groups.join(", ") }),
      el("td", {
        text: person.last_seen_at ? new Date(person.last_seen_at).toLocaleString() : t("never"),
      })
    );
  }

  return { load, apply, can, showGate, signOut, loadAudit, get me() { return me; } };
})();
