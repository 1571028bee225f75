// minfer viz: the page. Plain JS, no dependencies (embedded in the binary, works offline).
// Data: /viz/graph (the prefill and decode graphs, docs/graph.md), /viz/events (live run
// events, docs/viz.md), /viz/trace?path= or a picked file (a MINFER_TRACE recording).
'use strict';

const $ = (sel) => document.querySelector(sel);
const el = (tag, attrs = {}, ...kids) => {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === 'class') e.className = v;
    else if (k === 'text') e.textContent = v;
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v);
  }
  for (const k of kids) if (k != null) e.append(k);
  return e;
};

const state = {
  graphs: null,        // {prefill, decode}: graph JSON documents
  phase: 'prefill',
  view: 'operators',
  expanded: new Set(), // open groups
  selected: null,      // node id
  stats: {prefill: new Map(), decode: new Map()},   // id -> last node event
  times: {prefill: new Map(), decode: new Map()},   // id -> total microseconds over steps
  steps: {prefill: 0, decode: 0},
  query: '',
  follow: true,        // live events switch the phase shown
  text: '',
};

// ---------------------------------------------------------------- graph helpers

function graph() { return state.graphs ? state.graphs[state.phase] : null; }
function nodeById(g, id) { return g.byId.get(id); }

function indexGraph(g) {
  g.byId = new Map(g.nodes.map((n) => [n.id, n]));
  g.consumers = new Map(g.nodes.map((n) => [n.id, []]));
  for (const n of g.nodes) for (const s of n.inputs || []) if (g.consumers.has(s)) g.consumers.get(s).push(n.id);
  // Groups: "start" before the first layer, "blk.N" per layer, "end" after. A copy to another
  // backend (a split boundary, "inp_embd#vulkan") sits with the node that reads it.
  const groups = [];
  const byKey = new Map();
  let seenLayer = false;
  for (const n of g.nodes) {
    const reader = n.op === 'copy' ? g.byId.get((g.consumers.get(n.id) || [])[0]) : null;
    const m = /^blk\.(\d+)\./.exec(reader ? reader.name : n.name);
    let key;
    if (m) { key = 'blk.' + m[1]; seenLayer = true; } else key = seenLayer ? 'end' : 'start';
    if (!byKey.has(key)) { const grp = {key, nodes: []}; byKey.set(key, grp); groups.push(grp); }
    byKey.get(key).nodes.push(n);
  }
  g.groups = groups;
  return g;
}

// What a fused op replaced (src/graph/fusion.cpp rules).
const kFusedFrom = {rms_norm_mul: 'rms_norm + mul', swiglu: 'silu + mul', geglu: 'gelu + mul'};
const fusedText = (n) => n.fused ? ' (fused: ' + (kFusedFrom[n.op] || 'fused') + ')' : '';

const fmtShape = (s) => '[' + s.filter((d, i) => i < 2 || d !== 1).join(', ') + ']';
const fmtNum = (v) => v == null ? '—' : Math.abs(v) >= 1e4 || (Math.abs(v) < 1e-3 && v !== 0) ? v.toExponential(3) : (+v).toFixed(4);
const fmtUs = (us) => us >= 1000 ? (us / 1000).toFixed(2) + ' ms' : us.toFixed(0) + ' µs';

// ---------------------------------------------------------------- URL state

function readUrl() {
  const p = new URLSearchParams(location.search);
  const v = p.get('view');
  if (['operators', 'pipeline', 'shapes'].includes(v)) state.view = v;
  const ph = p.get('phase');
  if (ph === 'prefill' || ph === 'decode') state.phase = ph;
  state.expandAll = p.get('expand') === 'all';
  return p;
}

function writeUrl() {
  const p = new URLSearchParams(location.search);
  p.set('view', state.view);
  p.set('phase', state.phase);
  history.replaceState(null, '', '?' + p.toString());
}

// ---------------------------------------------------------------- views

