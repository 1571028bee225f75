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
  g.byName = new Map(g.nodes.map((n) => [n.name, n]));
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

// The stage of a node, from its op and the GGUF-style name.
function stageOf(n) {
  const name = n.name;
  if (n.op === 'input') return 'Input';
  if (/^token_embd|^inp_/.test(name) || (n.op === 'get_rows' && !/^blk\./.test(name))) return 'Embedding';
  if (/^output_norm/.test(name)) return 'Final norm';
  if (/^output|^result_output/.test(name)) return 'Logits';
  if (/attn_norm/.test(name)) return 'Attention norm';
  if (/ffn_norm/.test(name)) return 'FFN norm';
  if (/ffn_inp/.test(name)) return 'Residual (attention)';
  if (/l_out/.test(name)) return 'Residual (FFN)';
  if (/ffn_/.test(name)) return 'FFN';
  if (/attn|cache_|kv_/.test(name)) return 'Attention';
  return 'Other';
}
// One forward pass: the stages in order, the inner list repeated for each layer.
const kFlow = ['Input', 'Embedding', ['Attention norm', 'Attention', 'Residual (attention)', 'FFN norm', 'FFN', 'Residual (FFN)'],
  'Final norm', 'Logits', 'Sampler'];

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
  const g = graph();
  const n_layer = g.groups.filter((grp) => grp.key.startsWith('blk.')).length;
  const pre = timesBy('prefill', stageOf), dec = timesBy('decode', stageOf);
  state.openStages = state.openStages || new Set();
  const arrow = () => el('span', {class: 'flow-arrow', text: '→'});
  const stage = (key) => {
    const open = state.openStages.has(key);
    // The operators of a stage: those of the first layer for the stages inside the loop.
    const ops = g.nodes.filter((n) => !isLeaf(n) || key === 'Input').filter((n) => stageOf(n) === key && !/^blk\.([1-9]\d*)\./.test(n.name));
    const box = el('div', {class: 'stage' + (open ? ' open' : ''), 'data-stage': key},
      el('button', {type: 'button', class: 'stage-head', 'aria-expanded': String(open),
        onclick: () => { if (open) state.openStages.delete(key); else state.openStages.add(key); render(); }},
      el('b', {text: key}), el('span', {class: 'n', text: key === 'Sampler' ? '' : ` ${ops.length} op(s)`})),
      el('div', {class: 't', text: key === 'Sampler' ? 'picks the next token' :
        `prefill ${fmtUs(pre.get(key) || 0)} · decode ${fmtUs((dec.get(key) || 0) / Math.max(1, state.steps.decode))}/step`}));
    if (open) {
      const list = el('div', {class: 'stage-ops'});
      for (const n of ops) list.append(link(g, n.id), el('br'));
      box.append(list);
    }
    return box;
  };
  const flow = el('div', {class: 'flow'});
  kFlow.forEach((item, i) => {
    if (i) flow.append(arrow());
    if (typeof item === 'string') { flow.append(stage(item)); return; }
    const loop = el('div', {class: 'layer-loop', 'data-loop': String(n_layer)},
      el('div', {class: 'loop-label', text: `for each of ${n_layer} layers (blk.0 … blk.${n_layer - 1})`}));
    const inner = el('div', {class: 'loop-stages'});
    item.forEach((key, j) => { if (j) inner.append(arrow()); inner.append(stage(key)); });
    const ns = 'http://www.w3.org/2000/svg';
    const back = document.createElementNS(ns, 'svg');
    back.setAttribute('class', 'loop-back');
    back.setAttribute('viewBox', '0 0 100 10');
    back.setAttribute('preserveAspectRatio', 'none');
    const path = document.createElementNS(ns, 'path');
    path.setAttribute('d', 'M97,0 V7 H3 V1');
    const head = document.createElementNS(ns, 'path');
    head.setAttribute('d', 'M1.5,3 L3,0 L4.5,3 Z');
    back.append(path, head);
    loop.append(inner, back);
    flow.append(loop);
  });
  root.append(el('div', {class: 'legend'},
    el('span', {class: 'key', text: '→ data flows left to right; the framed stages run once per layer, the arrow under them goes back to the next layer'}),
    el('span', {class: 'key', text: 'times: measured in the last run (prefill: the whole prompt; decode: mean per step)'}),
    el('span', {class: 'key', text: 'click a stage for its operators; playback marks the stage of the current node'})),
  flow);
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

