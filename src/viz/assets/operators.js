// minfer viz: the Operators view (after graph.js, the helpers and state it uses; before app.js,
// the other views): the layered layout, the edges, the node boxes with their heatmaps,
// and the painting of live node events.
'use strict';

// Operators: a layout of our own for the regular layer structure (docs/viz.md "Layout"). Groups
// stack top to bottom; inside an open group a node's row is its depth (1 + the deepest input of
// its group), a leaf (weight, cache) sits one row above its first reader. Positions are computed
// here, not read back from the DOM, so the edges (one SVG under the boxes) need no layout pass.
const kNodeW = 178, kNodeH = 64, kGapX = 18, kGapY = 30, kHeadH = 30, kPad = 10, kLane = 40;

function layoutGroup(g, grp) {
  if (grp.rows) return grp.rows;
  const inGroup = new Set(grp.nodes.map((n) => n.id));
  const depth = new Map();
  for (const n of grp.nodes) {
    if (isLeaf(n)) continue;
    let d = 1;
    for (const s of n.inputs || []) if (inGroup.has(s) && depth.has(s)) d = Math.max(d, depth.get(s) + 1);
    depth.set(n.id, d);
  }
  for (const n of grp.nodes) {
    if (!isLeaf(n)) continue;
    const ds = (g.consumers.get(n.id) || []).filter((c) => depth.has(c)).map((c) => depth.get(c));
    depth.set(n.id, ds.length ? Math.min(...ds) - 1 : 0);
  }
  const byDepth = new Map();
  for (const n of grp.nodes) { const d = depth.get(n.id); if (!byDepth.has(d)) byDepth.set(d, []); byDepth.get(d).push(n); }
  grp.rows = [...byDepth.keys()].sort((a, b) => a - b).map((d) => byDepth.get(d));
  return grp.rows;
}

// Positions of the groups and of the nodes of open groups: {groups: key -> {y, h}, nodes: id -> {x, y}}.
function layoutOperators(g, isOpen) {
  const pos = {groups: new Map(), nodes: new Map(), width: 0, height: 0};
  let y = 0;
  for (const grp of g.groups) {
    let h = kHeadH;
    if (isOpen(grp)) {
      const rows = layoutGroup(g, grp);
      rows.forEach((row, r) => row.forEach((n, c) => {
        const x = kLane + kPad + c * (kNodeW + kGapX);
        pos.nodes.set(n.id, {x, y: y + kHeadH + kPad + r * (kNodeH + kGapY)});
        pos.width = Math.max(pos.width, x + kNodeW + kPad);
      }));
      h += 2 * kPad + rows.length * (kNodeH + kGapY) - kGapY;
    }
    pos.groups.set(grp.key, {y, h});
    y += h + kGapY;
  }
  pos.height = y;
  return pos;
}

// The magnitude of captured values as a fill: blue (|x| ~ 1e-3) to red (|x| ~ 1e2), log scale.
function magnitudeColor(absmean) {
  const t = Math.min(1, Math.max(0, (Math.log10(absmean || 1e-9) + 3) / 5));
  return `hsl(${Math.round(220 - 220 * t)}, 85%, 88%)`;
}

// A node's captured values as a grid of cells (diverging: blue < 0 < red), scaled by max |x|.
function paintHeatmap(canvas, values) {
  const vs = values || [];
  const cols = Math.ceil(Math.sqrt(vs.length || 1)), rows = Math.ceil((vs.length || 1) / cols);
  const ctx = canvas.getContext('2d');
  const cw = canvas.width / cols, ch = canvas.height / rows;
  ctx.clearRect(0, 0, canvas.width, canvas.height);
  const scale = Math.max(1e-12, ...vs.map((v) => Math.abs(v ?? 0)));
  vs.forEach((v, i) => {
    const t = (v ?? 0) / scale;
    ctx.fillStyle = t >= 0 ? `rgba(214, 48, 39, ${t})` : `rgba(45, 91, 215, ${-t})`;
    ctx.fillRect((i % cols) * cw, Math.floor(i / cols) * ch, Math.ceil(cw), Math.ceil(ch));
  });
}

// The captured part of a node box: fill by magnitude, heatmap canvas, stats beside it.
function paintNode(box, s) {
  if (!s || !s.stats) return;
  box.style.background = magnitudeColor(s.stats.absmean);
  let cv = box.querySelector('canvas.heat');
  if (!cv) { cv = el('canvas', {class: 'heat', width: '32', height: '32', 'data-heatmap-for': box.dataset.nodeId}); box.append(cv); }
  paintHeatmap(cv, s.values);
  box.querySelector('.live').textContent = state.top && isLogits(+box.dataset.nodeId) ? topText(state.top) :
    `|x| ${fmtNum(s.stats.absmean)} [${fmtNum(s.stats.min)}, ${fmtNum(s.stats.max)}]`;
}