function render() {
  for (const b of document.querySelectorAll('[data-view]')) b.setAttribute('aria-pressed', String(b.dataset.view === state.view));
  for (const b of document.querySelectorAll('[data-phase]')) b.setAttribute('aria-pressed', String(b.dataset.phase === state.phase));
  const root = $('#view');
  root.replaceChildren();
  root.dataset.view = state.view;
  const g = graph();
  if (!g) { root.append(el('p', {class: 'hint', text: 'Loading the graph…'})); return; }
  if (state.view === 'operators') renderOperators(root, g);
  else if (state.view === 'pipeline') renderPipeline(root);
  else renderShapes(root, g);
}

function nodeBox(n) {
  const s = state.stats[state.phase].get(n.id);
  const box = el('div', {
    class: 'node op-' + n.op + (n.fused ? ' fused' : '') + (state.selected === n.id ? ' selected' : ''),
    'data-node-id': String(n.id), role: 'button', tabindex: '0',
    title: n.name + ' ' + n.op + ' ' + fmtShape(n.shape) + ' ' + n.dtype,
    onclick: () => select(n.id), onkeydown: (e) => { if (e.key === 'Enter') select(n.id); },
  },
  el('div', {class: 'op', text: n.op + (n.fused ? ' (fused)' : '')}),
  n.fused ? el('div', {class: 'name', text: 'from ' + (kFusedFrom[n.op] || '?')}) : null,
  el('div', {class: 'name', text: n.name}),
  el('div', {class: 'shape', text: fmtShape(n.shape) + ' ' + n.dtype + (n.backend ? ' · ' + n.backend : '')}),
  el('div', {class: 'live', text: s && s.stats ? '|x| ' + fmtNum(s.stats.absmean) : ''}));
  if (state.query) {
    const hit = (n.name + ' ' + n.op).toLowerCase().includes(state.query);
    box.classList.add(hit ? 'match' : 'dim');
  }
  return box;
}

function groupMatches(grp) {
  return state.query && grp.nodes.some((n) => (n.name + ' ' + n.op).toLowerCase().includes(state.query));
}

function renderOperators(root, g) {
  for (const grp of g.groups) {
    const open = state.expandAll || state.expanded.has(grp.key) || groupMatches(grp);
    const ops = {};
    for (const n of grp.nodes) ops[n.op] = (ops[n.op] || 0) + 1;
    const summary = grp.nodes.length + ' nodes: ' + Object.entries(ops).map(([k, v]) => v + ' ' + k).join(', ');
    const sec = el('section', {class: 'group' + (open ? ' open' : ''), 'data-group': grp.key},
      el('button', {type: 'button', class: 'group-head', 'aria-expanded': String(open), onclick: () => toggleGroup(grp.key)},
        el('span', {text: grp.key}), el('span', {class: 'summary', text: summary})));
    if (open) {
      const nodes = el('div', {class: 'nodes'});
      for (const n of grp.nodes) nodes.append(nodeBox(n));
      sec.append(nodes);
    }
    root.append(sec);
  }
}

function toggleGroup(key) {
  if (state.expandAll) { state.expandAll = false; for (const grp of graph().groups) state.expanded.add(grp.key); }
  if (state.expanded.has(key)) state.expanded.delete(key); else state.expanded.add(key);
  const p = new URLSearchParams(location.search); p.delete('expand'); history.replaceState(null, '', '?' + p.toString());
  render();
}

// The stage of a node, from its op and the GGUF-style name.
function stageOf(n) {
  const name = n.name;
  if (/^token_embd|^inp_/.test(name) || (n.op === 'get_rows' && !/^blk\./.test(name))) return 'Embedding';
  if (/^output_norm/.test(name)) return 'Final norm';
  if (/^output|^result_output/.test(name)) return 'Logits';
  if (/attn_norm/.test(name)) return 'Attention norm';
  if (/ffn_norm/.test(name)) return 'FFN norm';
  if (/ffn_/.test(name)) return 'FFN';
  if (/attn|cache_|kv_/.test(name)) return 'Attention';
  if (/l_out|ffn_inp/.test(name)) return 'Residual';
  return 'Other';
}
const kStages = ['Embedding', 'Attention norm', 'Attention', 'Residual', 'FFN norm', 'FFN', 'Final norm', 'Logits', 'Other'];

