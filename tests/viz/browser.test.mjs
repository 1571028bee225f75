// The viz page in a real headless browser (Debian chromium, driven by playwright-core from npm;
// no browser download): node counts with ?expand=all, the inspector, the three views, a live
// run against the CLI's greedy text, a replayed MINFER_TRACE file, screenshots of each view.
//   MINFER_BIN=... MINFER_SMOLLM2=... PLAYWRIGHT_NODE_MODULES=.deps/npm-playwright/node_modules \
//   MINFER_VIZ_ARTIFACTS=build/viz-screenshots node tests/viz/browser.test.mjs
import {spawn, spawnSync} from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import assert from 'node:assert/strict';
import {browserChecks} from '../browser-checks.mjs';

const MINFER = process.env.MINFER_BIN, MODEL = process.env.MINFER_SMOLLM2;
// MINFER_VIZ_ARGS: flags for both the page's server and the CLI it is compared with (e.g.
// "-ngl all --device Vulkan0": the page of a run on a GPU).
const EXTRA = (process.env.MINFER_VIZ_ARGS || '').split(' ').filter((a) => a);
const checks = browserChecks('MINFER_VIZ_ARTIFACTS', 'viz-');
const ART = checks.art, check = checks.check;

function startViz(args = [MODEL, ...EXTRA]) {
  return new Promise((resolve, reject) => {
    const p = spawn(MINFER, ['viz', ...args, '--port', '0', '-t', '2'], {stdio: ['ignore', 'ignore', 'pipe']});
    let err = '';
    p.stderr.on('data', (d) => {
      err += d;
      const m = /on (http:\/\/[\d.]+:\d+)\//.exec(err);
      if (m) resolve({p, url: m[1]});
    });
    p.on('exit', (c) => reject(new Error('minfer viz exited ' + c + ': ' + err)));
  });
}

function cliReply(prompt, n) {
  const r = spawnSync(MINFER, [MODEL, prompt, '-n', String(n), '--temp', '0', '-t', '2', ...EXTRA], {encoding: 'utf8'});
  assert.equal(r.status, 0, r.stderr);
  return r.stdout;
}

const shape = (s) => '[' + s.filter((d, i) => i < 2 || d !== 1).join(', ') + ']';

const {p: server, url} = await startViz();
const browser = await checks.launch();
const page = await browser.newPage({viewport: {width: 1400, height: 900}});
const pageErrors = [];
page.on('pageerror', (e) => pageErrors.push(String(e)));
const graph = await (await fetch(url + '/viz/graph')).json();