const kBackendColors = ['#2d5bd7', '#d7832d', '#2da55b', '#a52dd7'];
function backendColor(g, b) {
  const i = (g.backends || []).indexOf(b);
  return kBackendColors[Math.max(0, i) % kBackendColors.length];
}

function nodeBox(g, n, p) {
  const box = el('div', {
    class: 'node op-' + n.op + (n.fused ? ' fused' : '') + (state.selected === n.id ? ' selected' : ''),
    'data-node-id': String(n.id), role: 'button', tabindex: '0',
    style: `left:${p.x}px;top:${p.y}px;width:${kNodeW}px;height:${kNodeH}px;border-left-color:${backendColor(g, n.backend)}`,
    title: n.name + ' ' + n.op + ' ' + fmtShape(n.shape) + ' ' + n.dtype + (n.fused ? ' from ' + (kFusedFrom[n.op] || '?') : ''),
    onclick: () => select(n.id), onkeydown: (e) => { if (e.key === 'Enter') select(n.id); },
  },
  el('div', {class: 'op', text: n.op + (n.fused ? ' (fused)' : '')}),
  el('div', {class: 'name', text: n.name}),
  el('div', {class: 'shape', text: fmtShape(n.shape) + ' ' + n.dtype + (n.backend ? ' · ' + n.backend : '')}),
  el('div', {class: 'live'}));
  paintNode(box, state.stats[state.phase].get(n.id));
  if (state.query) box.classList.add(nodeMatches(n) ? 'match' : 'dim');
  return box;
}

const nodeMatches = (n) => (n.name + ' ' + n.op).toLowerCase().includes(state.query);
function groupMatches(grp) { return state.query && grp.nodes.some(nodeMatches); }

// An edge as an SVG path from the bottom of its source to the top of its target; one that skips
// groups runs down the left lane so that long links (positions, KV rows) do not cross the boxes.
function edgePath(a, b, far) {
  if (far) {
    const lx = 6 + (a.x % 29);
    return `M${a.x},${a.y} C${a.x},${a.y + 20} ${lx},${a.y + 20} ${lx},${a.y + 40} L${lx},${b.y - 40} C${lx},${b.y - 20} ${b.x},${b.y - 20} ${b.x},${b.y}`;
  }
  const dy = Math.max(20, (b.y - a.y) / 2);
  return `M${a.x},${a.y} C${a.x},${a.y + dy} ${b.x},${b.y - dy} ${b.x},${b.y}`;
}

function renderOperators(root, g) {
  const t0 = performance.now();
  const isOpen = (grp) => state.expandAll || state.expanded.has(grp.key) || groupMatches(grp);
  const pos = layoutOperators(g, isOpen);
  nodeBoxes.clear();
  unpainted.clear();
  const width = Math.max(pos.width, 700);
  const groupOf = g.groupOf;
  const canvas = el('div', {class: 'op-canvas', style: `height:${pos.height}px;width:${width}px`});
  const svg = svgEl('svg', {class: 'edges', width: String(width), height: String(pos.height)});
  const frag = document.createDocumentFragment();
  const addPath = (d, cls, attr, value) => frag.append(svgEl('path', {d, class: cls, [attr]: value}));
  // Where an edge attaches: the node's box when its group is open, else its group's box.
  const anchor = (id, bottom) => {
    const p = pos.nodes.get(id);
    if (p) return {x: p.x + kNodeW / 2, y: p.y + (bottom ? kNodeH : 0)};
    const gp = pos.groups.get(groupOf.get(id).key);
    return {x: kLane + 200 + (id % 7) * 12, y: gp.y + (bottom ? kHeadH : 0)};
  };
  const groupIndex = new Map(g.groups.map((grp, i) => [grp.key, i]));
  const seen = new Set();
  for (const n of g.nodes) {
    const dg = groupOf.get(n.id);
    for (const s of n.inputs || []) {
      const sg = groupOf.get(s);
      if (!sg) continue;
      const srcShown = pos.nodes.has(s), dstShown = pos.nodes.has(n.id);
      const far = groupIndex.get(dg.key) - groupIndex.get(sg.key) > 1;
      const kv = g.byId.get(s).op === 'kv_store' || g.byId.get(s).op === 'kv_cache';
      const cls = 'edge' + (far ? ' far' : '') + (kv ? ' kv' : '');
      if (srcShown && dstShown) { addPath(edgePath(anchor(s, true), anchor(n.id, false), far), cls, 'data-edge', `${s}->${n.id}`); continue; }
      if (sg === dg) continue;  // inside a closed group: drawn when it opens
      const key = `${srcShown ? s : sg.key}->${dstShown ? n.id : dg.key}`;
      if (seen.has(key)) continue;
      seen.add(key);
      addPath(edgePath(anchor(s, true), anchor(n.id, false), far), cls + ' group-edge', 'data-group-edge', key);
    }
  }
  svg.append(frag);
  canvas.append(svg);
  for (const grp of g.groups) {
    const open = isOpen(grp);
    const gp = pos.groups.get(grp.key);
    const ops = {};
    for (const n of grp.nodes) ops[n.op] = (ops[n.op] || 0) + 1;
    const summary = grp.nodes.length + ' nodes: ' + Object.entries(ops).map(([k, v]) => v + ' ' + k).join(', ');
    const sec = el('section', {class: 'group' + (open ? ' open' : ''), 'data-group': grp.key,
      style: `top:${gp.y}px;height:${gp.h}px;left:${kLane}px;width:${width - kLane}px`},
    el('button', {type: 'button', class: 'group-head', 'aria-expanded': String(open), onclick: () => toggleGroup(grp.key)},
      el('span', {text: (open ? '▾ ' : '▸ ') + grp.key}), el('span', {class: 'summary', text: summary})));
    if (open) {
      const nodes = el('div', {class: 'nodes'});
      for (const n of grp.nodes) {
        const p = pos.nodes.get(n.id);
        const box = nodeBox(g, n, {x: p.x - kLane, y: p.y - gp.y});
        nodeBoxes.set(n.id, {box, y: p.y});
        nodes.append(box);
      }
      sec.append(nodes);
    }
    canvas.append(sec);
  }
  root.append(operatorsLegend(g), canvas);
  document.body.dataset.renderMs = (performance.now() - t0).toFixed(1);
}