function timesBy(phase, keyOf) {
  const g = state.graphs[phase];
  const out = new Map();
  for (const [id, us] of state.times[phase]) {
    const n = g.byId.get(id);
    if (!n) continue;
    const k = keyOf(n);
    out.set(k, (out.get(k) || 0) + us);
  }
  return out;
}

function renderPipeline(root) {
  const n_layer = graph().groups.filter((grp) => grp.key.startsWith('blk.')).length;
  const stages = el('div', {class: 'stages'});
  const pre = timesBy('prefill', stageOf), dec = timesBy('decode', stageOf);
  const order = ['Embedding', `Layers × ${n_layer}: Attention norm`, 'Attention', 'Residual', 'FFN norm', 'FFN', 'Final norm', 'Logits'];
  for (const label of order) {
    const key = label.replace(/^Layers × \d+: /, '');
    stages.append(el('div', {class: 'stage', 'data-stage': key},
      el('div', {text: label}),
      el('div', {class: 't', text: `prefill ${fmtUs(pre.get(key) || 0)} · decode ${fmtUs((dec.get(key) || 0) / Math.max(1, state.steps.decode))}/step`})));
  }
  root.append(el('p', {class: 'hint', text: 'One forward pass, stage by stage; times measured in the last run (decode: mean per step).'}), stages);
  const wrap = el('div', {class: 'pipeline'});
  for (const phase of ['prefill', 'decode']) {
    const byOp = timesBy(phase, (n) => n.op);
    const steps = Math.max(1, state.steps[phase]);
    const rows = [...byOp.entries()].sort((a, b) => b[1] - a[1]);
    const total = rows.reduce((s, r) => s + r[1], 0) || 1;
    const t = el('table', {'data-phase-table': phase},
      el('caption', {text: `${phase}: ${state.steps[phase]} step(s), time per op type${phase === 'decode' ? ' (per step)' : ''}`}),
      el('tr', {}, el('th', {text: 'op'}), el('th', {text: 'time'}), el('th', {text: 'share'})));
    for (const [op, us] of rows) {
      t.append(el('tr', {'data-op': op}, el('td', {text: op}), el('td', {class: 'num', text: fmtUs(us / steps)}),
        el('td', {}, el('span', {class: 'bar', style: `width:${Math.round(100 * us / total)}px`}), ' ' + Math.round(100 * us / total) + '%')));
    }
    if (!rows.length) t.append(el('tr', {}, el('td', {colspan: '3', class: 'hint', text: 'Run a prompt (or open a trace) to measure.'})));
    wrap.append(t);
  }
  root.append(wrap);
}

function renderShapes(root, g) {
  const layer = g.groups.find((grp) => grp.key === 'blk.0');
  const n_tokens = g.params ? g.params.n_tokens : '?';
  const live = state.lastTokens && state.lastTokens[state.phase];
  root.append(el('h2', {text: `Shape flow through one layer (blk.0), ${state.phase}: graph for a batch of ${n_tokens} token(s)` +
    (live && live !== n_tokens ? ` (the last run's ${state.phase} had ${live}: the token dimension is that many)` : '')}));
  const list = el('ol', {class: 'shapes-list'});
  let prev = null;
  const items = layer ? layer.nodes.filter((n) => n.op !== 'weight') : [];
  for (const n of items) {
    const dims = fmtShape(n.shape);
    const src = (n.inputs || []).map((i) => g.byId.get(i)).filter((s) => s && s.op !== 'weight');
    const from = src.map((s) => fmtShape(s.shape)).join(' + ');
    list.append(el('li', {class: prev !== dims ? 'changed' : '', 'data-shape-of': n.name},
      el('span', {text: n.name}), el('span', {text: n.op}), el('span', {class: 'dims', text: (from ? from + ' → ' : '') + dims + ' ' + n.dtype})));
    prev = dims;
  }
  root.append(el('div', {class: 'shapes'}, list));
}

