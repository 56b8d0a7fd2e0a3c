// The reference page on a phase-2 stack (cmd/clients-stack -phase 2: a catalog source and a
// warehouse source, a branch per source, divergence), in Chromium: branches are collapsed, one
// line each, until a person opens one; the wrong-winner question's answer says what it would have
// been without the catalog; a question the catalog does not change says nothing of the kind.
//
// The page comes from ASK_UI_PHASE2 (scripts/clients-test.sh sets it); without it this file builds
// and starts cmd/clients-stack -phase 2 itself. CHROMIUM overrides the browser's path.

import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';
import { chromium } from 'playwright-core';

const here = import.meta.dirname;
const artifacts = join(here, 'artifacts');
const TIMEOUT = 30_000;

async function pageURL() {
  if (process.env.ASK_UI_PHASE2) return process.env.ASK_UI_PHASE2;
  const dir = mkdtempSync(join(tmpdir(), 'ask-ui-phase2-'));
  const bin = join(dir, 'clients-stack');
  const build = spawnSync('go', ['build', '-o', bin, './cmd/clients-stack'], { cwd: resolve(here, '../../..'), stdio: 'inherit' });
  assert.equal(build.status, 0, 'go build ./cmd/clients-stack');
  const urls = join(dir, 'urls.json');
  const child = spawn(bin, ['-urls', urls, '-phase', '2'], { stdio: ['ignore', 'ignore', 'inherit'] });
  child.unref();
  process.on('exit', () => { child.kill('SIGTERM'); rmSync(dir, { recursive: true, force: true }); });
  for (let i = 0; i < 300 && !existsSync(urls); i++) await delay(100);
  return JSON.parse(readFileSync(urls, 'utf8')).ui;
}

describe('the reference page on a phase-2 stack', () => {
  let context;
  let page;
  let profile;
  const problems = [];

  before(async () => {
    const url = await pageURL();
    mkdirSync(artifacts, { recursive: true });
    profile = mkdtempSync(join(tmpdir(), 'ask-ui-chromium-'));
    context = await chromium.launchPersistentContext(profile, {
      executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
      headless: true,
      viewport: { width: 1100, height: 900 },
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
        '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    });
    context.setDefaultTimeout(TIMEOUT);
    page = context.pages()[0] ?? await context.newPage();
    page.on('pageerror', (e) => problems.push(`pageerror: ${e.message}`));
    page.on('console', (m) => { if (m.type() === 'error') problems.push(`console: ${m.text()} (${m.location().url})`); });
    await page.goto(url);
    await page.selectOption('#identity', 'alice');
    await page.click('#signin-button');
    await page.locator('#whoami').filter({ hasText: 'Signed in as alice.' }).waitFor();
  });

  after(async () => {
    await context?.close();
    if (profile) rmSync(profile, { recursive: true, force: true });
    assert.deepEqual(problems, [], 'no script error or CSP violation');
  });

  async function ask(question) {
    const before = await page.locator('.turn').count();
    await page.fill('#question', question);
    await page.click('#ask-button');
    const turn = page.locator('.turn').nth(before);
    await turn.locator('.usage').waitFor(); // rendered on done
    return turn;
  }

  test('the wrong winner: branches collapsed, and the divergence said', async () => {
    const turn = await ask('Which team had the highest change failure rate in 2026-Q3?');
    assert.equal(await turn.getAttribute('data-outcome'), 'answer');
    const branches = turn.locator('.progress li.branch');
    const labels = await branches.locator('summary').allTextContents();
    for (const want of ['Asking catalog', 'Asking warehouse', 'Also answering without the catalog, to compare']) {
      assert.ok(labels.includes(want), labels.join(' | '));
    }
    // Collapsed: a branch's own progress is there but hidden until its line is opened.
    const inner = branches.first().locator('.branch-progress li').first();
    assert.equal(await inner.isVisible(), false, 'a branch is collapsed by default');
    await branches.first().locator('summary').click();
    assert.equal(await inner.isVisible(), true, 'opening a branch shows its progress');
    const said = await turn.locator(':scope .progress > li:not(.branch)').allTextContents();
    assert.ok(said.includes('Combining what the sources found on change failure rate'), said.join(' | '));
    const div = turn.locator('.outcome.answer .divergence');
    assert.match(await div.locator('p').textContent(),
      /^Without the catalog’s definition of change failure rate, the answer would have been team Data, failure rate pct 11\.1\.$/);
    assert.match(await turn.locator('.outcome .text').textContent(), /^Mobile had the highest change failure rate in 2026-Q3/);
    await page.screenshot({ path: join(artifacts, 'phase2-divergence.png'), fullPage: true });
  });

  test('a reconciliation of no term or table says what it combines, not "sources across sources"', async () => {
    const turn = await ask('What is our customer churn rate?');
    const said = await turn.locator(':scope .progress > li:not(.branch)').allTextContents();
    assert.ok(said.includes('Combining what the sources found'), said.join(' | '));
  });

  test('a question the catalog does not change has no divergence', async () => {
    const turn = await ask('How many sev1 incidents did we have in 2026-Q2?');
    assert.equal(await turn.getAttribute('data-outcome'), 'answer');
    assert.equal(await turn.locator('.outcome .divergence').count(), 0);
  });
});