// Shape flow: the rail of one forward pass (the computed nodes of `start`, of one layer bracketed
// "× N layers", of `end`, then the sampler), each node `data-shape-node=ID` with the output shape
// the export wrote. Playback moves a packet along the rail carrying the shape each node produced
// in the run (a node of blk.K is drawn by its blk.0 twin), and every node keeps badges of the
// shapes it produced; the header shows the tensor at the current node, the footer the KV cells.
const twinName = (name) => name.replace(/^blk\.\d+\./, 'blk.0.');

function shapeFormula(g, n, shape) {
  const src = (n.inputs || []).map((i) => g.byId.get(i)).filter(Boolean);
  const w = src.find((x) => x.op === 'weight');
  const acts = src.filter((x) => x.op !== 'weight' && x.op !== 'input');
  const lhs = acts.map((x) => fmtShape(x.shape)).join(' + ');
  return (lhs ? lhs + (w ? ` × ${w.name} ${fmtShape(w.shape)}` : '') + ' → ' : '') + fmtShape(shape || n.shape) +
    (w ? ` · weight ${w.dtype}` : '') + ' · ' + n.dtype;
}

// Inside attention: heads split, scores per head, heads merged (from the attn node's inputs).
function attnDetail(g, n, nTok) {
  const [q, kStore] = (n.inputs || []).map((i) => g.byId.get(i));
  if (!q || !kStore) return null;
  const [headDim, nHead] = q.shape, nHeadKv = n.params && n.params.n_head_kv;
  const cells = state.kvCells || '?';
  return el('div', {class: 'attn-detail'},
    el('h3', {text: `inside ${n.name}`}),
    el('div', {text: `heads split: q ${fmtShape([headDim, nHead, nTok])}, k/v ${fmtShape([headDim, nHeadKv, cells])} (${nHead / nHeadKv} q heads per kv head)`}),
    el('div', {text: `scores: ${fmtShape([cells, nTok, nHead])} = q·kᵀ × ${n.params ? n.params.scale : '?'}, causal softmax`}),
    el('div', {text: `heads merged: ${fmtShape([headDim * nHead, nTok])}`}));
}

