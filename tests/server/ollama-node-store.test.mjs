// The model store endpoints of a pool server driven by the official `ollama` npm package: pull
// (streamed and not), copy, delete. Run by test_ollama_store.py, which starts the server against
// a mocked registry: MINFER_URL is its base URL, OLLAMA_NODE_MODULES where npm put ollama.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';

const require = createRequire(process.env.OLLAMA_NODE_MODULES + '/');
const { Ollama } = require('ollama');

const ollama = new Ollama({ host: process.env.MINFER_URL });
const names = async () => (await ollama.list()).models.map((m) => m.name);

test('pull: a stream of progress ending in success, then listed', async () => {
  const statuses = [];
  for await (const p of await ollama.pull({ model: 'tiny-node', stream: true })) statuses.push(p.status);
  assert.equal(statuses[0], 'pulling manifest');
  assert.ok(statuses.some((s) => /^pulling [0-9a-f]{12}$/.test(s)));
  assert.equal(statuses.at(-1), 'success');
  assert.ok((await names()).includes('tiny-node:latest'));
  assert.equal((await ollama.pull({ model: 'tiny-node' })).status, 'success');
});

test('copy and delete; an unknown model is a ResponseError 404', async () => {
  await ollama.copy({ source: 'tiny-node', destination: 'node-copy' });
  assert.ok((await names()).includes('node-copy:latest'));
  await ollama.delete({ model: 'node-copy' });
  assert.ok(!(await names()).includes('node-copy:latest'));
  await assert.rejects(ollama.delete({ model: 'node-copy' }), (e) => e.name === 'ResponseError' && e.status_code === 404);
});
