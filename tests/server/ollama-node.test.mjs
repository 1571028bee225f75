// `minfer serve` driven by the official `ollama` npm package. Run by test_ollama_api.py, which
// starts the server: MINFER_URL is its base URL, OLLAMA_NODE_MODULES where npm put ollama.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';

const require = createRequire(process.env.OLLAMA_NODE_MODULES + '/');
const { Ollama } = require('ollama');

const ollama = new Ollama({ host: process.env.MINFER_URL });
const MSGS = [{ role: 'user', content: 'What is the capital of Germany?' }];
const GREEDY = { temperature: 0, num_predict: 24 };
const WEATHER = {
  type: 'function',
  function: {
    name: 'get_weather', description: 'Current weather in a city',
    parameters: { type: 'object', properties: { city: { type: 'string', maxLength: 30 } }, required: ['city'] },
  },
};

test('version, list, show, ps', async () => {
  assert.match((await ollama.version()).version, /^\d+\.\d+\.\d+$/);
  const { models } = await ollama.list();
  assert.deepEqual(models.map((m) => m.name), ['smollm2:latest']);
  assert.equal(models[0].details.format, 'gguf');
  const show = await ollama.show({ model: 'smollm2' });
  assert.equal(show.model_info['general.architecture'], 'llama');
  assert.ok(show.template.includes('im_start'));
  const ps = await ollama.ps();
  assert.deepEqual(ps.models.map((m) => m.model), ['smollm2:latest']);
});

test('chat: the stream adds up to the plain reply', async () => {
  const plain = await ollama.chat({ model: 'smollm2', messages: MSGS, options: GREEDY });
  assert.ok(plain.done && plain.message.content.includes('Berlin'));
  assert.ok(plain.eval_count > 0 && plain.eval_duration > 0 && plain.total_duration >= plain.eval_duration);
  let text = '';
  let last = null;
  for await (const part of await ollama.chat({ model: 'smollm2', messages: MSGS, options: GREEDY, stream: true })) {
    text += part.message.content;
    last = part;
  }
  assert.equal(text, plain.message.content);
  assert.ok(last.done);
  assert.equal(last.done_reason, plain.done_reason);
  assert.equal(last.eval_count, plain.eval_count);
});

test('generate equals chat; format schema', async () => {
  const g = await ollama.generate({ model: 'smollm2', prompt: MSGS[0].content, options: GREEDY });
  const c = await ollama.chat({ model: 'smollm2', messages: MSGS, options: GREEDY });
  assert.equal(g.response, c.message.content);
  const schema = { type: 'object', properties: { city: { type: 'string', maxLength: 20 } }, required: ['city'] };
  const r = await ollama.chat({ model: 'smollm2', messages: MSGS, format: schema, options: { temperature: 0, num_predict: 60 } });
  assert.equal(typeof JSON.parse(r.message.content).city, 'string');
});

test('tools: a call comes back with object arguments', async () => {
  let call = null;
  for (let seed = 1; seed <= 10 && !call; ++seed) {
    const r = await ollama.chat({
      model: 'smollm2', messages: [{ role: 'user', content: 'What is the weather in Paris?' }], tools: [WEATHER],
      options: { temperature: 1, seed, num_predict: 64 },
    });
    call = r.message.tool_calls?.[0] ?? null;
  }
  assert.ok(call, 'no seed made SmolLM2 call get_weather');
  assert.equal(call.function.name, 'get_weather');
  assert.equal(typeof call.function.arguments.city, 'string');
});

test('embed', async () => {
  const e = await ollama.embed({ model: 'smollm2', input: ['The sky is blue.', 'Grass is green.'] });
  assert.equal(e.embeddings.length, 2);
  assert.equal(e.embeddings[0].length, 576);
});

test('an unknown model is a ResponseError 404', async () => {
  await assert.rejects(ollama.chat({ model: 'nope', messages: MSGS }), (e) => {
    assert.equal(e.name, 'ResponseError');
    assert.equal(e.status_code, 404);
    assert.match(e.error, /model "nope" not found/);
    return true;
  });
  await assert.rejects(ollama.chat({ model: 'smollm2', messages: MSGS, options: { top_p: 2 } }), (e) => e.status_code === 400);
});
