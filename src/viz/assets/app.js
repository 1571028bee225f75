// minfer viz: the page (after graph.js, the shared helpers and state, and operators.js, the
// Operators view). Plain JS, no dependencies (embedded in the binary, works offline).
// Data: /viz/graph (the prefill and decode graphs, docs/graph.md), /viz/events (live run
// events, docs/viz.md), /viz/trace?path= or a picked file (a MINFER_TRACE recording).
'use strict';

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
  setUrlParam('view', state.view);
  setUrlParam('phase', state.phase);
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

// One forward pass: the stages in order, the inner list repeated for each layer.
const kFlow = ['Input', 'Embedding', ['Attention norm', 'Attention', 'Residual (attention)', 'FFN norm', 'FFN', 'Residual (FFN)'],
  'Final norm', 'Logits', 'Sampler'];

function timesBy(phase, keyOf) {
  const g = state.graphs[phase];
  const out = new Map();
  if (!g) return out;
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
  const pre = timesBy('prefill', (n) => n.stage), dec = timesBy('decode', (n) => n.stage);
  state.openStages = state.openStages || new Set();
  const arrow = () => el('span', {class: 'flow-arrow', text: '→'});
  const stage = (key) => {
    const open = state.openStages.has(key);
    // The operators of a stage: those of the first layer for the stages inside the loop.
    const ops = g.nodes.filter((n) => !isLeaf(n) || key === 'Input').filter((n) => n.stage === key && !/^blk\.([1-9]\d*)\./.test(n.name));
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
    const back = svgEl('svg', {class: 'loop-back', viewBox: '0 0 100 10', preserveAspectRatio: 'none'});
    back.append(svgEl('path', {d: 'M97,0 V7 H3 V1'}), svgEl('path', {d: 'M1.5,3 L3,0 L4.5,3 Z'}));
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
    if (!state.graphs[phase]) continue;
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
// "× N layers" with the last layer's own nodes after it (its tail gathers in prefill), of `end`,
// then the sampler), each node `data-shape-node=ID` with the output shape the export wrote.
// Playback moves a packet along the rail carrying the shape each node produced in the run (a node
// of blk.K is drawn by its blk.0 twin), and every node keeps badges of the shapes it produced; the
// header shows the tensor at the current node, the footer the KV cells. render() draws it; events
// patch it (patchShapes: badges, packet, header, footer), at most once per frame in a live run.
const twinName = (name) => name.replace(/^blk\.\d+\./, 'blk.0.');
const railNode = (g, n) => g.byName.get(twinName(n.name)) || n;  // the rail box that stands for n

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

// The node of the shown graph that playback or the run is at (null: none, or another phase's).
function shapeCurrent(g) {
  const c = state.shapeCur;
  return c && c.phase === state.phase ? g.byId.get(c.id) || null : null;
}

// The parts of Shape flow that events change, each built whole (render) or swapped (patchShapes).
function shapeParts(g) {
  const cur = shapeCurrent(g);
  const n_tokens = g.params ? g.params.n_tokens : '?';
  const nTok = state.lastTokens && state.lastTokens[state.phase] || n_tokens;
  const layer = g.group.get('blk.0');
  const attn = cur && cur.op === 'attn' ? cur : layer && layer.nodes.find((n) => n.op === 'attn');
  return {
    head: el('div', {class: 'shape-head', 'data-shape-current': cur ? String(cur.id) : ''},
      cur ? el('span', {}, el('b', {text: cur.name}), ` (${cur.op}): ${shapeFormula(g, cur, state.shapeCur.shape)}`)
        : el('span', {class: 'hint', text: `${state.phase}: graph for a batch of ${n_tokens} token(s). Play a run (▶ Play or Step) to move the packet along the rail.`})),
    text: el('div', {class: 'shape-text'}, el('span', {class: 'hint', text: (state.prompt || $('#prompt').value) + ' → '}), state.text),
    attn: (attn && attnDetail(g, attn, nTok)) || el('div', {class: 'attn-detail', hidden: ''}),
    kv: el('div', {class: 'kv-footer', 'data-kv-cells': String(state.kvCells || 0)},
      `KV cache: ${state.kvCells || 0} cell(s) written of ${g.params ? g.params.n_ctx : '?'} (prefill writes one per prompt token, each decode step one more)`),
    sampler: el('div', {class: 'name', text: state.top ? topText(state.top) : 'picks the next token'}),
  };
}
const shapeBadges = (n) => [...(state.seenShapes.get(n.name) || [])].map((x) => el('span', {class: 'badge', text: x}));

function renderShapes(root, g) {
  const computed = (grp) => grp ? grp.nodes.filter((n) => !isLeaf(n)) : [];
  const layers = g.groups.filter((grp) => grp.key.startsWith('blk.'));
  const layer = g.group.get('blk.0');
  const n_tokens = g.params ? g.params.n_tokens : '?';
  const parts = shapeParts(g);
  root.append(parts.head);
  root.append(el('div', {class: 'play-source'}, 'play: ',
    ...[['prefill', 'Prefill pass'], ['decode', 'Decode step'], ['run', 'The run']].map(([k, label]) => el('button', {type: 'button',
      'data-play-source': k, 'aria-pressed': String(playback.source === k), onclick: () => choosePlay(k),
      ...(k !== 'run' && !state.graphs[k] ? {disabled: '', title: `no ${k} graph in what is shown`} : {})}, label))));
  root.append(parts.text);
  const rail = el('div', {class: 'rail'});
  const shapeNode = (n) => el('div', {class: 'shape-node op-' + n.op, 'data-shape-node': String(n.id)},
    el('div', {class: 'op', text: n.op}), el('div', {class: 'name', text: n.name}),
    el('div', {class: 'dims', text: fmtShape(n.shape)}), el('div', {class: 'badges'}, ...shapeBadges(n)));
  for (const n of computed(g.group.get('start'))) rail.append(shapeNode(n));
  if (layer) {
    const last = layers[layers.length - 1];
    const own = computed(last).filter((n) => railNode(g, n) === n && last !== layer);
    rail.append(el('div', {class: 'layer-bracket'}, el('div', {class: 'bracket-label', text: `× ${layers.length} layers`}),
      ...computed(layer).map(shapeNode),
      own.length ? el('div', {class: 'bracket-tail'}, el('div', {class: 'bracket-label', text: `${last.key} only`}), ...own.map(shapeNode)) : null));
  }
  for (const n of computed(g.group.get('end'))) rail.append(shapeNode(n));
  rail.append(el('div', {class: 'shape-node sampler', 'data-stage': 'Sampler'}, el('div', {class: 'op', text: 'sampler'}), parts.sampler));
  root.append(rail, parts.attn, parts.kv);
  markShapeCurrent(root, g);

  const nTok = state.lastTokens && state.lastTokens[state.phase] || n_tokens;
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

// The current node's rail box gets .current and the packet with the shape it produced.
function markShapeCurrent(root, g) {
  for (const x of root.querySelectorAll('.shape-node.current')) x.classList.remove('current');
  root.querySelector('.rail .packet')?.remove();
  const cur = shapeCurrent(g);
  const box = cur && root.querySelector(`[data-shape-node="${railNode(g, cur).id}"]`);
  if (!box) return;
  box.classList.add('current');
  box.append(el('div', {class: 'packet', text: fmtShape(state.shapeCur.shape || cur.shape)}));
}

// Swaps in what events changed: the badges of the rail boxes in `shapeDirty`, the packet, the
// header, the text strip, the attention panel, the KV footer (no full render, no layout thrash).
const shapeDirty = new Set();  // names of rail boxes with new badges
let shapePatchPending = false;
function shapesChanged(name) {
  if (name) shapeDirty.add(name);
  if (shapePatchPending) return;
  shapePatchPending = true;
  requestAnimationFrame(patchShapes);
}
function patchShapes() {
  shapePatchPending = false;
  const root = $('#view'), g = graph();
  if (state.view !== 'shapes' || !g) { shapeDirty.clear(); return; }
  if (!root.querySelector('.rail')) { shapeDirty.clear(); render(); return; }
  for (const name of shapeDirty) {
    const n = g.byName.get(name);
    const box = n && root.querySelector(`[data-shape-node="${n.id}"] .badges`);
    if (box) box.replaceChildren(...shapeBadges(n));
  }
  shapeDirty.clear();
  const parts = shapeParts(g);
  for (const [cls, part] of [['shape-head', parts.head], ['shape-text', parts.text], ['attn-detail', parts.attn], ['kv-footer', parts.kv]])
    root.querySelector('.' + cls)?.replaceWith(part);
  root.querySelector('.shape-node.sampler .name')?.replaceWith(parts.sampler);
  markShapeCurrent(root, g);
}

// A node event seen by Shape flow: its badge (on the rail box of the event's own phase graph:
// prefill and decode ids differ, names do not) and the current node.
function shapeEvent(e, phase) {
  const g = state.graphs && state.graphs[phase];
  const n = g && g.byId.get(e.id);
  if (!n) return;
  const name = railNode(g, n).name;
  if (!state.seenShapes.has(name)) state.seenShapes.set(name, new Set());
  state.seenShapes.get(name).add(fmtShape(e.shape || n.shape));
  state.shapeCur = {id: e.id, phase, shape: e.shape};
  if (state.view === 'shapes') shapesChanged(name);
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
  return el('a', {onclick: () => { const grp = g.groupOf.get(id); if (grp) state.expanded.add(grp.key); render(); select(id); }},
    n ? `${n.name} (${n.op})` : '#' + id);
}

function sparkline(values) {
  const svg = svgEl('svg', {class: 'spark', viewBox: '0 0 100 40', preserveAspectRatio: 'none'});
  const vs = values.filter((v) => v != null);
  if (vs.length > 1) {
    const lo = Math.min(...vs), hi = Math.max(...vs), span = hi - lo || 1;
    const pts = values.map((v, i) => `${(100 * i / (values.length - 1)).toFixed(2)},${(40 - 38 * ((v ?? lo) - lo) / span - 1).toFixed(2)}`);
    svg.append(svgEl('polyline', {points: pts.join(' '), fill: 'none', stroke: '#2d5bd7', 'stroke-width': '0.8'}));
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
      if (state.follow && ph !== state.phase && state.graphs[ph]) { state.phase = ph; render(); }
      else if (state.view === 'shapes') shapesChanged();
      break;
    }
    case 'node': {
      const ph = e.step === 0 ? 'prefill' : 'decode';
      state.stats[ph].set(e.id, e);
      shapeEvent(e, ph);
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
      if (state.view === 'shapes') shapesChanged();
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

// Live events arrive by the thousand per second, in batches (one message: an array of the events
// since the server's last write; hello alone): a message only queues them, and the queue is
// applied once per animation frame within a time budget (the rest waits for the next frame), so
// the page keeps drawing frames however fast the run goes. A hidden tab gets no frames: it drains
// on timers, and past kMaxQueued waiting events the oldest node events are dropped for a
// 'lagged' one (as the server does for a page that falls behind), so a background tab stays small.
const liveQueue = [];
let liveDrainPending = false;
const kEventBudgetMs = 6;
const kMaxQueued = 20000;
function scheduleDrain() {
  if (liveDrainPending) return;
  liveDrainPending = true;
  if (document.hidden) setTimeout(drainLive, 100); else requestAnimationFrame(drainLive);
}
// A frame asked for just before the tab was hidden would wait until it shows again.
document.addEventListener('visibilitychange', () => { if (document.hidden && liveDrainPending) { liveDrainPending = false; scheduleDrain(); } });
function enqueue(e) {
  liveQueue.push(e);
  if (liveQueue.length <= kMaxQueued) return;
  // Down to half the cap at once (one pass per kMaxQueued / 2 events, not one per event); the
  // 'lagged' events waiting already fold into the new one.
  let excess = liveQueue.length - kMaxQueued / 2, dropped = 0, at = -1;
  const kept = [];
  for (const q of liveQueue) {
    if (q.type === 'lagged') { dropped += q.dropped || 0; if (at < 0) at = kept.length; continue; }  // one 'lagged' for all
    if (excess > 0 && q.type === 'node') { excess--; dropped++; if (at < 0) at = kept.length; continue; }
    kept.push(q);
  }
  if (!dropped) return;  // nothing droppable: tokens and steps only (a few per token)
  kept.splice(at, 0, {type: 'lagged', dropped});
  liveQueue.length = 0;
  for (const q of kept) liveQueue.push(q);
}
function drainLive() {
  liveDrainPending = false;
  const t0 = performance.now();
  let i = 0;
  while (i < liveQueue.length && performance.now() - t0 < kEventBudgetMs) {
    const e = liveQueue[i++];
    if (e.type === 'start') runFinished = false;
    if (e.type === 'finish') runFinished = true;
    try { record(e); onEvent(e); } catch (err) { console.error(err); }
  }
  liveQueue.splice(0, i);
  if (liveQueue.length) scheduleDrain(); else settleRun();
}
function listen() {
  const es = new EventSource('/viz/events');
  es.onmessage = (m) => {
    try { const d = JSON.parse(m.data); if (Array.isArray(d)) for (const e of d) enqueue(e); else enqueue(d); } catch (err) { console.error(err); }
    scheduleDrain();
  };
  es.onopen = () => { document.body.dataset.live = 'connected'; };
  es.onerror = () => { document.body.dataset.live = 'disconnected'; };
  return es;
}

// This page's run: its POST reply is kept until the queue has drained; then, unless a 'finish'
// was applied, the run ends from the reply. `captured` in the reply means some page listened, not
// this one (another tab; this page may have stopped listening), and the server's queue drops a
// 'finish' for a page that fell behind.
let runReply = null;
let runFinished = false;
const kFinishGraceMs = 300;  // events published before the reply may still be on their way
function finishFromReply(j) {
  state.text = j.text;
  $('#live-text').textContent = j.text;
  $('#status').textContent = `done: ${j.completion_tokens} tokens (${j.finish_reason})`;
  document.body.dataset.runState = 'finished';
  scheduleRender();
}
function settleRun() {
  if (!runReply || liveQueue.length || liveDrainPending) return;
  const j = runReply;
  runReply = null;
  if (!runFinished) finishFromReply(j);
}

async function run(ev) {
  ev.preventDefault();
  const body = {prompt: $('#prompt').value, max_tokens: +$('#max-tokens').value, temperature: +$('#temperature').value, seed: +$('#seed').value};
  $('#run').disabled = true;
  document.body.dataset.runState = 'running';
  $('#status').textContent = 'running…';
  runReply = null;
  runFinished = false;
  try {
    const r = await fetch('/viz/run', {method: 'POST', headers: {'Content-Type': 'application/json'}, body: JSON.stringify(body)});
    const j = await r.json();
    if (!r.ok) { $('#status').textContent = 'error: ' + (j.error ? j.error.message : r.status); document.body.dataset.runState = 'error'; return; }
    // A watched run ends when its queued events have played ('finish'), else from the reply.
    if (!j.captured || !liveEvents) finishFromReply(j);
    else { runReply = j; setTimeout(settleRun, kFinishGraceMs); }
  } catch (err) {
    $('#status').textContent = 'error: ' + err.message;
    document.body.dataset.runState = 'error';
  } finally {
    $('#run').disabled = !liveEvents;  // a sample or a trace shown meanwhile: nothing to run
  }
}

// A recorded trace: its graphs, then its events, replayed at a readable pace.
async function replay(trace) {
  if (trace.format !== 'minfer-trace') throw new Error('not a minfer trace');
  stopLive();
  showGraphs(trace.graphs, trace.model + ' (trace)');
  noRun(trace.model + ' (trace)', 'a trace: reload the page to run the model');
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
  if (e.type === 'start') { playback.recorded = []; choosePlay('run', false); }
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
  if (source !== 'run' && !state.graphs[source]) return;
  playback.source = source;
  playback.events = source === 'run' ? playback.recorded : passEvents(source);
  playback.i = 0;
  for (const b of document.querySelectorAll('[data-play-source]')) b.setAttribute('aria-pressed', String(b.dataset.playSource === source));
  if (start) play();
}

function setCurrent(id) {
  const g = graph(), n = g && g.byId.get(id);
  document.body.dataset.playNode = String(id);
  if (!n) return;
  if (state.view === 'shapes') { patchShapes(); document.querySelector('#view .shape-node.current')?.scrollIntoView({block: 'nearest', inline: 'nearest'}); return; }
  for (const x of document.querySelectorAll('#view .current')) x.classList.remove('current');
  const grp = g.groupOf.get(id);
  const target = document.querySelector(`#view [data-node-id="${id}"]`) ||
    document.querySelector(`#view [data-stage="${n.stage}"]`) || (grp && document.querySelector(`#view section.group[data-group="${grp.key}"]`));
  if (target) { target.classList.add('current'); target.scrollIntoView({block: 'nearest', inline: 'nearest'}); }
}

// One node further; false at the end (Play stops there; a later Play or Step starts over).
function playStep() {
  const evs = playback.events;
  if (!evs.length) { $('#play-pos').textContent = 'nothing recorded: run a prompt or open a trace'; stopPlayback('done'); return false; }
  if (playback.i >= evs.length) { stopPlayback('done'); return false; }
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
  if (playback.i >= playback.events.length) playback.i = 0;  // played to the end: again
  if (!playStep()) return;  // the first node at once, then one every `speed` ms
  startPlayTimer();
}

function startPlayTimer() {
  clearInterval(playback.timer);
  playback.timer = setInterval(() => { if (!playStep()) stopPlayback('done'); }, +$('#speed').value);
}

// ---------------------------------------------------------------- graphs and samples

// Shows a pair of graphs ({prefill, decode}; an export alone is the phase its kind says, and a
// phase no graph is given for has its button disabled: decode shapes are never faked from
// prefill ones). Nothing of what was shown before carries over: its run's values, its recorded
// events, a playback.
function showGraphs(j, label) {
  stopPlayback('paused');
  const given = j.format === 'minfer-graph' ? {[j.kind === 'decode' ? 'decode' : 'prefill']: j} : j;
  state.graphs = {prefill: given.prefill ? indexGraph(given.prefill) : null, decode: given.decode ? indexGraph(given.decode) : null};
  if (!state.graphs[state.phase]) state.phase = state.graphs.prefill ? 'prefill' : 'decode';
  for (const b of document.querySelectorAll('[data-phase]')) {
    b.disabled = !state.graphs[b.dataset.phase];
    b.title = b.disabled ? `no ${b.dataset.phase} graph given (minfer viz --graph PREFILL.json --graph DECODE.json)` : '';
  }
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
  liveQueue.length = 0;
  runReply = null;
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
  $('#expand-all').addEventListener('click', () => { state.expandAll = true; setUrlParam('expand', 'all'); render(); });
  $('#collapse-all').addEventListener('click', () => { state.expandAll = false; state.expanded.clear(); setUrlParam('expand', null); render(); });
  $('#run-form').addEventListener('submit', run);
  $('#sample').addEventListener('change', (e) => {
    if (e.target.value) openSample(e.target.value).catch((err) => { $('#status').textContent = 'cannot open sample: ' + err.message; });
  });
  $('#view').addEventListener('scroll', () => { if (unpainted.size) requestAnimationFrame(paintScrolledTo); }, {passive: true});
  $('#play').addEventListener('click', play);
  $('#pause').addEventListener('click', () => stopPlayback('paused'));
  $('#step').addEventListener('click', () => {
    stopPlayback('paused');
    if (playback.i >= playback.events.length) playback.i = 0;
    playStep();
  });
  $('#speed').addEventListener('input', () => { if (playback.timer) startPlayTimer(); });  // the pace only: no step
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