try {
  await check('every node is a [data-node-id] element with ?expand=all', async () => {
    for (const phase of ['prefill', 'decode']) {
      await page.goto(`${url}/?view=operators&expand=all&phase=${phase}`);
      await page.waitForSelector('body[data-ready="true"]');
      const ids = await page.$$eval('[data-node-id]', (els) => els.map((e) => +e.dataset.nodeId));
      assert.equal(ids.length, graph[phase].nodes.length, phase);
      assert.deepEqual(ids, graph[phase].nodes.map((n) => n.id));
    }
    await page.goto(`${url}/?view=operators&expand=all`);
    await page.waitForSelector('body[data-ready="true"]');
    await page.screenshot({path: path.join(ART, 'operators-expanded.png')});
  });

  await check('every input of a node is an edge from its producer: [data-edge="SRC->DST"]', async () => {
    for (const phase of ['prefill', 'decode']) {
      await page.goto(`${url}/?view=operators&expand=all&phase=${phase}`);
      await page.waitForSelector('body[data-ready="true"]');
      const edges = await page.$$eval('[data-edge]', (els) => els.map((e) => e.dataset.edge).sort());
      const links = graph[phase].nodes.flatMap((n) => n.inputs.map((s) => `${s}->${n.id}`)).sort();
      assert.equal(edges.length, links.length, phase);
      assert.deepEqual(edges, links);
    }
    // Closed layers: only their in/out links, as layer edges; opening one adds its own edges.
    await page.goto(`${url}/?view=operators`);
    await page.waitForSelector('body[data-ready="true"]');
    assert.equal(await page.locator('[data-edge]').count(), 0);
    assert.ok(await page.locator('[data-group-edge="blk.2->blk.3"]').count() === 1);
    await page.click('section.group[data-group="blk.3"] > .group-head');
    const inBlk3 = new Set(graph.prefill.nodes.filter((n) => n.name.startsWith('blk.3.')).map((n) => n.id));
    const blk3Links = graph.prefill.nodes.filter((n) => inBlk3.has(n.id)).flatMap((n) => n.inputs.filter((s) => inBlk3.has(s)));
    const shown = await page.$$eval('[data-edge]', (els) => els.map((e) => e.dataset.edge.split('->').map(Number)));
    assert.equal(shown.filter(([a, b]) => inBlk3.has(a) && inBlk3.has(b)).length, blk3Links.length);
  });

  await check('layers collapse to one box each and expand on click', async () => {
    await page.goto(`${url}/?view=operators`);
    await page.waitForSelector('body[data-ready="true"]');
    const layers = graph.prefill.nodes.filter((n) => /^blk\.\d+\./.test(n.name)).map((n) => n.name.split('.')[1]);
    const nLayers = new Set(layers).size;
    assert.equal(await page.locator('section.group[data-group^="blk."]').count(), nLayers);
    assert.equal(await page.locator('section.group[data-group="blk.3"] [data-node-id]').count(), 0);
    await page.click('section.group[data-group="blk.3"] > .group-head');
    const inLayer = graph.prefill.nodes.filter((n) => n.name.startsWith('blk.3.')).length;
    assert.equal(await page.locator('section.group[data-group="blk.3"] [data-node-id]').count(), inLayer);
    await page.screenshot({path: path.join(ART, 'operators.png')});
  });

  await check('clicking a node opens its inspector with its shape', async () => {
    const n = graph.prefill.nodes.find((x) => x.name === 'blk.3.attn_q');
    assert.ok(n, 'blk.3.attn_q in the graph');
    await page.click(`[data-node-id="${n.id}"]`);
    await page.waitForSelector(`[data-inspector-for="${n.id}"]`);
    assert.equal(await page.textContent('#inspector .inspector-shape'), shape(n.shape));
    const inputs = await page.locator('#inspector tr:has(th:text("inputs")) a').count();
    assert.equal(inputs, n.inputs.length);
  });

  await check('search finds nodes and opens their layers', async () => {
    await page.fill('#search', 'blk.7.ffn_down');
    const hits = await page.locator('.node.match').count();
    assert.ok(hits >= 1, 'a match');
    assert.ok(await page.locator('section.group[data-group="blk.7"].open').count() === 1);
    await page.fill('#search', '');
  });

  // A live run with every layer open, its frame rate measured in the page (requestAnimationFrame
  // callbacks per second from the click to the end of the run): [fps, nodes lit].
  async function liveRun(base, prompt, n) {
    await page.goto(`${base}/?view=operators&expand=all`);
    await page.waitForSelector('body[data-ready="true"][data-live="connected"]');
    await page.evaluate(() => {
      // Frames the page draws during the run (requestAnimationFrame callbacks per second).
      window.__frames = [];
      const tick = (t) => { window.__frames.push(t); if (document.body.dataset.runState !== 'finished') requestAnimationFrame(tick); };
      requestAnimationFrame(tick);
      window.__lit = new Set();
      new MutationObserver((ms) => { for (const m of ms) if (m.target.classList && m.target.classList.contains('lit')) window.__lit.add(m.target.dataset.nodeId); })
        .observe(document.getElementById('view'), {subtree: true, attributes: true, attributeFilter: ['class']});
    });
    await page.fill('#prompt', prompt);
    await page.fill('#max-tokens', String(n));
    await page.fill('#temperature', '0');
    await page.click('#run');
    await page.waitForSelector('body[data-run-state="finished"]', {timeout: 120000});
    const lit = await page.evaluate(() => window.__lit.size);
    const fps = await page.evaluate(() => { const f = window.__frames; return (f.length - 1) / ((f[f.length - 1] - f[0]) / 1000); });
    return [fps, lit];
  }

  const prompt = 'What is the capital of France?', n = 16;  // a run of ~2 s: a frame rate, not one frame
  const trace = path.join(ART, 'run.trace.json');
  const want = cliReply(prompt, n);
  await check('a live run lights nodes, shows the CLI\'s text and keeps >= 30 frames per second (30 layers)', async () => {
    // Up to 3 runs, the best counted: the page shares 2 cores with the model and with the other
    // tests ctest runs beside it, so one run can lose frames to them rather than to the page.
    const rates = [];
    for (let i = 0; i < 3 && !(rates.length && Math.max(...rates) >= 30); ++i) {
      const [fps, lit] = await liveRun(url, prompt, n);
      assert.equal(await page.textContent('#live-text'), want);
      assert.ok(lit > 100, `${lit} nodes lit`);
      rates.push(fps);
      console.log(`  live run (30 layers, all open), ${lit} nodes lit: ${fps.toFixed(1)} frames per second`);
    }
    assert.ok(Math.max(...rates) >= 30, `${rates.map((f) => f.toFixed(1)).join(', ')} frames per second`);
    await page.screenshot({path: path.join(ART, 'live-run.png')});
  });

  await check('views switch by button and URL; pipeline has measured times', async () => {
    await page.click('button[data-view="pipeline"]');
    await page.waitForSelector('#view[data-view="pipeline"] table[data-phase-table="prefill"] tr[data-op="matmul"]');
    assert.ok(page.url().includes('view=pipeline'));
    assert.ok(await page.locator('table[data-phase-table="decode"] tr[data-op="matmul"]').count() === 1);
    await page.screenshot({path: path.join(ART, 'pipeline.png')});
    await page.click('button[data-view="shapes"]');
    await page.waitForSelector('#view[data-view="shapes"] .shapes-list li');
    assert.ok(page.url().includes('view=shapes'));
    const rows = await page.locator('.shapes-list li').count();
    // Layer 0's nodes but its weights, and the copies it reads (split boundaries, with -ngl).
    const nodes = graph[await page.evaluate(() => new URLSearchParams(location.search).get('phase'))].nodes;
    const inLayer0 = (x) => x.name.startsWith('blk.0.');
    const feedsLayer0 = (x) => x.op === 'copy' && inLayer0(nodes.find((y) => (y.inputs || []).includes(x.id)) || {name: ''});
    assert.equal(rows, nodes.filter((x) => (inLayer0(x) && x.op !== 'weight') || feedsLayer0(x)).length);
    await page.screenshot({path: path.join(ART, 'shapes.png')});
    await page.goto(`${url}/?view=pipeline`);
    await page.waitForSelector('body[data-ready="true"]');
    assert.equal(await page.getAttribute('button[data-view="pipeline"]', 'aria-pressed'), 'true');
  });

  await check('a MINFER_TRACE file replays with the same text', async () => {
    const r = spawnSync(MINFER, [MODEL, prompt, '-n', '4', '--temp', '0', '-t', '2'], {encoding: 'utf8', env: {...process.env, MINFER_TRACE: trace}});
    assert.equal(r.status, 0, r.stderr);
    await page.goto(`${url}/?view=operators&trace=${encodeURIComponent(trace)}`);
    await page.waitForSelector('body[data-run-state="finished"]', {timeout: 60000});
    assert.equal(await page.textContent('#live-text'), r.stdout);
    await page.click('button[data-view="pipeline"]');
    await page.waitForSelector('table[data-phase-table="prefill"] tr[data-op="matmul"]');
    await page.screenshot({path: path.join(ART, 'trace-replay.png')});
  });

  const traceDoc = JSON.parse(fs.readFileSync(trace, 'utf8'));
  const nodeEvents = traceDoc.events.filter((e) => e.type === 'node');
  await check('a heatmap and stats per captured node; top-5 on the logits node', async () => {
    await page.goto(`${url}/?view=operators&expand=all&phase=decode&trace=${encodeURIComponent(trace)}`);
    await page.waitForSelector('body[data-run-state="finished"]', {timeout: 60000});
    const phase = await page.evaluate(() => new URLSearchParams(location.search).get('phase'));
    const captured = new Set(nodeEvents.filter((e) => (e.step === 0) === (phase === 'prefill')).map((e) => e.id));
    const heat = await page.$$eval('#view canvas[data-heatmap-for]', (els) => els.map((e) => +e.dataset.heatmapFor));
    assert.equal(heat.length, captured.size);
    assert.deepEqual(new Set(heat), captured);
    const logits = traceDoc.graphs[phase].outputs[0];
    assert.match(await page.textContent(`[data-node-id="${logits}"] .live`), /top: /);
    await page.click(`[data-node-id="${logits}"]`);
    assert.equal(await page.locator('#inspector table.top5 tr').count(), 5);
    assert.ok(await page.locator('#inspector canvas.heat-big').count() === 1);
    await page.screenshot({path: path.join(ART, 'heatmaps.png')});
  });

  await check('playback (#step, #play, #pause) visits nodes in execution order', async () => {
    const visited = [];
    for (let i = 0; i < 60; i++) {
      await page.click('#step');
      visited.push(+(await page.getAttribute('body', 'data-play-node')));
    }
    assert.deepEqual(visited, nodeEvents.slice(0, 60).map((e) => e.id));
    const order = new Map(traceDoc.graphs.prefill.nodes.map((n, i) => [n.id, i]));
    for (let i = 1; i < visited.length; i++) assert.ok(order.get(visited[i]) > order.get(visited[i - 1]), `${visited[i - 1]} before ${visited[i]}`);
    await page.screenshot({path: path.join(ART, 'playback.png')});
    await page.fill('#speed', '1');
    await page.click('#play');
    await page.waitForFunction((n) => +document.body.dataset.playNode !== n, visited[visited.length - 1]);
    await page.click('#pause');
    assert.equal(await page.getAttribute('body', 'data-playback'), 'paused');
    const at = await page.getAttribute('body', 'data-play-node');
    await page.waitForTimeout(200);
    assert.equal(await page.getAttribute('body', 'data-play-node'), at);
  });

  await check('Shape flow: each rail node shows the export\'s shape; playback moves the packet and counts KV cells', async () => {
    const leaf = (n) => ['weight', 'input', 'kv_cache'].includes(n.op);
    for (const phase of ['prefill', 'decode']) {
      await page.goto(`${url}/?view=shapes&phase=${phase}`);
      await page.waitForSelector('body[data-ready="true"]');
      // Layer 0 stands for every layer; the last layer's own nodes (prefill's tail gathers) too.
      const names = new Set(graph[phase].nodes.map((n) => n.name));
      const want = graph[phase].nodes.filter((n) => !leaf(n) && (!n.name.startsWith('blk.') || n.name.startsWith('blk.0.') ||
        !names.has(n.name.replace(/^blk\.\d+\./, 'blk.0.'))));
      const got = await page.$$eval('[data-shape-node]', (els) => els.map((e) => [+e.dataset.shapeNode, e.textContent]));
      assert.deepEqual(got.map(([id]) => id), want.map((n) => n.id), phase);
      got.forEach(([, text], i) => assert.ok(text.includes(shape(want[i].shape)), `${want[i].name}: ${text} has ${shape(want[i].shape)}`));
      assert.match(await page.textContent('.layer-bracket > .bracket-label'), /× \d+ layers/);
    }
    // One decode step animated from the export alone: the nodes in order, one KV cell.
    await page.click('[data-play-source="decode"]');
    await page.click('#pause');
    const computed = graph.decode.nodes.filter((n) => !leaf(n));
    const first = +(await page.getAttribute('body', 'data-play-node'));
    const at = computed.findIndex((n) => n.id === first);
    for (let i = 1; i <= 5; i++) {
      await page.click('#step');
      assert.equal(+(await page.getAttribute('body', 'data-play-node')), computed[at + i].id);
    }
    assert.equal(await page.getAttribute('.kv-footer', 'data-kv-cells'), '1');
    assert.equal(await page.locator('.packet').count(), 1);
    // Play runs the pass to its last node and stops there ("done"); Play again starts it over.
    await page.fill('#speed', '1');
    await page.click('#play');
    await page.waitForSelector('body[data-playback="done"]', {timeout: 30000});
    assert.equal(+(await page.getAttribute('body', 'data-play-node')), computed[computed.length - 1].id);
    await page.fill('#speed', '400');
    await page.click('#play');
    await page.click('#pause');
    assert.equal(+(await page.getAttribute('body', 'data-play-node')), computed[0].id, 'Play again: from the first node');
    await page.goto(`${url}/?view=shapes&trace=${encodeURIComponent(trace)}`);
    await page.waitForSelector('body[data-run-state="finished"]', {timeout: 60000});
    for (let i = 0; i < 12; i++) await page.click('#step');
    const playId = +(await page.getAttribute('body', 'data-play-node'));
    const played = traceDoc.graphs.prefill.nodes.find((n) => n.id === playId);
    const twin = traceDoc.graphs.prefill.nodes.find((n) => n.name === played.name.replace(/^blk\.\d+\./, 'blk.0.'));
    assert.equal(await page.getAttribute('[data-shape-node].current', 'data-shape-node'), String(twin.id));
    assert.equal(await page.locator('.packet').count(), 1);
    const firstStep = traceDoc.events.find((e) => e.type === 'step');
    assert.equal(await page.getAttribute('.kv-footer', 'data-kv-cells'), String(firstStep.n_tokens));
    assert.ok(await page.locator('[data-shape-node] .badge').count() >= 12);
    await page.screenshot({path: path.join(ART, 'shape-flow.png')});
  });

  await check('Pipeline: stages as a flow with the layer loop, drill-down, playback marks the stage', async () => {
    await page.click('button[data-view="pipeline"]');
    const nLayers = traceDoc.graphs.prefill.nodes.reduce((k, n) => Math.max(k, /^blk\.(\d+)\./.test(n.name) ? +n.name.split('.')[1] + 1 : k), 0);
    assert.equal(await page.getAttribute('.layer-loop', 'data-loop'), String(nLayers));
    assert.equal(await page.locator('.layer-loop [data-stage]').count(), 6);
    await page.click('[data-stage="FFN"] .stage-head');
    const ffnOps = await page.$$eval('[data-stage="FFN"] .stage-ops a', (as) => as.map((a) => a.textContent));
    assert.ok(ffnOps.length >= 2 && ffnOps.every((t) => t.startsWith('blk.0.ffn_')), ffnOps.join(', '));
    await page.click('#step');
    assert.equal(await page.locator('#view .stage.current').count(), 1);
    await page.screenshot({path: path.join(ART, 'pipeline-flow.png')});
  });

  // render() plus the layout and paint of the next frame, measured in the page; printed.
  async function renderTime(base, label) {
    const times = [];
    for (const q of ['', '&expand=all']) {
      await page.goto(`${base}/?view=operators${q}`);
      await page.waitForSelector('body[data-ready="true"]');
      const ms = await page.evaluate(async () => {
        const t0 = performance.now();
        render();
        await new Promise((done) => requestAnimationFrame(() => setTimeout(done, 0)));
        return performance.now() - t0;
      });
      console.log(`  ${label}, ${q ? 'all layers open' : 'layers closed'}: ${ms.toFixed(0)} ms (script ${await page.getAttribute('body', 'data-render-ms')} ms), ` +
        `${await page.locator('[data-node-id]').count()} nodes, ${await page.locator('[data-edge]').count()} edges`);
      times.push(ms);
    }
    return Math.max(...times);
  }

  await check('30 and 80 layers render in under 1.5 s; the frame rate of a live run at 80 layers', async () => {
    const layers30 = new Set(graph.prefill.nodes.filter((n) => /^blk\.\d+\./.test(n.name)).map((n) => n.name.split('.')[1])).size;
    assert.ok(await renderTime(url, `${layers30} layers (SmolLM2-135M)`) < 1500);
    const model = path.join(ART, 'llama-80-layers.gguf');
    const r = spawnSync(process.env.MINFER_MAKE_MODEL, ['--vocab-bytes', '--preset', 'tiny', '--n-layer', '80', '--out', model], {encoding: 'utf8'});
    assert.equal(r.status, 0, r.stderr);
    const {p: server80, url: url80} = await startViz([model, '-c', '256']);
    try {
      const g80 = await (await fetch(url80 + '/viz/graph')).json();
      assert.ok(await renderTime(url80, '80 layers (minfer-make-test-model --vocab-bytes --preset tiny --n-layer 80)') < 1500);
      assert.equal(await page.locator('[data-edge]').count(), g80.prefill.nodes.reduce((k, n) => k + n.inputs.length, 0));
      await page.screenshot({path: path.join(ART, 'operators-80-layers.png')});
      const [fps, lit] = await liveRun(url80, 'Hi', 4);
      console.log(`  live run (80 layers, all open), ${lit} nodes lit: ${fps.toFixed(1)} frames per second`);
    } finally {
      server80.kill('SIGTERM');
      fs.rmSync(model);
    }
  });

  await check('"Select a sample model" opens the export of each family the build made, found without flags; decode shapes', async () => {
    const dir = path.join(path.dirname(path.dirname(MINFER)), 'viz-samples');  // BUILD/bin/minfer: BUILD/viz-samples
    const {p: serverS, url: urlS} = await startViz([MODEL]);
    try {
      await page.goto(`${urlS}/?view=operators&expand=all`);
      await page.waitForSelector('body[data-ready="true"][data-live="connected"]');
      // A live run first: its values must not carry over onto a sample (ids coincide).
      await page.fill('#prompt', 'Hi');
      await page.fill('#max-tokens', '2');
      await page.click('#run');
      await page.waitForSelector('body[data-run-state="finished"]', {timeout: 120000});
      assert.ok(await page.locator('canvas[data-heatmap-for]').count() > 0, 'the run painted heatmaps');
      const names = await page.$$eval('#sample option[value]:not([value=""])', (os) => os.map((o) => o.value));
      assert.deepEqual(names, fs.readdirSync(dir).filter((f) => f.endsWith('.json')).sort());
      assert.ok(names.length >= 7, names.join(' '));
      for (const name of names) {
        const g = JSON.parse(fs.readFileSync(path.join(dir, name), 'utf8')).prefill;
        await page.selectOption('#sample', name);
        await page.waitForSelector(`body[data-sample="${name}"]`);
        await page.click('button[data-phase="prefill"]');  // the live run had switched to decode
        assert.equal(await page.locator('[data-node-id]').count(), g.nodes.length, name);
        assert.equal(await page.locator('[data-edge]').count(), g.nodes.reduce((k, n) => k + n.inputs.length, 0), name);
        assert.equal(await page.locator('canvas[data-heatmap-for]').count(), 0, `${name}: no values of another model's run`);
        assert.equal(await page.getAttribute('body', 'data-live'), 'closed', `${name}: the live model's events no longer apply`);
      }
      assert.ok(await page.isDisabled('#run'));
      await page.screenshot({path: path.join(ART, 'sample.png')});
      // A sample's decode is its own export (`minfer logits --tokens 1`): one token, not prefill's.
      const last = JSON.parse(fs.readFileSync(path.join(dir, names[names.length - 1]), 'utf8'));
      assert.equal(last.decode.params.n_tokens, 1);
      await page.click('button[data-view="shapes"]');
      await page.click('button[data-phase="decode"]');
      const rail = await page.$$eval('[data-shape-node]', (els) => els.map((e) => [+e.dataset.shapeNode, e.querySelector('.dims').textContent]));
      const byId = new Map(last.decode.nodes.map((x) => [x.id, x]));
      assert.ok(rail.length > 10);
      for (const [id, dims] of rail) assert.equal(dims, shape(byId.get(id).shape), `${byId.get(id).name}`);
      const q = last.decode.nodes.find((x) => x.name === 'blk.0.attn_q');
      assert.equal(await page.textContent(`[data-shape-node="${q.id}"] .dims`), shape(q.shape));
      assert.equal(q.shape[1], 1, 'decode: one token');
    } finally {
      serverS.kill('SIGTERM');
    }
  });

  await check('no script errors on the page', async () => {
    assert.deepEqual(pageErrors, []);
  });
} finally {
  await browser.close();
  server.kill('SIGTERM');
}
checks.finish('viz browser');
