// The chat page of `minfer serve` (GET /) in a real headless browser (Debian chromium driven by
// playwright-core from npm): a streamed reply equal to the API's greedy reply, conversations
// kept in localStorage across reloads, new/delete, Markdown with HTML escaped, Stop freeing the
// slot, the API-key prompt, no page errors; a screenshot lands in MINFER_WEBUI_ARTIFACTS.
//   MINFER_BIN=... MINFER_SMOLLM2=... PLAYWRIGHT_NODE_MODULES=.deps/npm-playwright/node_modules \
//   node tests/server/webui.test.mjs
import {spawn} from 'node:child_process';
import net from 'node:net';
import path from 'node:path';
import assert from 'node:assert/strict';
import {browserChecks} from '../browser-checks.mjs';

const MINFER = process.env.MINFER_BIN, MODEL = process.env.MINFER_SMOLLM2;
const checks = browserChecks('MINFER_WEBUI_ARTIFACTS', 'webui-');
const ART = checks.art, check = checks.check;

function freePort() {
  return new Promise((resolve) => {
    const s = net.createServer();
    s.listen(0, '127.0.0.1', () => { const p = s.address().port; s.close(() => resolve(p)); });
  });
}

async function startServer(...extra) {
  const port = await freePort();
  const p = spawn(MINFER, ['serve', MODEL, '--port', String(port), '-np', '2', '-c', '4096', '-t', '2', '--temp', '0',
                           '--slots', ...extra], {stdio: ['ignore', 'ignore', 'inherit']});
  const url = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 300; i++) {
    try { if ((await fetch(url + '/health')).ok) return {p, url}; } catch {}
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error('minfer serve did not start');
}

async function stopServer(s) {
  const done = new Promise((r) => s.p.on('exit', r));
  s.p.kill('SIGTERM');
  return done;
}

async function apiReply(url, content, headers = {}) {
  const r = await fetch(url + '/v1/chat/completions', {method: 'POST', headers: {'Content-Type': 'application/json', ...headers},
    body: JSON.stringify({messages: [{role: 'user', content}]})});
  return (await r.json()).choices[0].message.content;
}

const server = await startServer();
const browser = await checks.launch();
const page = await browser.newPage({viewport: {width: 1200, height: 800}});
const pageErrors = [];
page.on('pageerror', (e) => pageErrors.push(String(e)));

async function sendMessage(text) {
  await page.fill('#input', text);
  await page.press('#input', 'Enter');
}
async function lastReply() {
  await page.waitForSelector('.message.assistant:not(.streaming)', {timeout: 120000});
  return page.$eval('#messages .message.assistant:last-child .content', (e) => e.textContent);
}

await check('the page loads, offline, and names the model', async () => {
  const res = await page.goto(server.url + '/');
  assert.equal(res.status(), 200);
  assert.equal(await page.title(), 'minfer chat');
  await page.waitForFunction(() => document.getElementById('model').textContent.startsWith('model: '));
  // Every resource came from this server.
  const external = await page.evaluate(() => performance.getEntriesByType('resource').map((r) => r.name)
    .filter((n) => !n.startsWith(location.origin)));
  assert.deepEqual(external, []);
});

await check('a streamed reply equals the API\'s greedy reply', async () => {
  // The server's default sampling is --temp 0 and the page sends none: both are greedy.
  const q = 'What is the capital of Germany?';
  const want = await apiReply(server.url, q);
  await sendMessage(q);
  const got = await lastReply();
  assert.equal(got.trim(), want.trim());
  assert.match(await page.textContent('#stats'), /tokens/);
  assert.equal(await page.$$eval('#conversations li', (l) => l.length), 1);
  assert.equal(await page.textContent('#conversations li .title'), q);
});

await check('conversations survive a reload; new and delete', async () => {
  await page.reload();
  await page.waitForSelector('.message.assistant');
  assert.equal(await page.$$eval('.message', (l) => l.length), 2);
  await page.click('#new-chat');
  assert.equal(await page.$$eval('#conversations li', (l) => l.length), 2);
  assert.equal(await page.$$eval('.message', (l) => l.length), 0);
  await sendMessage('Name three primary colors.');
  await lastReply();
  await page.reload();
  assert.equal(await page.$$eval('#conversations li', (l) => l.length), 2);
  await page.click('#conversations li:nth-child(2) .title');  // the older conversation
  assert.match(await page.textContent('#messages .message.user'), /Germany/);
  await page.click('#conversations li:nth-child(1) .delete');
  assert.equal(await page.$$eval('#conversations li', (l) => l.length), 1);
});