// ---------------------------------------------------------------- inspector

function select(id) {
  state.selected = id;
  for (const e of document.querySelectorAll('.node.selected')) e.classList.remove('selected');
  const box = document.querySelector(`[data-node-id="${id}"]`);
  if (box) box.classList.add('selected');
  renderInspector();
}

function link(g, id) {
  const n = g.byId.get(id);
  return el('a', {onclick: () => { const grp = g.groups.find((x) => x.nodes.includes(n)); if (grp) state.expanded.add(grp.key); render(); select(id); }},
    n ? `${n.name} (${n.op})` : '#' + id);
}

function sparkline(values) {
  const ns = 'http://www.w3.org/2000/svg';
  const svg = document.createElementNS(ns, 'svg');
  svg.setAttribute('class', 'spark');
  svg.setAttribute('viewBox', '0 0 100 40');
  svg.setAttribute('preserveAspectRatio', 'none');
  const vs = values.filter((v) => v != null);
  if (vs.length > 1) {
    const lo = Math.min(...vs), hi = Math.max(...vs), span = hi - lo || 1;
    const pts = values.map((v, i) => `${(100 * i / (values.length - 1)).toFixed(2)},${(40 - 38 * ((v ?? lo) - lo) / span - 1).toFixed(2)}`);
    const line = document.createElementNS(ns, 'polyline');
    line.setAttribute('points', pts.join(' '));
    line.setAttribute('fill', 'none');
    line.setAttribute('stroke', '#2d5bd7');
    line.setAttribute('stroke-width', '0.8');
    svg.append(line);
  }
  return svg;
}

function renderInspector() {
  const g = graph();
  const box = $('#inspector');
  box.replaceChildren();
  const n = g && state.selected != null ? g.byId.get(state.selected) : null;
  if (!n) { box.append(el('p', {class: 'hint', text: 'Click a node.'})); return; }
  const row = (k, v) => el('tr', {}, el('th', {text: k}), el('td', {}, v));
  const t = el('table', {'data-inspector-for': String(n.id)});
  t.append(row('name', n.name), row('op', n.op + fusedText(n)), row('id', String(n.id)),
    row('shape', el('span', {class: 'inspector-shape', text: fmtShape(n.shape)})), row('dtype', n.dtype),
    row('backend', n.backend || '—'));
  if (n.params && Object.keys(n.params).length) t.append(row("params", JSON.stringify(n.params)));
  const ins = el('div'); for (const i of n.inputs || []) ins.append(link(g, i), el('br'));
  const outs = el('div'); for (const i of g.consumers.get(n.id) || []) outs.append(link(g, i), el('br'));
  t.append(row('inputs', ins), row('outputs', outs));
  if (n.buffer) {
    const b = n.buffer;
    let text = `${b.kind}, ${b.size} bytes`;
    if (b.kind === 'arena') text += ` at offset ${b.offset}, live ${JSON.stringify(b.live)}`;
    const reuse = el('div', {text});
    if (b.root != null && b.root !== n.id) reuse.append(el('br'), 'storage of ', link(g, b.root), ' (view or in place)');
    else if (b.kind === 'arena') {
      const sharing = g.nodes.filter((m) => m.id !== n.id && m.buffer && m.buffer.kind === 'arena' && m.buffer.root === m.id &&
        m.backend === n.backend && m.buffer.offset < b.offset + b.size && b.offset < m.buffer.offset + m.buffer.size);
      if (sharing.length) { reuse.append(el('br'), 'reuses memory also used by: '); for (const m of sharing.slice(0, 6)) reuse.append(link(g, m.id), ' '); }
    }
    t.append(row('buffer', reuse));
  }
  const s = state.stats[state.phase].get(n.id);
  if (s && s.stats) {
    t.append(row('step', String(s.step)), row('min / max', `${fmtNum(s.stats.min)} / ${fmtNum(s.stats.max)}`),
      row('mean / |mean|', `${fmtNum(s.stats.mean)} / ${fmtNum(s.stats.absmean)}`), row('time', fmtUs(s.us)),
      row('values', el('div', {}, sparkline(s.values || []), el('span', {class: 'hint', text: `${(s.values || []).length} of ${s.n} (every ${s.stride})`}))));
  } else {
    t.append(row('live', el('span', {class: 'hint', text: 'no values yet: run a prompt'})));
  }
  box.append(t);
}

