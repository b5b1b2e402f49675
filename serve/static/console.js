// Engram memory console: calls the /memory/v1/* routes with fetch(), nothing else.
// The API key lives in this page's memory only (never a cookie, never storage, never a URL) and
// travels in the Authorization header, so a cross-site form cannot act with it. Memory content is
// only ever put into the page as text (textContent), never parsed as HTML.
"use strict";

(() => {
  const API = "/memory/v1/";
  const NO_RELEVANT_MEMORY = 20001;
  const UNAUTHENTICATED = 40101;

  const state = {
    key: "",
    user: "",
    authRequired: false,
    view: "memories",
    returnView: "memories",
    listCursors: [null],
    changeCursors: [null],
  };

  const $ = (id) => document.getElementById(id);

  class ApiError extends Error {
    constructor(code, msg, traceId) {
      super(msg);
      this.code = code;
      this.traceId = traceId;
    }
  }

  // --- the API -------------------------------------------------------------------------------

  function headers() {
    const sent = { "Content-Type": "application/json" };
    if (state.key) sent.Authorization = "Bearer " + state.key;
    return sent;
  }

  async function post(route, body) {
    try {
      return await fetch(API + route, {
        method: "POST",
        headers: headers(),
        body: JSON.stringify(body),
        credentials: "omit",
        cache: "no-store",
        referrerPolicy: "no-referrer",
      });
    } catch (_) {
      throw new ApiError(0, "the service cannot be reached", "");
    }
  }

  async function envelopeOf(response) {
    try {
      return await response.json();
    } catch (_) {
      throw new ApiError(response.status, "unexpected answer (HTTP " + response.status + ")", "");
    }
  }

  // The envelope's data; 20001 (nothing relevant) is an answer, every other non-zero code throws.
  async function call(route, body) {
    const payload = await envelopeOf(await post(route, body));
    if (payload.code !== 0 && payload.code !== NO_RELEVANT_MEMORY) {
      throw new ApiError(payload.code, payload.msg, payload.trace_id);
    }
    return payload.data;
  }

  // --- small helpers -------------------------------------------------------------------------

  function el(tag, props, ...children) {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(props || {})) {
      if (name === "class") node.className = value;
      else if (name === "onclick") node.addEventListener("click", value);
      else if (name.startsWith("data-")) node.setAttribute(name, value);
      else node[name] = value;
    }
    for (const child of children) {
      if (child === null || child === undefined) continue;
      node.append(child instanceof Node ? child : String(child));
    }
    return node;
  }

  function when(iso) {
    if (!iso) return "";
    const date = new Date(iso);
    return Number.isNaN(date.getTime()) ? iso : date.toISOString().slice(0, 16).replace("T", " ") + "Z";
  }

  const number = (value) => (typeof value === "number" ? value.toFixed(2) : "");
  const optional = (value) => (value === "" ? null : value);
  const scopeOf = (m) => [m.level, m.app_id || "global", m.session_id].filter(Boolean).join(" · ");
  const typeOf = (m) => m.ownership + " " + m.mem_type;

  function validity(m) {
    return when(m.valid_at) + " → " + (m.invalid_at ? when(m.invalid_at) : "now");
  }

  function tags(list) {
    return el("span", { class: "tags" }, ...(list || []).map((t) => el("span", { class: "tag" }, t)));
  }

  function show(message, kind) {
    const status = $("status");
    status.textContent = message;
    status.className = kind || "";
  }

  function showError(error) {
    if (!(error instanceof ApiError)) {
      show("the console failed: " + error.message, "error");
      return;
    }
    if (error.code === UNAUTHENTICATED) askForKey();
    const trace = error.traceId ? " (trace " + error.traceId + ")" : "";
    show("Refused: " + error.code + " " + error.message + trace, "error");
  }

  // Runs an action, showing what it did or why it was refused.
  async function attempt(action, done) {
    try {
      await action();
      if (done) show(done, "ok");
    } catch (error) {
      showError(error);
    }
  }

  function askForKey() {
    state.authRequired = true;
    $("key-field").hidden = false;
    $("auth-note").textContent =
      "This service needs an API key: an admin key reaches any user, a console key its own user only.";
  }

  // --- views ---------------------------------------------------------------------------------

  function switchTo(view) {
    state.view = view;
    for (const section of document.querySelectorAll(".view")) {
      section.hidden = section.id !== "view-" + view;
    }
    for (const tab of document.querySelectorAll(".tab")) {
      tab.classList.toggle("active", tab.dataset.view === view);
    }
  }

  function fill(tbody, rows, empty, columns) {
    tbody.replaceChildren(
      ...(rows.length ? rows : [el("tr", {}, el("td", { colSpan: columns, class: "note" }, empty))])
    );
  }

  // --- memories ------------------------------------------------------------------------------

  function listFilters() {
    return {
      user_id: state.user,
      level: optional($("list-level").value),
      app_id: optional($("list-app").value.trim()),
      session_id: optional($("list-session").value.trim()),
      mem_type: optional($("list-type").value),
      status: optional($("list-status").value),
      limit: Number($("list-limit").value) || 25,
    };
  }

  function memoryRow(m) {
    return el(
      "tr",
      {
        "data-memory-id": m.memory_id,
        class: "memory status-" + m.status.toLowerCase(),
        title: "source: " + m.source_type + ", trust " + m.trust,
      },
      el("td", { class: "content" }, m.content === null ? el("em", {}, "(content purged)") : m.content),
      el("td", {}, scopeOf(m)),
      el("td", {}, typeOf(m)),
      el("td", { class: "num weight" }, number(m.weight)),
      el("td", { class: "important" }, m.is_important ? "★ yes" : "no"),
      el("td", {}, m.status),
      el("td", { class: "validity" }, validity(m)),
      el("td", {}, tags(m.custom_tags)),
      el("td", { class: "date" }, when(m.created_at)),
      el(
        "td",
        { class: "actions" },
        el("button", { type: "button", class: "edit", onclick: () => editMemory(m) }, "Edit"),
        el("button", { type: "button", class: "history", onclick: () => openHistory(m.memory_id) }, "History"),
        el("button", { type: "button", class: "delete danger", onclick: () => deleteMemory(m) }, "Delete")
      )
    );
  }

  async function loadList(page) {
    const cursor = state.listCursors[page] || null;
    const data = await call("user/list", { ...listFilters(), cursor });
    state.listCursors = state.listCursors.slice(0, page + 1);
    if (data.next_cursor) state.listCursors.push(data.next_cursor);
    state.listPage = page;
    fill($("memory-table").tBodies[0], data.memories.map(memoryRow), "No memories in this dimension.", 10);
    $("list-next").disabled = !data.next_cursor;
    $("list-first").disabled = page === 0;
    $("list-page").textContent = "page " + (page + 1) + ", " + data.memories.length + " shown";
  }

  function reloadList() {
    return loadList(state.listPage || 0);
  }

  function editMemory(m) {
    $("edit-content").value = m.content || "";
    $("edit-important").checked = m.is_important;
    $("edit-tags").value = (m.custom_tags || []).join(", ");
    const dialog = $("edit-dialog");
    $("edit-form").onsubmit = (event) => {
      event.preventDefault();
      const content = $("edit-content").value;
      const body = {
        user_id: state.user,
        memory_id: m.memory_id,
        is_important: $("edit-important").checked,
        custom_tags: $("edit-tags").value.split(",").map((t) => t.trim()).filter(Boolean),
      };
      // Content is sent only when it changed: a content change re-embeds the memory.
      if (content !== (m.content || "")) body.content = content;
      attempt(async () => {
        await call("update", body);
        dialog.close();
        await refreshCurrent();
      }, "Memory updated.");
    };
    dialog.showModal();
  }

  function deleteMemory(m) {
    confirmThen("Delete this memory? It leaves recall at once.", false, () =>
      attempt(async () => {
        await call("delete", { user_id: state.user, memory_id: m.memory_id });
        await refreshCurrent();
      }, "Memory deleted.")
    );
  }

  // --- search --------------------------------------------------------------------------------

  function searchRow(m) {
    return el(
      "tr",
      { "data-memory-id": m.memory_id, class: "hit" },
      el("td", { class: "content" }, m.content),
      el("td", { class: "num relevance" }, number(m.relevance)),
      el("td", { class: "num weight" }, number(m.weight)),
      el("td", { class: "num score" }, number(m.score)),
      el("td", {}, m.level),
      el("td", {}, typeOf(m)),
      el("td", { class: "validity" }, validity(m)),
      el("td", {}, tags(m.custom_tags)),
      el(
        "td",
        { class: "actions" },
        el("button", { type: "button", class: "history", onclick: () => openHistory(m.memory_id) }, "History")
      )
    );
  }

  async function search() {
    const data = await call("recall", {
      user_id: state.user,
      query: $("search-query").value,
      scope: {
        include_global: $("search-global").checked,
        app_id: optional($("search-app").value.trim()),
        session_id: optional($("search-session").value.trim()),
      },
      include_archived: $("search-archived").checked,
      top_k: Number($("search-top-k").value) || 10,
      min_relevance: Number($("search-min").value),
      explain: $("search-explain").checked,
    });
    fill($("search-table").tBodies[0], data.memories.map(searchRow), "No relevant memory.", 9);
    showExplanation(data.explanation || null);
  }

  // A signal's share of the relevance, "value × weight" beside it; "absent" when it had no value.
  function share(signals, name) {
    const s = signals.find((x) => x.signal === name);
    if (!s || s.value === null) return "absent";
    return number(s.contribution) + " (" + number(s.value) + " × " + number(s.weight) + ")";
  }

  function explainedRow(e) {
    return el(
      "tr",
      { "data-memory-id": e.memory_id },
      el("td", { class: "memory-id" }, e.memory_id),
      el("td", { class: "num relevance" }, number(e.relevance)),
      el("td", { class: "semantic" }, share(e.signals, "semantic")),
      el("td", { class: "lexical" }, share(e.signals, "lexical")),
      el("td", { class: "entity" }, share(e.signals, "entity")),
      el("td", { class: "num trust" }, e.trust === null ? "" : number(e.trust))
    );
  }

  function leftOutRow(e) {
    const detail = e.superseded_by ? "by " + e.superseded_by : e.detail || "";
    return el(
      "tr",
      { "data-memory-id": e.memory_id, "data-reason": e.reason },
      el("td", { class: "memory-id" }, e.memory_id),
      el("td", { class: "num relevance" }, number(e.relevance)),
      el("td", { class: "reason" }, e.reason.replaceAll("_", " ")),
      el("td", { class: "detail" }, detail),
      el("td", {}, e.at ? when(e.at) : "")
    );
  }

  function showExplanation(explanation) {
    $("search-explanation").hidden = explanation === null;
    if (explanation === null) return;
    fill($("explain-results").tBodies[0], explanation.results.map(explainedRow), "No result.", 6);
    fill($("explain-left-out").tBodies[0], explanation.left_out.map(leftOutRow), "Nothing left out.", 5);
  }

  // --- history -------------------------------------------------------------------------------

  function field(name, value) {
    return el("div", { class: "field" }, el("span", { class: "label" }, name), el("span", {}, value));
  }

  function change(c) {
    const before = c.content_before === null ? null : el("div", { class: "before" }, "before: ", c.content_before);
    const after = c.content_after === null ? null : el("div", { class: "after" }, "after: ", c.content_after);
    return el(
      "li",
      { class: "change op-" + c.op_type.toLowerCase(), "data-op": c.op_type },
      el("span", { class: "badge" }, c.op_type),
      el("time", {}, when(c.op_time)),
      el("span", { class: "note" }, " by " + c.op_source + (c.reason ? " — " + c.reason : "")),
      before,
      after,
      c.sanitized ? el("div", { class: "note" }, "content removed (purged)") : null
    );
  }

  function version(d, index) {
    const m = d.memory;
    const head = el(
      "li",
      { class: "version", "data-memory-id": m.memory_id },
      el("strong", {}, index === 0 ? "This memory" : "Superseded by"),
      el("span", { class: "note" }, " " + m.memory_id + " · " + m.status + " · valid " + validity(m)),
      index === 0 ? null : el("div", { class: "after" }, m.content === null ? "(content purged)" : m.content)
    );
    return [head, ...d.changes.map(change)];
  }

  // The memory, its changes, and the chain of memories that superseded it (newest last).
  async function openHistory(memoryId) {
    await attempt(async () => {
      const chain = [await call("history", { user_id: state.user, memory_id: memoryId })];
      for (let next = chain[0].memory.superseded_by; next && chain.length < 20; ) {
        const d = await call("history", { user_id: state.user, memory_id: next });
        chain.push(d);
        next = d.memory.superseded_by;
      }
      const m = chain[0].memory;
      if (state.view !== "history") state.returnView = state.view;
      $("history-memory").replaceChildren(
        el("p", { class: "content" }, m.content === null ? el("em", {}, "(content purged)") : m.content),
        field("Memory", m.memory_id),
        field("Scope", scopeOf(m)),
        field("Type", typeOf(m)),
        field("Status", m.status),
        field("Weight", number(m.weight)),
        field("Important", m.is_important ? "yes" : "no"),
        field("Valid", validity(m)),
        field("Tags", tags(m.custom_tags)),
        field("Source", [m.source_session_id, m.source_msg_id].filter(Boolean).join(" / ") || "—"),
        field("Recalled", m.recall_count + " times" + (m.last_recalled_at ? ", last " + when(m.last_recalled_at) : "")),
        m.superseded_by ? field("Superseded by", m.superseded_by) : null
      );
      $("timeline").replaceChildren(...chain.flatMap(version));
      switchTo("history");
    });
  }

  // --- change log ----------------------------------------------------------------------------

  function changeRow(c) {
    return el(
      "tr",
      { "data-op": c.op_type },
      el("td", { class: "date" }, when(c.op_time)),
      el("td", {}, el("span", { class: "badge op-" + c.op_type.toLowerCase() }, c.op_type)),
      el("td", {}, c.op_source),
      el("td", {}, el("button", { type: "button", class: "link", onclick: () => openHistory(c.memory_id) }, c.memory_id.slice(0, 8) + "…")),
      el("td", {}, c.app_id || "global"),
      el("td", {}, c.reason),
      el("td", { class: "content" }, c.content_before === null ? "" : c.content_before),
      el("td", { class: "content" }, c.content_after === null ? "" : c.content_after)
    );
  }

  async function loadChanges(page) {
    const data = await call("change_log", {
      user_id: state.user,
      app_id: optional($("changes-app").value.trim()),
      op_type: optional($("changes-op").value),
      cursor: state.changeCursors[page] || null,
      limit: 50,
    });
    state.changeCursors = state.changeCursors.slice(0, page + 1);
    if (data.next_cursor) state.changeCursors.push(data.next_cursor);
    fill($("change-table").tBodies[0], data.changes.map(changeRow), "No change in this range.", 8);
    $("changes-next").disabled = !data.next_cursor;
    $("changes-first").disabled = page === 0;
  }

  // --- profile (L7) --------------------------------------------------------------------------

  const PROFILE_SECTIONS = ["identity", "preferences", "relationships", "routines", "plans"];

  async function loadProfile() {
    const app = $("profile-app").value.trim();
    const profile = await call("profile", app ? { user_id: state.user, app_id: app } : { user_id: state.user });
    $("profile-refreshed").textContent = "Refreshed " + when(profile.refreshed_at) + ".";
    const sections = PROFILE_SECTIONS.map((name) =>
      el(
        "div",
        { class: "card", "data-section": name },
        el("h3", {}, name),
        profile[name].length
          ? el("ul", {}, ...profile[name].map((f) => el("li", {}, f.content)))
          : el("p", { class: "note" }, "nothing yet")
      )
    );
    $("profile-sections").replaceChildren(...sections);
  }

  // --- switches, export, purge ---------------------------------------------------------------

  function showSwitches(s) {
    $("switch-global").textContent = s.enabled ? "on" : "off";
    $("switch-global").className = s.enabled ? "on" : "off";
    const rows = Object.entries(s.apps).map(([app, on]) =>
      el(
        "tr",
        { "data-app": app },
        el("td", {}, app),
        el("td", { class: on ? "on" : "off" }, on ? "on" : "off"),
        el("td", {}, el("button", { type: "button", onclick: () => setSwitch(app, !on) }, on ? "Turn off" : "Turn on"))
      )
    );
    fill($("switch-table").tBodies[0], rows, "Every app is on (none was ever switched).", 3);
  }

  async function loadSwitches() {
    showSwitches(await call("user/switch", { user_id: state.user }));
  }

  function setSwitch(app, enabled) {
    const what = (app ? "App " + app : "Memory") + " switched " + (enabled ? "on." : "off.");
    return attempt(async () => {
      showSwitches(await call("user/switch", { user_id: state.user, app_id: app, enabled }));
    }, what);
  }

  const pause = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

  async function exportUser() {
    const status = $("export-status");
    const accepted = await call("user/export", { user_id: state.user });
    status.textContent = "export running…";
    let task = { status: "PENDING" };
    for (let i = 0; i < 240 && (task.status === "PENDING" || task.status === "RUNNING"); i++) {
      await pause(500);
      task = await call("task", { task_id: accepted.task_id });
    }
    if (task.status !== "DONE") throw new ApiError(0, "the export did not finish: " + (task.error || task.status), "");
    const response = await post("user/export/download", { user_id: state.user, task_id: accepted.task_id });
    if (!response.ok) {
      const payload = await envelopeOf(response);
      throw new ApiError(payload.code, payload.msg, payload.trace_id);
    }
    const url = URL.createObjectURL(await response.blob());
    const link = el("a", { href: url, download: "engram-export.jsonl" });
    document.body.append(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(url), 60000);
    status.textContent = "export downloaded";
  }

  function purge() {
    const app = optional($("purge-app").value.trim());
    const level = optional($("purge-level").value);
    const scope = app || level ? "the " + [app && "app " + app, level && level + " level"].filter(Boolean).join(", ") + " memories" : "EVERY memory";
    confirmThen("Purge " + scope + " of this user for good? This cannot be undone.", true, () =>
      attempt(async () => {
        const result = await call("user/purge", { user_id: state.user, app_id: app, level });
        await reloadList();
        show("Purged " + result.purged + " memories" + (result.shredded ? "; the data key was destroyed." : "."), "ok");
      })
    );
  }

  // --- confirmation --------------------------------------------------------------------------

  function confirmThen(text, typeUser, action) {
    const dialog = $("confirm-dialog");
    $("confirm-text").textContent = text;
    $("confirm-typed-field").hidden = !typeUser;
    $("confirm-typed").value = "";
    $("confirm-form").onsubmit = (event) => {
      event.preventDefault();
      if (typeUser && $("confirm-typed").value !== state.user) {
        $("confirm-typed").setCustomValidity("type the user id exactly");
        $("confirm-typed").reportValidity();
        return;
      }
      dialog.close();
      action();
    };
    $("confirm-typed").oninput = () => $("confirm-typed").setCustomValidity("");
    dialog.showModal();
  }

  // --- quarantine (held for review) ------------------------------------------------------------

  function heldRow(m) {
    const decide = (route, done) =>
      attempt(async () => {
        await call(route, { user_id: state.user, memory_ids: [m.memory_id] });
        await loadQuarantine();
      }, done);
    return el(
      "tr",
      { "data-memory-id": m.memory_id, class: "held" },
      el("td", { class: "content" }, m.content === null ? el("em", {}, "(content purged)") : m.content),
      el("td", { class: "source" }, m.source_type + " (" + m.trust + ")"),
      el("td", { class: "reason" }, m.reason),
      el("td", {}, scopeOf(m)),
      el("td", { class: "date" }, when(m.created_at)),
      el(
        "td",
        { class: "actions" },
        el(
          "button",
          { type: "button", class: "release", onclick: () => decide("quarantine/release", "Memory released.") },
          "Release"
        ),
        el(
          "button",
          {
            type: "button",
            class: "delete danger",
            onclick: () =>
              confirmThen("Delete this held memory? It is never recalled.", false, () =>
                decide("quarantine/delete", "Held memory deleted.")
              ),
          },
          "Delete"
        )
      )
    );
  }

  async function loadQuarantine() {
    const data = await call("quarantine/list", { user_id: state.user, limit: 500 });
    fill($("quarantine-table").tBodies[0], data.memories.map(heldRow), "Nothing held for review.", 6);
  }

  // --- wiring --------------------------------------------------------------------------------

  async function refreshCurrent() {
    if (state.view === "history") {
      await reloadList();
      switchTo(state.returnView);
    } else if (state.view === "search") await search();
    else await reloadList();
  }

  // Nothing of the user shown before stays on the page while another one is opened.
  function closeUser() {
    $("tabs").hidden = true;
    for (const section of document.querySelectorAll(".view")) section.hidden = true;
    for (const body of document.querySelectorAll("tbody")) body.replaceChildren();
    $("timeline").replaceChildren();
    $("history-memory").replaceChildren();
    $("profile-sections").replaceChildren();
    $("profile-refreshed").textContent = "";
    $("export-status").textContent = "";
  }

  async function openUser() {
    closeUser();
    state.key = $("api-key").value.trim();
    state.user = $("user-id").value.trim();
    state.listCursors = [null];
    state.changeCursors = [null];
    await loadList(0);
    $("tabs").hidden = false;
    $("current-user").textContent = "user " + state.user;
    switchTo("memories");
    show("Showing user " + state.user + ".", "ok");
    // The switches need an admin key; an answer without them still shows the memories.
    const switches = await call("user/switch", { user_id: state.user }).catch(() => null);
    if (switches) showSwitches(switches);
  }

  function onSubmit(id, action) {
    $(id).addEventListener("submit", (event) => {
      event.preventDefault();
      attempt(action);
    });
  }

  function onClick(id, action) {
    $(id).addEventListener("click", () => attempt(action));
  }

  // Whether keys are configured: with keys, a request without one is refused (40101) before its
  // body is read; without keys this empty task lookup is just a bad parameter (40001).
  async function probeAuth() {
    const payload = await envelopeOf(await post("task", {}));
    if (payload.code === UNAUTHENTICATED) askForKey();
    else $("auth-note").textContent = "Authentication is off: this service answers on the loopback address only.";
  }

  function start() {
    $("edit-cancel").addEventListener("click", () => $("edit-dialog").close());
    $("confirm-no").addEventListener("click", () => $("confirm-dialog").close());
    // One open at a time: answers for a user opened before must never land beside another's.
    onSubmit("open-form", async () => {
      show("", "");
      $("open-user").disabled = true;
      try {
        await openUser();
      } finally {
        $("open-user").disabled = false;
      }
    });
    onSubmit("list-form", () => loadList(0));
    onClick("list-first", () => loadList(0));
    onClick("list-next", () => loadList(state.listPage + 1));
    onSubmit("search-form", search);
    onSubmit("changes-form", () => loadChanges(0));
    onClick("changes-first", () => loadChanges(0));
    onClick("changes-next", () => loadChanges(state.changeCursors.length - 1));
    $("history-back").addEventListener("click", () => switchTo(state.returnView));
    $("switch-global-on").addEventListener("click", () => setSwitch(null, true));
    $("switch-global-off").addEventListener("click", () => setSwitch(null, false));
    $("switch-app-form").addEventListener("submit", (event) => event.preventDefault());
    for (const [id, enabled] of [["switch-app-on", true], ["switch-app-off", false]]) {
      $(id).addEventListener("click", () => {
        const app = $("switch-app").value.trim();
        if (app) setSwitch(app, enabled);
      });
    }
    onClick("export-start", exportUser);
    onClick("quarantine-reload", loadQuarantine);
    onSubmit("profile-form", loadProfile);
    $("purge-form").addEventListener("submit", (event) => {
      event.preventDefault();
      purge();
    });
    for (const tab of document.querySelectorAll(".tab")) {
      tab.addEventListener("click", () => {
        switchTo(tab.dataset.view);
        if (tab.dataset.view === "changes") attempt(() => loadChanges(0));
        if (tab.dataset.view === "privacy") attempt(loadSwitches);
        if (tab.dataset.view === "quarantine") attempt(loadQuarantine);
        if (tab.dataset.view === "profile") attempt(loadProfile);
      });
    }
    attempt(probeAuth);
  }

  start();
})();
