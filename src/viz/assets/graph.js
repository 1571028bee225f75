// minfer viz: what the page's scripts share (loaded first; operators.js draws the Operators
// view, app.js the other views, the events, playback and the start): DOM helpers, the page state,
// the graph index (groups, stages: computed once per graph), formats. Each is said here once.
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
const svgEl = (tag, attrs = {}) => {
  const e = document.createElementNS('http://www.w3.org/2000/svg', tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  return e;
};
// One parameter of the page's URL set (null: removed), the others kept.
function setUrlParam(key, value) {
  const p = new URLSearchParams(location.search);
  if (value == null) p.delete(key); else p.set(key, value);
  history.replaceState(null, '', '?' + p.toString());
}

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
  seenShapes: new Map(),  // rail node name -> shapes it produced (Shape flow badges)
  shapeCur: null,      // {id, phase, shape}: the node the run or playback is at
};

// ---------------------------------------------------------------- graph index

function graph() { return state.graphs ? state.graphs[state.phase] : null; }

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
  g.groupOf = new Map(groups.flatMap((grp) => grp.nodes.map((n) => [n.id, grp])));  // id -> its group
  g.group = byKey;  // key ("start", "blk.N", "end") -> group
  g.byName = new Map(g.nodes.map((n) => [n.name, n]));
  for (const n of g.nodes) n.stage = stageOf(n);
  return g;
}

// What a fused op replaced (src/graph/fusion.cpp rules).
const kFusedFrom = {rms_norm_mul: 'rms_norm + mul', swiglu: 'silu + mul', geglu: 'gelu + mul'};
const fusedText = (n) => n.fused ? ' (fused: ' + (kFusedFrom[n.op] || 'fused') + ')' : '';

const fmtShape = (s) => '[' + s.filter((d, i) => i < 2 || d !== 1).join(', ') + ']';
const fmtNum = (v) => v == null ? '—' : Math.abs(v) >= 1e4 || (Math.abs(v) < 1e-3 && v !== 0) ? v.toExponential(3) : (+v).toFixed(4);
const fmtUs = (us) => us >= 1000 ? (us / 1000).toFixed(2) + ' ms' : us.toFixed(0) + ' µs';

const isLeaf = (n) => n.op === 'weight' || n.op === 'input' || n.op === 'kv_cache';

// The stage of a node, from its op and the GGUF-style name.
// Computed once per graph (indexGraph: n.stage).
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
// The logits node is the graph's output; its top-5 comes from the last token event.
const isLogits = (id) => { const g = graph(); return !!g && (g.outputs || []).includes(id); };
const topText = (top) => 'top: ' + top.map(([, piece, p]) => `${JSON.stringify(piece)} ${(100 * p).toFixed(0)}%`).join(' ');
function topTable(top, chosen) {
  return el('table', {class: 'top5'}, ...top.map(([id, piece, p]) => el('tr', {class: id === chosen ? 'chosen' : ''},
    el('td', {text: JSON.stringify(piece)}), el('td', {text: (100 * p).toFixed(1) + '%'}))));
}
