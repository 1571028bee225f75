// What the headless-browser tests share (tests/viz/browser.test.mjs, tests/server/webui.test.mjs):
// Debian chromium driven by playwright-core from npm (no browser download), a folder for
// screenshots, and named checks that each print PASS or FAIL and are counted at the end.
//   const b = browserChecks('MINFER_WEBUI_ARTIFACTS', 'webui-');
//   const browser = await b.launch();
//   await b.check('the page loads', async () => { ... });
//   b.finish('webui');  // prints the counts, exits 1 on any failure
import {createRequire} from 'node:module';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

export function browserChecks(artifactsEnv, tmpPrefix) {
  const require = createRequire(path.join(process.env.PLAYWRIGHT_NODE_MODULES, 'x.js'));
  const {chromium} = require('playwright-core');
  const art = process.env[artifactsEnv] || fs.mkdtempSync(path.join(os.tmpdir(), tmpPrefix));
  fs.mkdirSync(art, {recursive: true});
  const results = [];
  const record = (ok, what) => {
    results.push(`${ok ? 'PASS' : 'FAIL'} ${what}`);
    console.log(results[results.length - 1]);
  };
  return {
    art,
    launch: () => chromium.launch({executablePath: process.env.CHROMIUM || '/usr/bin/chromium', args: ['--no-sandbox', '--disable-gpu']}),
    record,
    async check(name, fn) {
      const t0 = Date.now();
      try {
        await fn();
        record(true, `${name} (${Date.now() - t0} ms)`);
      } catch (e) {
        record(false, `${name}: ${e.stack || e}`);
      }
    },
    finish(label) {
      const failed = results.filter((r) => r.startsWith('FAIL')).length;
      console.log(`${label}: ${results.length - failed} passed, ${failed} failed; screenshots in ${art}`);
      process.exit(failed ? 1 : 0);
    },
  };
}
