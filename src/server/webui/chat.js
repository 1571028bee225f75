// minfer's chat page: conversations kept in this browser (localStorage), replies streamed from
// POST /v1/chat/completions, rendered as Markdown (code blocks, lists, links) with HTML escaped,
// a Stop button that aborts the request (the server frees the slot when the stream closes).
// No dependencies, nothing fetched from elsewhere: it works offline.
"use strict";

const STORE = "minfer.chat.v1";
const SETTINGS = "minfer.chat.settings.v1";
const $ = (id) => document.getElementById(id);

// ---- state ----
function load(key, fallback) {
  try {
    const v = JSON.parse(localStorage.getItem(key));
    return v ?? fallback;
  } catch {
    return fallback;
  }
}
let state = load(STORE, { conversations: [], current: null });
let settings = load(SETTINGS, { system: "", temperature: "", maxTokens: "", apiKey: "" });
let controller = null;  // the request being streamed

function save() { localStorage.setItem(STORE, JSON.stringify(state)); }
function saveSettings() { localStorage.setItem(SETTINGS, JSON.stringify(settings)); }
function current() { return state.conversations.find((c) => c.id === state.current) || null; }
function newConversation() {
  const c = { id: Date.now().toString(36) + Math.random().toString(36).slice(2, 7), title: "New chat", messages: [], updated: Date.now() };
  state.conversations.unshift(c);
  state.current = c.id;
  save();
  return c;
}