// ---------------------------------------------------------------- events (live and replay)

let renderPending = false;
function scheduleRender() {
  if (renderPending) return;
  renderPending = true;
  requestAnimationFrame(() => { renderPending = false; if (state.view !== 'operators') render(); renderInspector(); });
}

function light(id) {
  const box = document.querySelector(`[data-node-id="${id}"]`);
  if (!box) return;
  box.classList.add('lit');
  setTimeout(() => box.classList.remove('lit'), 250);
}

function onEvent(e) {
  switch (e.type) {
    case 'hello': break;
    case 'start':
      state.text = '';
      for (const ph of ['prefill', 'decode']) { state.stats[ph].clear(); state.times[ph].clear(); state.steps[ph] = 0; }
      $('#live-text').textContent = '';
      $('#status').textContent = 'running…';
      break;
    case 'step': {
      const ph = e.phase;
      state.steps[ph] += 1;
      state.curPhase = ph;
      state.lastTokens = state.lastTokens || {};
      state.lastTokens[ph] = e.n_tokens;
      if (state.follow && ph !== state.phase) { state.phase = ph; render(); }
      break;
    }
    case 'node': {
      const ph = e.step === 0 ? 'prefill' : 'decode';
      state.stats[ph].set(e.id, e);
      state.times[ph].set(e.id, (state.times[ph].get(e.id) || 0) + (e.us || 0));
      if (ph === state.phase) {
        light(e.id);
        const box = document.querySelector(`[data-node-id="${e.id}"] .live`);
        if (box && e.stats) box.textContent = '|x| ' + fmtNum(e.stats.absmean);
      }
      if (e.id === state.selected) scheduleRender();
      break;
    }
    case 'token': {
      state.text += e.text || '';
      $('#live-text').textContent = state.text;
      const t = el('table', {}, ...e.top.map(([id, piece, p]) => el('tr', {class: id === e.token ? 'chosen' : ''},
        el('td', {text: JSON.stringify(piece)}), el('td', {text: (100 * p).toFixed(1) + '%'}))));
      $('#top-tokens').replaceChildren(t);
      break;
    }
    case 'finish':
      state.text = e.text;
      $('#live-text').textContent = e.text;
      $('#status').textContent = `done: ${e.completion_tokens} tokens (${e.finish_reason})`;
      document.body.dataset.runState = 'finished';
      scheduleRender();
      break;
    case 'lagged':
      $('#status').textContent = `the page fell behind: ${e.dropped} events skipped`;
      break;
  }
}

function listen() {
  const es = new EventSource('/viz/events');
  es.onmessage = (m) => { try { onEvent(JSON.parse(m.data)); } catch (err) { console.error(err); } };
  es.onopen = () => { document.body.dataset.live = 'connected'; };
  es.onerror = () => { document.body.dataset.live = 'disconnected'; };
  return es;
}

