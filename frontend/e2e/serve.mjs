// The browser e2e tests' handle on `suzuran serve`: start it, stop it, open
// its chat UI in a page, and kill whatever a failed test left running.

import { spawn } from 'node:child_process';

// Every server started and not yet stopped, so that one left running by a
// failed test can be ended (node --test waits on it otherwise).
const running = new Set();

/**
 * Starts `suzuran serve` with args and env; resolves with its chat UI's
 * address and process once it says where it listens.
 */
export function startServe(binary, args, env) {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(binary, ['serve', ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    running.add(child);
    let err = '';
    child.stdout.resume();
    child.stderr.on('data', (d) => {
      err += d;
      const m = err.match(/chat UI at (http:\/\/\S+)/);
      if (m) resolvePromise({ url: m[1], child });
    });
    child.on('exit', (code) => reject(new Error(`suzuran serve exited with ${code}: ${err}`)));
    setTimeout(() => reject(new Error(`suzuran serve did not start within 30 s: ${err}`)), 30_000);
  });
}

/** Stops a server with SIGTERM; resolves with its exit code. */
export function stopServer(server) {
  return new Promise((resolvePromise) => {
    running.delete(server.child);
    server.child.removeAllListeners('exit');
    server.child.on('exit', (code) => resolvePromise(code));
    server.child.kill('SIGTERM');
  });
}

/** Kills every server still running. */
export function killServers() {
  for (const child of running) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
}

/** Opens url in a new page and waits for the window; page.errors collects the page's uncaught errors. */
export async function openPage(browser, url) {
  // A context of its own (axe-core's checks need one), closed with the page.
  const context = await browser.newContext({ viewport: { width: 1100, height: 720 } });
  const page = await context.newPage();
  page.on('close', () => context.close().catch(() => {}));
  const errors = [];
  page.on('pageerror', (e) => errors.push(e));
  await page.goto(url);
  await page.getByTestId('version').waitFor();
  page.errors = errors;
  return page;
}

/**
 * Checks the page with axe-core in the light and the dark theme: no
 * violation of serious or critical impact (WCAG 2 A and AA rules, contrast
 * included). view names the state in the failure message. The theme it
 * found is restored.
 */
export async function checkAccessibility(page, view) {
  const { AxeBuilder } = await import('@axe-core/playwright');
  const found = [];
  for (const colorScheme of ['light', 'dark']) {
    await page.emulateMedia({ colorScheme });
    const results = await new AxeBuilder({ page }).withTags(['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa']).analyze();
    for (const v of results.violations) {
      if (v.impact !== 'serious' && v.impact !== 'critical') continue;
      const where = v.nodes.slice(0, 3).map((n) => `${n.target.join(' ')}: ${n.failureSummary?.split('\n').slice(1).join(' ')}`);
      found.push(`${view} (${colorScheme}): ${v.id} (${v.impact}) ${v.help}\n    ${where.join('\n    ')}`);
    }
  }
  await page.emulateMedia({ colorScheme: null });
  if (found.length) throw new Error(`accessibility violations:\n  ${found.join('\n  ')}`);
}