function renderShapes(root, g) {
  const computed = (grp) => grp ? grp.nodes.filter((n) => !isLeaf(n)) : [];
  const layers = g.groups.filter((grp) => grp.key.startsWith('blk.'));
  const layer = g.groups.find((grp) => grp.key === 'blk.0');
  const n_tokens = g.params ? g.params.n_tokens : '?';
  const cur = state.shapeCur && g.byId.get(state.shapeCur.id);
  const nTok = state.lastTokens && state.lastTokens[state.phase] || n_tokens;
  root.append(el('div', {class: 'shape-head', 'data-shape-current': cur ? String(cur.id) : ''},
    cur ? el('span', {}, el('b', {text: cur.name}), ` (${cur.op}): ${shapeFormula(g, cur, state.shapeCur.shape)}`)
      : el('span', {class: 'hint', text: `${state.phase}: graph for a batch of ${n_tokens} token(s). Play a run (▶ Play or Step) to move the packet along the rail.`})));
  root.append(el('div', {class: 'play-source'}, 'play: ',
    ...[['prefill', 'Prefill pass'], ['decode', 'Decode step'], ['run', 'The run']].map(([k, label]) => el('button', {type: 'button',
      'data-play-source': k, 'aria-pressed': String(playback.source === k), onclick: () => choosePlay(k)}, label))));
  root.append(el('div', {class: 'shape-text'}, el('span', {class: 'hint', text: (state.prompt || $('#prompt').value) + ' → '}), state.text));
  const rail = el('div', {class: 'rail'});
  const shapeNode = (n) => {
    const seen = state.seenShapes && state.seenShapes.get(n.id);
    return el('div', {class: 'shape-node op-' + n.op + (cur && twinName(cur.name) === n.name ? ' current' : ''), 'data-shape-node': String(n.id)},
      el('div', {class: 'op', text: n.op}), el('div', {class: 'name', text: n.name}),
      el('div', {class: 'dims', text: fmtShape(n.shape)}),
      el('div', {class: 'badges'}, ...[...(seen || [])].map((x) => el('span', {class: 'badge', text: x}))),
      cur && twinName(cur.name) === n.name ? el('div', {class: 'packet', text: fmtShape(state.shapeCur.shape || cur.shape)}) : null);
  };
  for (const n of computed(g.groups.find((grp) => grp.key === 'start'))) rail.append(shapeNode(n));
  if (layer) rail.append(el('div', {class: 'layer-bracket'}, el('div', {class: 'bracket-label', text: `× ${layers.length} layers`}), ...computed(layer).map(shapeNode)));
  for (const n of computed(g.groups.find((grp) => grp.key === 'end'))) rail.append(shapeNode(n));
  rail.append(el('div', {class: 'shape-node sampler', 'data-stage': 'Sampler'}, el('div', {class: 'op', text: 'sampler'}),
    el('div', {class: 'name', text: state.top ? topText(state.top) : 'picks the next token'})));
  root.append(rail);
  const attn = cur && cur.op === 'attn' ? cur : layer && layer.nodes.find((n) => n.op === 'attn');
  if (attn) { const d = attnDetail(g, attn, nTok); if (d) root.append(d); }
  root.append(el('div', {class: 'kv-footer', 'data-kv-cells': String(state.kvCells || 0)},
    `KV cache: ${state.kvCells || 0} cell(s) written of ${g.params ? g.params.n_ctx : '?'} (prefill writes one per prompt token, each decode step one more)`));

  root.append(el('h2', {text: `Shape flow through one layer (blk.0), ${state.phase}: graph for a batch of ${n_tokens} token(s)` +
    (nTok !== n_tokens ? ` (the last run's ${state.phase} had ${nTok}: the token dimension is that many)` : '')}));
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

// A node event seen by Shape flow: its badge (on the blk.0 twin) and the current node. The
// event's own phase graph (prefill and decode ids differ), not the one shown.
function shapeEvent(e, phase) {
  const g = state.graphs && state.graphs[phase];
  const twin = g && g.byName && g.byName.get(twinName(e.name || ''));
  if (!twin) return;
  state.seenShapes = state.seenShapes || new Map();
  if (!state.seenShapes.has(twin.id)) state.seenShapes.set(twin.id, new Set());
  state.seenShapes.get(twin.id).add(fmtShape(e.shape || twin.shape));
  state.shapeCur = {id: e.id, shape: e.shape};
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
    const big = el('canvas', {class: 'heat-big', width: '160', height: '160'});
    paintHeatmap(big, s.values);
    t.append(row('heatmap', big));
    if (state.top && isLogits(n.id)) t.append(row('top-5', topTable(state.top, state.topChosen)));
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

function resetRun() {
  state.text = ''; state.top = null; state.kvCells = 0; state.seenShapes = new Map(); state.shapeCur = null;
  for (const ph of ['prefill', 'decode']) { state.stats[ph].clear(); state.times[ph].clear(); state.steps[ph] = 0; }
  $('#live-text').textContent = '';
  $('#top-tokens').replaceChildren();
  for (const box of document.querySelectorAll('#view .node')) { box.style.background = ''; box.querySelector('canvas.heat')?.remove(); box.querySelector('.live').textContent = ''; }
}

function onEvent(e) {
  switch (e.type) {
    case 'hello': break;
    case 'start':
      resetRun();
      state.prompt = e.prompt;
      $('#status').textContent = 'running…';
      break;
    case 'step': {
      const ph = e.phase;
      state.steps[ph] += 1;
      state.curPhase = ph;
      state.lastTokens = state.lastTokens || {};
      state.lastTokens[ph] = e.n_tokens;
      state.kvCells = (state.kvCells || 0) + e.n_tokens;
      if (state.follow && ph !== state.phase) { state.phase = ph; render(); }
      break;
    }
    case 'node': {
      const ph = e.step === 0 ? 'prefill' : 'decode';
      state.stats[ph].set(e.id, e);
      shapeEvent(e, ph);
      if (state.view === 'shapes') scheduleRender();
      state.times[ph].set(e.id, (state.times[ph].get(e.id) || 0) + (e.us || 0));
      if (ph === state.phase) light(e);
      if (e.id === state.selected) scheduleRender();
      break;
    }
    case 'token': {
      state.text += e.text || '';
      $('#live-text').textContent = state.text;
      state.top = e.top; state.topChosen = e.token;
      $('#top-tokens').replaceChildren(topTable(e.top, e.token));
      for (const id of graph().outputs || []) { const box = document.querySelector(`#view [data-node-id="${id}"]`); if (box) paintNode(box, state.stats[state.phase].get(id)); }
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
  es.onmessage = (m) => { try { const e = JSON.parse(m.data); onEvent(e); record(e); } catch (err) { console.error(err); } };
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
  stopLive();
  showGraphs(trace.graphs, trace.model + ' (trace)');
  state.prompt = trace.prompt;
  document.body.dataset.runState = 'replaying';
  const events = trace.events || [];
  playback.recorded = events.slice();
  choosePlay('run', false);
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

// ---------------------------------------------------------------- playback
// The last live run (its events as they came) or the opened trace, replayed node by node: Step
// applies the events up to the next node event, Play does so every `speed` ms. The node played is
// marked `.current` (its layer box when the layer is closed; its stage or shape row in the other
// views) and its id is written to body[data-play-node].

// What plays: 'run' (the recorded events) or one pass of the shown graph, 'prefill' or
// 'decode', made from the export alone (Shape flow's buttons: useful before any run).
const playback = {recorded: [], events: [], source: 'run', i: 0, timer: null};

function record(e) {
  if (e.type === 'start') { playback.recorded = []; if (playback.source === 'run') choosePlay('run', false); }
  if (e.type !== 'hello' && e.type !== 'lagged') playback.recorded.push(e);
}

// The events of one pass through the `phase` graph: a step, then each computed node in order.
function passEvents(phase) {
  const g = state.graphs[phase], step = phase === 'prefill' ? 0 : 1;
  const n_tokens = g.params ? g.params.n_tokens : 1;
  return [{type: 'step', step, phase, n_tokens},
    ...g.nodes.filter((n) => !isLeaf(n)).map((n) => ({type: 'node', step, id: n.id, name: n.name, op: n.op, shape: n.shape}))];
}

function choosePlay(source, start = true) {
  stopPlayback('paused');
  playback.source = source;
  playback.events = source === 'run' ? playback.recorded : passEvents(source);
  playback.i = 0;
  for (const b of document.querySelectorAll('[data-play-source]')) b.setAttribute('aria-pressed', String(b.dataset.playSource === source));
  if (start) play();
}

function setCurrent(id) {
  for (const x of document.querySelectorAll('#view .current')) x.classList.remove('current');
  const g = graph(), n = g && g.byId.get(id);
  if (!n) return;
  if (state.view === 'shapes') render();
  const grp = g.groups.find((x) => x.nodes.includes(n));
  const twin = g.byName.get(twinName(n.name));
  const target = document.querySelector(`#view [data-node-id="${id}"]`) || (twin && document.querySelector(`#view [data-shape-node="${twin.id}"]`)) ||
    document.querySelector(`#view [data-stage="${stageOf(n)}"]`) || (grp && document.querySelector(`#view section.group[data-group="${grp.key}"]`));
  if (target) { target.classList.add('current'); target.scrollIntoView({block: 'nearest', inline: 'nearest'}); }
  document.body.dataset.playNode = String(id);
}

function playStep() {
  const evs = playback.events;
  if (!evs.length) { $('#play-pos').textContent = 'nothing recorded: run a prompt or open a trace'; stopPlayback('done'); return false; }
  if (playback.i >= evs.length) playback.i = 0;
  if (playback.i === 0) resetRun();
  while (playback.i < evs.length) {
    const e = evs[playback.i++];
    // Playback shows the phase it plays: node ids are the event's phase's (they differ).
    const ph = e.type === 'step' ? e.phase : e.type === 'node' ? (e.step === 0 ? 'prefill' : 'decode') : null;
    if (ph && ph !== state.phase && state.graphs[ph]) { state.phase = ph; render(); }
    onEvent(e);
    if (e.type === 'node') {
      setCurrent(e.id);
      $('#play-pos').textContent = `step ${e.step} · ${e.name} (${playback.i}/${evs.length})`;
      return true;
    }
  }
  stopPlayback('done');
  return false;
}

function stopPlayback(how) {
  clearInterval(playback.timer);
  playback.timer = null;
  document.body.dataset.playback = how;
}

function play() {
  stopPlayback('playing');
  playback.timer = setInterval(() => { if (!playStep()) stopPlayback('done'); }, +$('#speed').value);
}

// ---------------------------------------------------------------- graphs and samples

// Shows a pair of graphs ({prefill, decode}; an export alone stands for both phases). Nothing of
// what was shown before carries over: its run's values, its recorded events, a playback.
function showGraphs(j, label) {
  stopPlayback('paused');
  state.graphs = {prefill: indexGraph(j.prefill || j), decode: indexGraph(j.decode || j)};
  resetRun();
  playback.recorded = [];
  choosePlay('run', false);
  state.selected = null;
  $('#model-name').textContent = label;
  render();
  renderInspector();
}

function noRun(label, why) {
  $('#model-name').textContent = label;
  $('#run').disabled = true;
  $('#status').textContent = why;
}

// "Select a sample model": the exports of `minfer viz --samples DIR` (hidden when there are none).
async function listSamples() {
  const r = await fetch('/viz/samples');
  const names = r.ok ? (await r.json()).samples : [];
  const sel = $('#sample');
  sel.hidden = !names.length;
  for (const name of names) sel.append(el('option', {value: name, text: name.replace(/\.json$/, '')}));
}

// The live model's events stop applying once another graph is shown (a sample, a trace).
let liveEvents = null;
function stopLive() {
  if (liveEvents) liveEvents.close();
  liveEvents = null;
  document.body.dataset.live = 'closed';
}

async function openSample(name) {
  const r = await fetch('/samples/' + encodeURIComponent(name));
  const j = await r.json();
  if (!r.ok) throw new Error(j.error ? j.error.message : r.status);
  stopLive();
  showGraphs(j, '');
  noRun(`${j.model} (sample ${name})`, 'a sample graph: reload the page to run the model');
  document.body.dataset.sample = name;
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
  $('#sample').addEventListener('change', (e) => {
    if (e.target.value) openSample(e.target.value).catch((err) => { $('#status').textContent = 'cannot open sample: ' + err.message; });
  });
  $('#view').addEventListener('scroll', () => { if (unpainted.size) requestAnimationFrame(paintScrolledTo); }, {passive: true});
  $('#play').addEventListener('click', play);
  $('#pause').addEventListener('click', () => stopPlayback('paused'));
  $('#step').addEventListener('click', () => { stopPlayback('paused'); playStep(); });
  $('#speed').addEventListener('input', () => { if (playback.timer) play(); });
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
      showGraphs(j, j.model);
      if (j.runnable === false) noRun(j.model + ' (graph export)', 'a graph export: nothing to run (open a trace, or start minfer viz MODEL)');
      liveEvents = listen();
      listSamples();
    }
    document.body.dataset.ready = 'true';
  } catch (err) {
    $('#view').replaceChildren(el('p', {class: 'error', text: 'cannot load: ' + err.message}));
    document.body.dataset.ready = 'error';
  }
  writeUrl();
}

main();