// ---- Markdown (a safe subset: everything is escaped first) ----
function escapeHtml(s) {
  return s.replace(/[&<>"']/g, (ch) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[ch]));
}
function inline(s) {  // s is escaped already
  const codes = [];
  s = s.replace(/`([^`\n]+)`/g, (_, c) => { codes.push(c); return "\u0000" + (codes.length - 1) + "\u0000"; });
  s = s.replace(/\[([^\]\n]+)\]\((https?:\/\/[^\s)]+)\)/g, '<a href="$2" target="_blank" rel="noopener noreferrer">$1</a>');
  s = s.replace(/\*\*([^*\n]+)\*\*/g, "<strong>$1</strong>");
  s = s.replace(/(^|[^*\w])\*([^*\n]+)\*(?!\w)/g, "$1<em>$2</em>");
  s = s.replace(/(^|[^_\w])_([^_\n]+)_(?!\w)/g, "$1<em>$2</em>");
  return s.replace(/\u0000(\d+)\u0000/g, (_, i) => "<code>" + codes[Number(i)] + "</code>");
}
function blocks(text) {  // Markdown outside code fences
  const out = [];
  const lines = escapeHtml(text).split("\n");
  let para = [], list = null;
  const flushPara = () => { if (para.length) out.push("<p>" + inline(para.join("<br>")) + "</p>"); para = []; };
  const flushList = () => { if (list) out.push(`<${list.tag}>` + list.items.map((i) => "<li>" + inline(i) + "</li>").join("") + `</${list.tag}>`); list = null; };
  for (const line of lines) {
    let m;
    if (!line.trim()) { flushPara(); flushList(); continue; }
    if ((m = line.match(/^(#{1,6})\s+(.*)$/))) { flushPara(); flushList(); out.push(`<h${m[1].length}>${inline(m[2])}</h${m[1].length}>`); continue; }
    if ((m = line.match(/^\s*[-*+]\s+(.*)$/)) || (m = line.match(/^\s*\d+[.)]\s+(.*)$/))) {
      const tag = /^\s*\d/.test(line) ? "ol" : "ul";
      flushPara();
      if (!list || list.tag !== tag) { flushList(); list = { tag, items: [] }; }
      list.items.push(m[1]);
      continue;
    }
    if ((m = line.match(/^&gt;\s?(.*)$/))) { flushPara(); flushList(); out.push("<blockquote>" + inline(m[1]) + "</blockquote>"); continue; }
    flushList();
    para.push(line);
  }
  flushPara(); flushList();
  return out.join("");
}
function renderMarkdown(text) {
  const parts = [];
  const fence = /```([\w+#.-]*)[^\n]*\n?([\s\S]*?)(?:```|$)/g;
  let last = 0, m;
  while ((m = fence.exec(text)) !== null) {
    if (m.index > last) parts.push(blocks(text.slice(last, m.index)));
    const lang = m[1] ? ` class="language-${escapeHtml(m[1])}"` : "";
    parts.push(`<pre><button class="copy" type="button">copy</button><code${lang}>${escapeHtml(m[2])}</code></pre>`);
    last = fence.lastIndex;
    if (m[0].length === 0) break;
  }
  if (last < text.length) parts.push(blocks(text.slice(last)));
  return parts.join("");
}

// ---- view ----
function renderList() {
  const ul = $("conversations");
  ul.textContent = "";
  for (const c of state.conversations) {
    const li = document.createElement("li");
    li.dataset.id = c.id;
    if (c.id === state.current) li.classList.add("active");
    const t = document.createElement("span");
    t.className = "title";
    t.textContent = c.title;
    const del = document.createElement("button");
    del.className = "delete";
    del.type = "button";
    del.title = "Delete this conversation";
    del.textContent = "×";
    del.addEventListener("click", (e) => {
      e.stopPropagation();
      state.conversations = state.conversations.filter((x) => x.id !== c.id);
      if (state.current === c.id) state.current = state.conversations[0]?.id ?? null;
      save();
      render();
    });
    li.append(t, del);
    li.addEventListener("click", () => { if (!controller) { state.current = c.id; save(); render(); } });
    ul.append(li);
  }
}
function messageElement(m) {
  const div = document.createElement("div");
  div.className = "message " + m.role;
  if (m.role === "user") {
    div.textContent = m.content;
    return div;
  }
  if (m.reasoning) {
    const d = document.createElement("details");
    d.className = "thinking";
    const s = document.createElement("summary");
    s.textContent = "Thinking";
    const body = document.createElement("div");
    body.textContent = m.reasoning;
    d.append(s, body);
    div.append(d);
  }
  const body = document.createElement("div");
  body.className = "content";
  body.innerHTML = renderMarkdown(m.content || "");
  div.append(body);
  return div;
}
function renderMessages() {
  const box = $("messages");
  box.textContent = "";
  const c = current();
  if (c) for (const m of c.messages) box.append(messageElement(m));
  box.scrollTop = box.scrollHeight;
}
function render() { renderList(); renderMessages(); }
function showError(text) {
  const e = $("error");
  e.textContent = text;
  e.hidden = !text;
}
function busy(on) {
  $("send").disabled = on;
  $("stop").hidden = !on;
}

// ---- talking to the server ----
function headers() {
  const h = { "Content-Type": "application/json" };
  if (settings.apiKey) h.Authorization = "Bearer " + settings.apiKey;
  return h;
}
async function errorText(res) {
  try {
    const j = await res.json();
    return (j.error && j.error.message) || JSON.stringify(j);
  } catch {
    return res.statusText;
  }
}
async function send(text) {
  showError("");
  const c = current() || newConversation();
  c.messages.push({ role: "user", content: text });
  if (c.title === "New chat") c.title = text.slice(0, 40) || "New chat";
  const reply = { role: "assistant", content: "", reasoning: "" };
  c.messages.push(reply);
  c.updated = Date.now();
  save();
  render();
  let el = $("messages").lastElementChild;
  el.classList.add("streaming");
  const body = { messages: [], stream: true };
  if (settings.temperature !== "") body.temperature = Number(settings.temperature);  // else the server's default
  if (settings.system) body.messages.push({ role: "system", content: settings.system });
  for (const m of c.messages.slice(0, -1)) body.messages.push({ role: m.role, content: m.content });
  if (settings.maxTokens) body.max_tokens = Number(settings.maxTokens);
  controller = new AbortController();
  busy(true);
  let timings = null;
  try {
    const res = await fetch("v1/chat/completions", { method: "POST", headers: headers(), body: JSON.stringify(body), signal: controller.signal });
    if (!res.ok) throw new Error(res.status === 401 ? "The server needs an API key: set it under Settings." : await errorText(res));
    const reader = res.body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      let nl;
      while ((nl = buffer.indexOf("\n")) >= 0) {
        const line = buffer.slice(0, nl).trim();
        buffer = buffer.slice(nl + 1);
        if (!line.startsWith("data: ")) continue;
        const data = line.slice(6);
        if (data === "[DONE]") continue;
        const chunk = JSON.parse(data);
        if (chunk.error) throw new Error(chunk.error.message);
        if (chunk.timings) timings = chunk.timings;
        const delta = chunk.choices && chunk.choices[0] && chunk.choices[0].delta;
        if (!delta) continue;
        if (delta.reasoning_content) reply.reasoning += delta.reasoning_content;
        if (delta.content) reply.content += delta.content;
        el.replaceWith(Object.assign(messageElement(reply), { className: "message assistant streaming" }));
        el = $("messages").lastElementChild;
        $("messages").scrollTop = $("messages").scrollHeight;
      }
    }
  } catch (e) {
    if (e.name === "AbortError") reply.stopped = true;
    else showError(e.message);
  } finally {
    controller = null;
    busy(false);
    save();
    render();
    if (timings) {
      const tps = timings.predicted_per_second ? timings.predicted_per_second.toFixed(1) + " tok/s" : "";
      $("stats").textContent = `${timings.predicted_n} tokens ${tps}` + (reply.stopped ? " (stopped)" : "");
    } else if (reply.stopped) {
      $("stats").textContent = "stopped";
    }
  }
}

// ---- wiring ----
$("composer").addEventListener("submit", (e) => {
  e.preventDefault();
  const text = $("input").value.trim();
  if (!text || controller) return;
  $("input").value = "";
  send(text);
});
$("input").addEventListener("keydown", (e) => {
  if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
    e.preventDefault();
    $("composer").requestSubmit();
  }
});
$("stop").addEventListener("click", () => { if (controller) controller.abort(); });
$("new-chat").addEventListener("click", () => { if (!controller) { newConversation(); render(); $("input").focus(); } });
$("messages").addEventListener("click", (e) => {
  if (!e.target.classList.contains("copy")) return;
  navigator.clipboard?.writeText(e.target.nextElementSibling.textContent);
  e.target.textContent = "copied";
});
for (const [id, key] of [["system", "system"], ["temperature", "temperature"], ["max-tokens", "maxTokens"], ["api-key", "apiKey"]]) {
  $(id).value = settings[key] ?? "";
  $(id).addEventListener("change", () => { settings[key] = $(id).value; saveSettings(); });
}
fetch("v1/models", { headers: headers() })
  .then((r) => (r.ok ? r.json() : null))
  .then((j) => { $("model").textContent = j && j.data && j.data[0] ? "model: " + j.data[0].id : "model: (needs the API key)"; })
  .catch(() => { $("model").textContent = "server unreachable"; });
render();