async function run(ev) {
  ev.preventDefault();
  const body = {prompt: $('#prompt').value, max_tokens: +$('#max-tokens').value, temperature: +$('#temperature').value, seed: +$('#seed').value};
  $('#run').disabled = true;
  document.body.dataset.runState = 'running';
  $('#status').textContent = 'running…';
  try {
    const r = await fetch('/viz/run', {method: 'POST', headers: {'Content-Type': 'application/json'}, body: JSON.stringify(body)});
    const j = await r.json();
    if (!r.ok) { $('#status').textContent = 'error: ' + (j.error ? j.error.message : r.status); document.body.dataset.runState = 'error'; return; }
    state.text = j.text;
    $('#live-text').textContent = j.text;
    $('#status').textContent = `done: ${j.completion_tokens} tokens (${j.finish_reason})`;
    document.body.dataset.runState = 'finished';
    scheduleRender();
  } catch (err) {
    $('#status').textContent = 'error: ' + err.message;
    document.body.dataset.runState = 'error';
  } finally {
    $('#run').disabled = false;
  }
}

// A recorded trace: its graphs, then its events, replayed at a readable pace.
async function replay(trace) {
  if (trace.format !== 'minfer-trace') throw new Error('not a minfer trace');
  state.graphs = {prefill: indexGraph(trace.graphs.prefill), decode: indexGraph(trace.graphs.decode)};
  $('#model-name').textContent = trace.model + ' (trace)';
  render();
  document.body.dataset.runState = 'replaying';
  const events = trace.events || [];
  let i = 0;
  await new Promise((done) => {
    const tick = () => {
      const until = Math.min(events.length, i + 200);  // 200 events per frame
      for (; i < until; i++) { try { onEvent(events[i]); } catch (err) { console.error('bad trace event', i, err); } }
      if (i < events.length) requestAnimationFrame(tick); else done();
    };
    tick();
  });
  document.body.dataset.runState = 'finished';
  render();
}

// ---------------------------------------------------------------- start

async function main() {
  const params = readUrl();
  for (const b of document.querySelectorAll('[data-view]')) b.addEventListener('click', () => { state.view = b.dataset.view; writeUrl(); render(); });
  for (const b of document.querySelectorAll('[data-phase]')) b.addEventListener('click', () => { state.phase = b.dataset.phase; state.follow = false; writeUrl(); render(); renderInspector(); });
  $('#search').addEventListener('input', (e) => { state.query = e.target.value.trim().toLowerCase(); render(); });
  $('#expand-all').addEventListener('click', () => { state.expandAll = true; const p = new URLSearchParams(location.search); p.set('expand', 'all'); history.replaceState(null, '', '?' + p); render(); });
  $('#collapse-all').addEventListener('click', () => { state.expandAll = false; state.expanded.clear(); const p = new URLSearchParams(location.search); p.delete('expand'); history.replaceState(null, '', '?' + p); render(); });
  $('#run-form').addEventListener('submit', run);
  $('#trace-file').addEventListener('change', async (e) => {
    const f = e.target.files[0];
    if (f) { try { await replay(JSON.parse(await f.text())); } catch (err) { $('#status').textContent = 'cannot open trace: ' + err.message; } }
  });
  const tracePath = params.get('trace');
  try {
    if (tracePath) {
      const r = await fetch('/viz/trace?path=' + encodeURIComponent(tracePath));
      const j = await r.json();
      if (!r.ok) throw new Error(j.error ? j.error.message : r.status);
      await replay(j);
    } else {
      const r = await fetch('/viz/graph');
      const j = await r.json();
      state.graphs = {prefill: indexGraph(j.prefill), decode: indexGraph(j.decode)};
      $('#model-name').textContent = j.model;
      render();
      listen();
    }
    document.body.dataset.ready = 'true';
  } catch (err) {
    $('#view').replaceChildren(el('p', {class: 'error', text: 'cannot load: ' + err.message}));
    document.body.dataset.ready = 'error';
  }
  writeUrl();
}

main();