await check('Markdown: code blocks, lists, emphasis; HTML is shown, never run', async () => {
  await page.evaluate(() => {
    const md = 'Here:\n\n```python\nprint("<b>hi</b>")\n```\n\n- one\n- **two**\n\n1. first\n2. second\n\n' +
      'Some `code` and <script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2"> and [a link](https://example.org).';
    localStorage.setItem('minfer.chat.v1', JSON.stringify({current: 'x', conversations: [{id: 'x', title: 'md', updated: 1,
      messages: [{role: 'user', content: 'show me'}, {role: 'assistant', content: md}]}]}));
  });
  await page.reload();
  await page.waitForSelector('.message.assistant pre');
  const info = await page.$eval('.message.assistant .content', (e) => ({
    code: e.querySelector('pre code.language-python')?.textContent,
    ul: e.querySelectorAll('ul li').length, ol: e.querySelectorAll('ol li').length,
    strong: e.querySelector('strong')?.textContent, inline: e.querySelector('p code')?.textContent,
    scripts: e.querySelectorAll('script, img').length, link: e.querySelector('a')?.getAttribute('href'),
  }));
  assert.equal(info.code, 'print("<b>hi</b>")\n');
  assert.deepEqual([info.ul, info.ol, info.strong, info.inline, info.scripts, info.link], [2, 2, 'two', 'code', 0, 'https://example.org']);
  assert.equal(await page.evaluate(() => window.__pwned), undefined);
});

await check('Stop ends a long reply, keeps it and frees the slot', async () => {
  await page.click('#new-chat');
  await page.click('#settings summary');
  await page.fill('#max-tokens', '1500');  // within the slot's context (OpenAI refuses more)
  await page.dispatchEvent('#max-tokens', 'change');
  await sendMessage('Write a very long story about a dragon, with many chapters.');
  await page.waitForFunction(() => (document.querySelector('.message.assistant.streaming .content')?.textContent || '').length > 80,
    null, {timeout: 60000});
  await page.click('#stop');
  await page.waitForSelector('.message.assistant:not(.streaming)', {timeout: 10000});
  assert.ok(await page.isEnabled('#send'));
  assert.match(await page.textContent('#stats'), /stopped/);
  const kept = await page.evaluate(() => JSON.parse(localStorage.getItem('minfer.chat.v1')).conversations[0].messages[1].content);
  assert.ok(kept.length > 80);
  for (let i = 0; i < 50; i++) {  // the server notices the closed stream and frees the slot
    const slots = await (await fetch(server.url + '/slots')).json();
    if (slots.every((s) => !s.is_processing)) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  assert.fail('a slot is still busy 5 s after Stop');
});

await page.screenshot({path: path.join(ART, 'chat.png'), fullPage: true});

await check('with --api-key: the page loads, asks for the key, then works', async () => {
  const keyed = await startServer('--api-key', 'secret-key');
  try {
    const p2 = await browser.newPage();
    p2.on('pageerror', (e) => pageErrors.push(String(e)));
    assert.equal((await p2.goto(keyed.url + '/')).status(), 200);
    await p2.fill('#input', 'Hi');
    await p2.press('#input', 'Enter');
    await p2.waitForSelector('#error:not([hidden])');
    assert.match(await p2.textContent('#error'), /API key/);
    await p2.click('#settings summary');
    await p2.fill('#api-key', 'secret-key');
    await p2.dispatchEvent('#api-key', 'change');
    await p2.click('#new-chat');
    await p2.fill('#input', 'What is the capital of Germany?');
    await p2.press('#input', 'Enter');
    await p2.waitForSelector('.message.assistant:not(.streaming)', {timeout: 120000});
    assert.equal(await p2.isHidden('#error'), true);
    const want = await apiReply(keyed.url, 'What is the capital of Germany?', {Authorization: 'Bearer secret-key'});
    assert.equal((await p2.$eval('.message.assistant:last-child .content', (e) => e.textContent)).trim(), want.trim());
    await p2.close();
  } finally {
    await stopServer(keyed);
  }
});

await check('no page errors', async () => assert.deepEqual(pageErrors, []));

await browser.close();
const code = await stopServer(server);
checks.record(code === 0, code === 0 ? 'server exited 0 after SIGTERM' : `server exit code ${code}`);
checks.finish('webui');