function operatorsLegend(g) {
  const items = (g.backends || []).map((b) => el('span', {class: 'key'},
    el('i', {style: `background:${backendColor(g, b)}`}), ' left border: backend ' + b));
  return el('div', {class: 'legend'}, ...items,
    el('span', {class: 'key'}, el('i', {style: `background:${magnitudeColor(1e-3)}`}), el('i', {style: `background:${magnitudeColor(1)}`}),
      el('i', {style: `background:${magnitudeColor(1e2)}`}), ' fill: mean |x| of the last run, 1e-3 … 1e2'),
    el('span', {class: 'key'}, '▦ values: blue < 0 < red'),
    el('span', {class: 'key'}, '┆ dashed: KV cache · faint: links that skip layers (left lane) · dashed box: fused op'));
}

function toggleGroup(key) {
  if (state.expandAll) { state.expandAll = false; for (const grp of graph().groups) state.expanded.add(grp.key); }
  if (state.expanded.has(key)) state.expanded.delete(key); else state.expanded.add(key);
  setUrlParam('expand', null);
  render();
}

// Node events arrive by the thousand per second in a live run: their boxes are lit once per
// frame, and only the boxes on screen are painted (heatmap, fill, stats: ~70 µs each); the others
// are painted when scrolled to, so the page keeps drawing frames with every layer open.
const pendingNodes = new Map();  // id -> node event of the shown phase
const nodeBoxes = new Map();     // id -> {box, y}: its box in Operators and its top in the canvas
const unpainted = new Set();     // ids whose box shows older values than state.stats
// Whether a canvas y is on screen (with a margin), measured once per frame before any write.
function onScreen() {
  const view = $('#view'), canvas = view.querySelector('.op-canvas');
  if (!canvas) return () => false;
  const top = view.scrollTop - canvas.offsetTop - 200, bottom = top + view.clientHeight + 400;
  return (y) => y + kNodeH >= top && y <= bottom;
}
function flushNodes() {
  const lit = [], shown = onScreen();
  for (const [id, e] of pendingNodes) {
    const at = nodeBoxes.get(id);
    if (!at || !at.box.isConnected) continue;
    lit.push(at.box);
    if (shown(at.y)) { paintNode(at.box, e); unpainted.delete(id); } else unpainted.add(id);
  }
  pendingNodes.clear();
  for (const box of lit) box.classList.add('lit');
  if (lit.length) setTimeout(() => { for (const box of lit) box.classList.remove('lit'); }, 250);
}
function paintScrolledTo() {
  const shown = onScreen();
  for (const id of unpainted) {
    const at = nodeBoxes.get(id);
    if (!at || !at.box.isConnected) { unpainted.delete(id); continue; }
    if (shown(at.y)) { paintNode(at.box, state.stats[state.phase].get(id)); unpainted.delete(id); }
  }
}
function light(e) {
  if (!pendingNodes.size) requestAnimationFrame(flushNodes);
  pendingNodes.set(e.id, e);
}
