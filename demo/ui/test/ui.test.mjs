// The reference page end to end: Playwright drives Debian's Chromium (/usr/bin/chromium) against
// the dev stack's page at {base}/ui/, as a person would use it: sign in, ask, watch the
// milestones, read the answer with its caveats and provenance, follow up in the same
// conversation, see an abstention and a refusal as what they are, and cancel with the button.
// Screenshots are saved in artifacts/ (a CI artifact).
//
// The page comes from ASK_UI (set by scripts/clients-test.sh); without it this file builds and
// starts cmd/clients-stack itself. CHROMIUM overrides the browser's path.

import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createServer, connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';
import { chromium } from 'playwright-core';

const here = import.meta.dirname;
const artifacts = join(here, 'artifacts');
const TIMEOUT = 30_000;

async function pageURL() {
  if (process.env.ASK_UI) return process.env.ASK_UI;
  const dir = mkdtempSync(join(tmpdir(), 'ask-ui-stack-'));
  const bin = join(dir, 'clients-stack');
  const build = spawnSync('go', ['build', '-o', bin, './cmd/clients-stack'], { cwd: resolve(here, '../../..'), stdio: 'inherit' });
  assert.equal(build.status, 0, 'go build ./cmd/clients-stack');
  const urls = join(dir, 'urls.json');
  const child = spawn(bin, ['-urls', urls], { stdio: ['ignore', 'ignore', 'inherit'] });
  child.unref();
  process.on('exit', () => { child.kill('SIGTERM'); rmSync(dir, { recursive: true, force: true }); });
  for (let i = 0; i < 300 && !existsSync(urls); i++) await delay(100);
  return JSON.parse(readFileSync(urls, 'utf8')).ui;
}

// cuttingProxy forwards TCP connections to target's host; the first time the service sends a chunk
// for which cutWhen is true, it drops that chunk and closes that connection, both ways; with
// stall, it keeps the connection open instead and forwards nothing more on it, as a half-open
// socket or a frozen gateway would.
async function cuttingProxy(target, cutWhen, { stall = false } = {}) {
  let cuts = 0;
  const sockets = new Set();
  const server = createServer((client) => {
    const upstream = connect(Number(target.port), target.hostname);
    sockets.add(client).add(upstream);
    const close = () => { client.destroy(); upstream.destroy(); };
    client.on('error', close).on('close', () => sockets.delete(client));
    upstream.on('error', close).on('close', () => sockets.delete(upstream));
    client.pipe(upstream);
    let frozen = false;
    upstream.on('data', (chunk) => {
      if (frozen) return;
      if (cuts === 0 && cutWhen(chunk.toString('utf8'))) {
        cuts++;
        if (stall) frozen = true;
        else close();
        return;
      }
      client.write(chunk);
    });
    upstream.on('end', () => { if (!frozen) client.end(); });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${server.address().port}${target.pathname}`,
    cuts: () => cuts,
    close: () => new Promise((resolve) => { for (const s of sockets) s.destroy(); server.close(resolve); }),
  };
}

describe('the reference page in Chromium', () => {
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
    // A script error or a CSP violation would leave the page silently broken: fail on any.
    page.on('pageerror', (e) => problems.push(`pageerror: ${e.message}`));
    page.on('console', (m) => { if (m.type() === 'error') problems.push(`console: ${m.text()} (${m.location().url})`); });
    await page.goto(url);
  });

  after(async () => {
    await context?.close();
    if (profile) rmSync(profile, { recursive: true, force: true });
  });

  async function signIn(oid) {
    await page.selectOption('#identity', oid);
    // Signing in again as the same identity shows the same words: wait for the sign-in itself.
    const minted = page.waitForResponse((r) => r.url().endsWith('/ui/token'));
    await page.click('#signin-button');
    await minted;
    await page.locator('#whoami').filter({ hasText: `Signed in as ${oid}.` }).waitFor();
    await page.waitForFunction(() => document.querySelectorAll('.turn').length === 0); // a new conversation
  }

  // start types a question, submits it, and returns its turn once the service has given a ticket.
  async function start(question) {
    const before = await page.locator('.turn').count();
    await page.fill('#question', question);
    await page.click('#ask-button');
    const turn = page.locator('.turn').nth(before);
    await turn.waitFor(); // appended with its data-ticket
    return turn;
  }

  // ask starts a question and returns its turn once it has an outcome and done.
  async function ask(question) {
    const turn = await start(question);
    await turn.locator('.usage').waitFor(); // rendered on done
    return turn;
  }

  test('sign in as alice and ask: milestones in the page’s words, then the answer with caveats and provenance', async () => {
    await signIn('alice');
    const turn = await ask('How many sev1 incidents did we have in 2026-Q2?');
    assert.equal(await turn.getAttribute('data-outcome'), 'answer');
    const milestones = await turn.locator('.progress li').allTextContents();
    assert.ok(milestones.includes('Checking what “incident” means in the catalog'), milestones.join(' | '));
    assert.ok(milestones.some((m) => m.startsWith('Querying incidents')), milestones.join(' | '));
    const outcome = turn.locator('.outcome.answer');
    assert.match(await outcome.locator('.headline .figure').textContent(), /^\d+$/);
    assert.match(await outcome.locator('.text').textContent(), /sev1 incidents in 2026-Q2/);
    assert.ok(await outcome.locator('.caveats li').count() > 0, 'every caveat is shown');
    assert.equal(await outcome.locator('.caveats h4').textContent(), 'Keep in mind');
    assert.ok((await outcome.locator('.provenance dt').allTextContents()).includes('incident'));
    assert.equal(await outcome.locator('.path').textContent(), 'Answered by querying the data.');
    // Steps are for someone who asks to see the work: collapsed.
    assert.equal(await turn.locator('.steps li').first().isVisible(), false);
    assert.equal(await turn.locator('.work').getAttribute('open'), null);
  });

  test('a follow-up in the same conversation resolves “that team”', async () => {
    const conversation = await page.locator('#conversation').getAttribute('data-conversation-id');
    assert.ok(conversation);
    const first = await ask('Which team had the most incidents in 2026-Q3?');
    const team = (await first.locator('.outcome .text').textContent()).match(/(\w[\w-]*) had the most incidents/)?.[1];
    assert.ok(team, 'the first answer names a team');
    const second = await ask('How many deployments did that team ship in 2026-Q3?');
    assert.equal(await second.getAttribute('data-outcome'), 'answer');
    assert.match(await second.locator('.outcome .text').textContent(), new RegExp(`^${team} shipped \\d+ deployments`));
    assert.equal(await page.locator('#conversation').getAttribute('data-conversation-id'), conversation, 'the same conversation');
    await page.screenshot({ path: join(artifacts, 'ask-ui.png'), fullPage: true });
  });

  test('a milestone whose subject is the service’s placeholder (catalog, query) is said without it', async () => {
    // The agent sends these when it can name no term or table (the contract's
    // MilestoneBody.subject); the page said 'Checking what “catalog” means in the catalog'. The
    // real stream, its grounding and querying milestones' subjects replaced by the placeholders.
    await page.route('**/v1/asks/*/events', async (r) => {
      const real = await r.fetch();
      const body = (await real.text()).replace(/^data: (.*)$/gm, (line, data) => {
        const e = JSON.parse(data);
        if (e.type === 'milestone' && e.phase === 'grounding') e.subject = 'catalog';
        if (e.type === 'milestone' && e.phase === 'querying') e.subject = 'query';
        return `data: ${JSON.stringify(e)}`;
      });
      return r.fulfill({ response: real, body });
    });
    try {
      const turn = await ask('How many sev1 incidents did we have in 2026-Q2?');
      assert.equal(await turn.getAttribute('data-outcome'), 'answer');
      const milestones = await turn.locator('.progress li').allTextContents();
      assert.ok(milestones.includes('Looking in the catalog'), milestones.join(' | '));
      assert.ok(milestones.some((m) => m.startsWith('Querying the demo data')), milestones.join(' | '));
      assert.deepEqual(milestones.filter((m) => /“catalog”|Querying query/.test(m)), [], milestones.join(' | '));
    } finally {
      await page.unroute('**/v1/asks/*/events');
      await page.click('#new-conversation');
    }
  });

  test('a catalog-only answer says no data was queried', async () => {
    const turn = await ask('What does change failure rate mean?');
    assert.equal(await turn.getAttribute('data-outcome'), 'answer');
    assert.equal(await turn.locator('.outcome .path').textContent(), 'Answered from the catalog alone: no data was queried.');
    assert.equal(await turn.locator('.outcome .sql').count(), 0);
  });

  test('an abstention is shown as a gap in the catalog, not an error and not an answer', async () => {
    const turn = await ask('What is our customer churn rate?');
    assert.equal(await turn.getAttribute('data-outcome'), 'abstention');
    const outcome = turn.locator('.outcome.abstention');
    assert.match(await outcome.locator('h3').textContent(), /^No answer: the catalog has nothing/);
    assert.match(await outcome.locator('.terms').textContent(), /^Looked for: .*churn/);
    assert.equal(await turn.locator('.outcome.answer, .outcome.error').count(), 0);
  });

  test('a dropped stream is resumed with Last-Event-ID and the answer still arrives', async () => {
    // A second tab loads the page through a TCP proxy that cuts the event stream's connection
    // with the first events after the branch opened: the page has had the model's silent seconds
    // to take in seq 1 and 2, and the rest of the run arrives on the resumed connection only.
    let branchSeen = false;
    const proxy = await cuttingProxy(new URL(page.url()), (chunk) => {
      if (branchSeen) return true;
      branchSeen = chunk.includes('event: branch');
      return false;
    });
    const tab = await context.newPage();
    try {
      const streams = [];
      tab.on('request', (r) => { if (r.url().endsWith('/events')) streams.push(r); });
      await tab.goto(proxy.url);
      await tab.selectOption('#identity', 'alice');
      await tab.click('#signin-button');
      await tab.fill('#question', 'Take your time: how many sev1 incidents did we have in 2026-Q2?');
      await tab.click('#ask-button');
      const turn = tab.locator('.turn').first();
      await turn.locator('.usage').waitFor();
      assert.equal(proxy.cuts(), 1, 'the proxy cut the stream once');
      assert.equal(await turn.getAttribute('data-outcome'), 'answer');
      const sent = await Promise.all(streams.map((r) => r.headerValue('last-event-id')));
      assert.deepEqual(sent, [null, '2'], 'one stream from the start, one resumed after the branch (seq 2)');
      const said = await turn.locator('.progress li').allTextContents();
      assert.ok(said.includes('Checking what “incident” means in the catalog'), said.join(' | '));
      assert.equal(said.length, new Set(said).size, 'nothing said twice');
    } finally {
      await tab.close();
      await proxy.close();
    }
  });

  test('a stalled stream (no byte, not even a keep-alive, for 45 s) is resumed with Last-Event-ID', async () => {
    // As above, but the proxy keeps the connection open and silent instead of closing it. The
    // page's clock is driven past its idle bound rather than waited out.
    let branchSeen = false;
    const proxy = await cuttingProxy(new URL(page.url()), (chunk) => {
      if (branchSeen) return true;
      branchSeen = chunk.includes('event: branch');
      return false;
    }, { stall: true });
    const tab = await context.newPage();
    try {
      await tab.clock.install();
      const streams = [];
      tab.on('request', (r) => { if (r.url().endsWith('/events')) streams.push(r); });
      await tab.goto(proxy.url);
      await tab.selectOption('#identity', 'alice');
      await tab.click('#signin-button');
      await tab.fill('#question', 'Take your time: how many sev1 incidents did we have in 2026-Q2?');
      await tab.click('#ask-button');
      const turn = tab.locator('.turn').first();
      for (let i = 0; i < 100 && proxy.cuts() === 0; i++) await delay(50);
      assert.equal(proxy.cuts(), 1, 'the proxy stalled the stream');
      await tab.clock.fastForward(46_000); // past the idle bound: the connection is taken for dead
      await tab.clock.fastForward(6_000); // past the backoff before the reconnect
      await turn.locator('.usage').waitFor();
      assert.equal(await turn.getAttribute('data-outcome'), 'answer');
      const sent = await Promise.all(streams.map((r) => r.headerValue('last-event-id')));
      assert.deepEqual(sent, [null, '2'], 'one stream from the start, one resumed after the branch (seq 2)');
    } finally {
      await tab.close();
      await proxy.close();
    }
  });

  test('a stream whose response never comes is given up after 15 s and resumed', async () => {
    // A gateway that accepts the connection and never answers: the page once waited on it for
    // ever, "Working…", as the idle bound counts only once the response has come. The page's
    // clock is driven past its header bound rather than waited out.
    const tab = await context.newPage();
    try {
      await tab.clock.install();
      const streams = [];
      await tab.route('**/v1/asks/*/events', (r) => {
        streams.push(r.request().headers()['last-event-id'] ?? '');
        if (streams.length > 1) return r.continue();
        return undefined; // never answered
      });
      await tab.goto(page.url());
      await tab.selectOption('#identity', 'alice');
      await tab.click('#signin-button');
      await tab.fill('#question', 'How many sev1 incidents did we have in 2026-Q2?');
      await tab.click('#ask-button');
      const turn = tab.locator('.turn').first();
      for (let i = 0; i < 100 && streams.length === 0; i++) await delay(50);
      assert.equal(streams.length, 1, 'the stream was asked for');
      await tab.clock.fastForward(16_000); // past the header bound: the request is abandoned
      await tab.clock.fastForward(6_000); // past the backoff before the reconnect
      await turn.locator('.usage').waitFor();
      assert.equal(await turn.getAttribute('data-outcome'), 'answer');
      assert.deepEqual(streams, ['', ''], 'resumed once, from the start (nothing had arrived)');
    } finally {
      await tab.close();
    }
  });

  test('a create whose response never comes is retried after 15 s with its Idempotency-Key', async () => {
    const tab = await context.newPage();
    try {
      await tab.clock.install();
      const keys = [];
      await tab.route('**/v1/conversations', (r) => {
        keys.push(r.request().headers()['idempotency-key']);
        if (keys.length > 1) return r.continue();
        return undefined; // never answered
      });
      await tab.goto(page.url());
      await tab.selectOption('#identity', 'alice');
      await tab.click('#signin-button');
      await tab.fill('#question', 'How many sev1 incidents did we have in 2026-Q2?');
      await tab.click('#ask-button');
      for (let i = 0; i < 100 && keys.length === 0; i++) await delay(50);
      assert.equal(keys.length, 1, 'the conversation was asked for');
      await tab.clock.fastForward(16_000); // past the header bound: the request is abandoned
      await tab.clock.fastForward(6_000); // past the backoff before the retry
      const turn = tab.locator('.turn').first();
      await turn.locator('.usage').waitFor();
      assert.equal(await turn.getAttribute('data-outcome'), 'answer');
      assert.equal(keys.length, 2, 'retried once');
      assert.equal(keys[1], keys[0], 'with the same key');
    } finally {
      await tab.close();
    }
  });

  test('a create that fails on the way is retried with one Idempotency-Key, and the question is asked once', async () => {
    // Each create fails before the service sees it — the connection reset, then a gateway's 503,
    // then (for the ask) the 409 of the same key still in progress — and then reaches the service.
    const problem = (status, type = 'about:blank') => ({ status, contentType: 'application/problem+json', headers: { 'Retry-After': '0' },
      body: JSON.stringify({ type, title: 'x', status }) });
    const script = {
      '**/v1/conversations': [(r) => r.abort('connectionreset'), (r) => r.fulfill(problem(502))],
      '**/v1/conversations/*/asks': [(r) => r.fulfill(problem(503)), (r) => r.abort('connectionreset'),
        (r) => r.fulfill(problem(409, 'urn:ask:problem:idempotency-key-in-progress'))],
    };
    const keys = { '**/v1/conversations': [], '**/v1/conversations/*/asks': [] };
    for (const [glob, replies] of Object.entries(script)) {
      await page.route(glob, (r) => {
        keys[glob].push(r.request().headers()['idempotency-key']);
        const reply = replies[keys[glob].length - 1];
        return reply ? reply(r) : r.continue();
      });
    }
    try {
      await page.click('#new-conversation');
      await page.waitForFunction(() => document.querySelectorAll('.turn').length === 0);
      const turn = await ask('How many sev1 incidents did we have in 2026-Q2?');
      assert.equal(await turn.getAttribute('data-outcome'), 'answer');
      for (const [glob, sent] of Object.entries(keys)) {
        assert.equal(sent.length, script[glob].length + 1, `${glob}: every failure retried, once`);
        assert.match(sent[0], /^"[0-9a-f]{32}"$/, `${glob}: an sf-string key`);
        assert.ok(sent.every((k) => k === sent[0]), `${glob}: one key on every attempt: ${sent.join(' ')}`);
      }
      assert.notEqual(keys['**/v1/conversations'][0], keys['**/v1/conversations/*/asks'][0], 'each create its own key');
      assert.equal(await page.locator('.turn').count(), 1, 'asked once');
      assert.equal(await page.locator('#ask-error').isVisible(), false);
    } finally {
      for (const glob of Object.keys(script)) await page.unroute(glob);
      // Chromium logs the failures this test asked for as failed loads: those are not problems.
      for (let i = problems.length - 1; i >= 0; i--) {
        if (/status of (502|503|409)|ERR_CONNECTION_RESET/.test(problems[i]) && /\/v1\/conversations/.test(problems[i])) problems.splice(i, 1);
      }
    }
  });

  test('a 429 is not retried, and the person is told when to try again', async () => {
    let calls = 0;
    await page.route('**/v1/conversations/*/asks', (r) => {
      calls++;
      return r.fulfill({ status: 429, contentType: 'application/problem+json', headers: { 'Retry-After': '7' },
        body: JSON.stringify({ type: 'about:blank', title: 'Too Many Requests', status: 429 }) });
    });
    try {
      await page.fill('#question', 'How many sev1 incidents did we have in 2026-Q2?');
      await page.click('#ask-button');
      await page.locator('#ask-error').filter({ hasText: 'too many' }).waitFor();
      assert.equal(await page.locator('#ask-error').textContent(),
        'You have too many questions running, or too many kept; try again in 7 s.');
      assert.equal(calls, 1, 'not retried');
    } finally {
      await page.unroute('**/v1/conversations/*/asks');
      const i = problems.findIndex((p) => p.includes('status of 429') && p.includes('/asks'));
      if (i >= 0) problems.splice(i, 1);
    }
  });

  // forgive drops from problems the failed loads a test asked for (Chromium logs each as an error).
  function forgive(re) {
    for (let i = problems.length - 1; i >= 0; i--) if (re.test(problems[i])) problems.splice(i, 1);
  }

  const problem503 = (retryAfter) => ({ status: 503, contentType: 'application/problem+json', headers: { 'Retry-After': retryAfter },
    body: JSON.stringify({ type: 'about:blank', title: 'Service Unavailable', status: 503 }) });

  test('a Retry-After of 1 s is waited for and said; one of an hour or of 10^10 s is said at once, not waited for', async () => {
    // The page once waited out any Retry-After, an hour behind "Working…" with nothing said, and
    // a Retry-After beyond 2^31-1 ms overflowed setTimeout, which fired at once: eight attempts in
    // a row.
    const calls = [];
    let said = '';
    await page.route('**/v1/conversations/*/asks', async (r) => {
      calls.push(Date.now());
      if (calls.length === 1) return r.fulfill(problem503('1'));
      said = await page.locator('#ask-status').textContent(); // read while the page waits
      return r.continue();
    });
    try {
      const turn = await ask('How many sev1 incidents did we have in 2026-Q2?');
      assert.equal(await turn.getAttribute('data-outcome'), 'answer');
      assert.equal(calls.length, 2, 'retried once');
      assert.ok(calls[1] - calls[0] >= 1000, `waited the Retry-After: ${calls[1] - calls[0]} ms`);
      assert.match(said, /^The service is busy \(HTTP 503: Service Unavailable\): trying again/);
      assert.equal(await page.locator('#ask-status').isVisible(), false, 'the wait is no longer said once it is over');
    } finally {
      await page.unroute('**/v1/conversations/*/asks');
    }
    for (const [retryAfter, when] of [['3600', 'in 60 min'], ['10000000000', 'much later (the service asked for more than two days)']]) {
      let tried = 0;
      await page.route('**/v1/conversations/*/asks', (r) => { tried++; return r.fulfill(problem503(retryAfter)); });
      try {
        await page.fill('#question', 'How many sev1 incidents did we have in 2026-Q2?');
        await page.click('#ask-button');
        const error = page.locator('#ask-error').filter({ hasText: 'try again' });
        await error.waitFor({ timeout: 5000 });
        assert.match(await error.textContent(), new RegExp(`^Service Unavailable; try again ${when.replace(/[()]/g, '\\$&')}\\.`), retryAfter);
        assert.equal(tried, 1, `Retry-After ${retryAfter}: tried once`);
        assert.equal(await page.locator('#ask-button').isEnabled(), true, 'the person may ask again');
      } finally {
        await page.unroute('**/v1/conversations/*/asks');
      }
    }
    forgive(/status of 503.*\/asks/);
  });

  test('Cancel while a create waits to be tried again stops it at once', async () => {
    // Cancel was offered while the page waited before a retry of the ask, and did nothing: there
    // was no ticket yet to cancel.
    let tried = 0;
    await page.route('**/v1/conversations/*/asks', (r) => { tried++; return r.fulfill(problem503('30')); });
    try {
      await page.fill('#question', 'How many sev1 incidents did we have in 2026-Q2?');
      await page.click('#ask-button');
      await page.locator('#ask-status').filter({ hasText: 'trying again in' }).waitFor();
      assert.match(await page.locator('#ask-status').textContent(), /trying again in (30|29) s\. Cancel stops trying\.$/);
      await page.click('#cancel-button');
      await page.locator('#ask-error').filter({ hasText: 'Cancelled' }).waitFor({ timeout: 5000 });
      assert.match(await page.locator('#ask-error').textContent(), /^Cancelled: the page stopped asking\./);
      assert.equal(tried, 1, 'not tried again');
      assert.equal(await page.locator('#ask-status').isVisible(), false);
      assert.equal(await page.locator('#ask-button').isEnabled(), true);
      assert.equal(await page.locator('#cancel-button').isEnabled(), false);
    } finally {
      await page.unroute('**/v1/conversations/*/asks');
      forgive(/status of 503.*\/asks/);
    }
  });

  test('an ask whose reply was lost says it may have been made, and asking again picks up that ticket', async () => {
    // The service makes the ticket and its reply is lost (the connection reset after it answered),
    // then a gateway says to come back in an hour. The page once said only "Failed to fetch" or the
    // 503, and asking again sent a fresh Idempotency-Key: a second ask of the same question.
    const keys = [];
    let made = '';
    await page.route('**/v1/conversations/*/asks', async (r) => {
      keys.push(r.request().headers()['idempotency-key']);
      if (keys.length === 1) {
        made = (await (await r.fetch()).json()).ticket; // the service made it...
        return r.abort('connectionreset'); // ...and its reply is lost
      }
      if (keys.length === 2) return r.fulfill(problem503('3600'));
      return r.continue();
    });
    try {
      const before = await page.locator('.turn').count();
      const question = 'How many sev1 incidents did we have in 2026-Q2?';
      await page.fill('#question', question);
      await page.click('#ask-button');
      const error = page.locator('#ask-error').filter({ hasText: 'may have received' });
      await error.waitFor({ timeout: 10_000 });
      assert.equal(await error.textContent(), 'Service Unavailable; try again in 60 min. The service may have received the question all the same: '
        + 'asking it again here picks it up instead of asking twice.');
      assert.equal(await page.locator('.turn').count(), before, 'no ticket to follow yet');
      assert.equal(await page.inputValue('#question'), question, 'the question is still there to ask again');
      await page.click('#ask-button');
      const turn = page.locator('.turn').nth(before);
      await turn.locator('.usage').waitFor();
      assert.equal(await turn.getAttribute('data-ticket'), made, 'the ticket the lost reply carried');
      assert.equal(await turn.getAttribute('data-outcome'), 'answer');
      assert.equal(keys.length, 3);
      assert.ok(keys.every((k) => k === keys[0]), `one Idempotency-Key: ${keys.join(' ')}`);
    } finally {
      await page.unroute('**/v1/conversations/*/asks');
      forgive(/(status of 503|ERR_CONNECTION_RESET).*\/asks/);
    }
  });

  test('a create answered with a sign-in page, or with {}, is final and said; nothing is asked or followed in "undefined"', async () => {
    // The page once said "Cannot read properties of null (reading 'id')" for a page, asked in
    // conversation "undefined" for a {} (and then said the conversation had expired), and
    // followed ticket "undefined".
    const paths = [];
    const onRequest = (r) => { if (r.url().includes('/v1/')) paths.push(new URL(r.url()).pathname); };
    page.on('request', onRequest);
    const html = { status: 200, contentType: 'text/html; charset=utf-8', body: '<!doctype html><title>Sign in</title><form>Corporate sign-in</form>' };
    const cases = [
      ['**/v1/conversations', html, /^The reply to POST v1\/conversations \(HTTP 200, text\/html; charset=utf-8\) is not the service’s JSON/],
      ['**/v1/conversations', { status: 201, contentType: 'application/json', body: '{}' }, /^The reply to creating a conversation names none/],
      ['**/v1/conversations/*/asks', { status: 202, contentType: 'application/json', body: '{}' }, /^The reply to the question names no ticket/],
    ];
    try {
      for (const [glob, reply, words] of cases) {
        await page.click('#new-conversation');
        await page.route(glob, (r) => r.fulfill(reply));
        try {
          paths.length = 0;
          await page.fill('#question', 'How many sev1 incidents did we have in 2026-Q2?');
          await page.click('#ask-button');
          await page.locator('#ask-error').filter({ hasText: 'The reply' }).waitFor({ timeout: 5000 });
          assert.match(await page.locator('#ask-error').textContent(), words);
          assert.equal(await page.locator('.turn, .notice').count(), 0, `${reply.status} ${reply.body}: no turn and no notice`);
          assert.deepEqual(paths.filter((p) => p.includes('undefined')), [], 'nothing asked of "undefined"');
          assert.equal(paths.filter((p) => p.endsWith('/events')).length, 0, 'nothing followed');
        } finally {
          await page.unroute(glob);
        }
      }
    } finally {
      page.off('request', onRequest);
      await page.click('#new-conversation');
    }
  });

  test('an event stream answered with a sign-in page is final and said, not resumed', async () => {
    // The page read a 200 text/html as an event stream that ended at once, and reconnected to it
    // eight times before saying "the event stream could not be resumed".
    const streams = [];
    await page.route('**/v1/asks/*/events', (r) => {
      streams.push(r.request().headers()['last-event-id'] ?? '');
      return r.fulfill({ status: 200, contentType: 'text/html', body: '<!doctype html><title>Sign in</title>' });
    });
    try {
      await start('How many sev1 incidents did we have in 2026-Q2?');
      const said = page.locator('#ask-error').filter({ hasText: 'is not an event stream' });
      await said.waitFor({ timeout: 5000 });
      assert.match(await said.textContent(), /^The reply to the event stream \(HTTP 200, text\/html\) is not an event stream/);
      assert.equal(streams.length, 1, 'not resumed');
      await page.click('#new-conversation');
    } finally {
      await page.unroute('**/v1/asks/*/events');
    }
  });

  test('a user name and password in the page’s address are never sent nor shown, and the page works', async () => {
    // fetch refuses a URL that holds credentials, and the page built every URL from its own
    // address: signing in failed with a message that showed the password.
    const url = new URL(page.url());
    url.username = 'carol';
    url.password = 'zq-url-password';
    const tab = await context.newPage();
    try {
      const sent = [];
      tab.on('request', (r) => sent.push(`${r.url()} ${r.headers().authorization ?? ''}`));
      await tab.goto(url.href);
      await tab.selectOption('#identity', 'alice');
      await tab.click('#signin-button');
      await tab.locator('#whoami').filter({ hasText: 'Signed in as alice.' }).waitFor({ timeout: 5000 });
      await tab.fill('#question', 'How many sev1 incidents did we have in 2026-Q2?');
      await tab.click('#ask-button');
      const turn = tab.locator('.turn').first();
      await turn.locator('.usage').waitFor();
      assert.equal(await turn.getAttribute('data-outcome'), 'answer');
      const api = sent.filter((s) => s.includes('/v1/') || s.includes('/ui/token'));
      assert.ok(api.length >= 4, api.join('\n'));
      assert.deepEqual(api.filter((s) => s.includes('zq-url-password') || s.includes('carol') || /Basic/.test(s)), []);
      assert.ok(!(await tab.content()).includes('zq-url-password'), 'the password is not on the page');
    } finally {
      await tab.close();
    }
  });

  test('neither the question nor the bearer is left in a readable file of the browser’s profile', async () => {
    // Chromium keeps a page's form state (the question typed in its box) in the session it writes
    // to the profile (Sessions/), unless the field is autocomplete="off".
    const dir = mkdtempSync(join(tmpdir(), 'ask-ui-profile-'));
    const own = await chromium.launchPersistentContext(dir, {
      executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
      headless: true,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    });
    const marker = `zq-profile-${Date.now()}`;
    let token = '';
    try {
      const tab = own.pages()[0] ?? await own.newPage();
      tab.on('response', async (r) => { if (r.url().endsWith('/ui/token')) token = (await r.json()).access_token; });
      await tab.goto(page.url());
      await tab.selectOption('#identity', 'alice');
      await tab.click('#signin-button');
      await tab.locator('#whoami').waitFor();
      // A question that is answered, then one that is refused and so stays in its box.
      await tab.fill('#question', `What is our customer churn rate? ${marker}`);
      await tab.click('#ask-button');
      await tab.locator('.turn .usage').waitFor();
      await tab.route('**/v1/conversations/*/asks', (r) => r.fulfill({ status: 400, contentType: 'application/problem+json',
        body: JSON.stringify({ type: 'about:blank', title: 'Bad Request', status: 400 }) }));
      await tab.fill('#question', `How many sev1 incidents did we have in 2026-Q2? ${marker}`);
      await tab.click('#ask-button');
      await tab.locator('#ask-error').waitFor();
      const kept = await tab.evaluate(async () => ({ local: localStorage.length, session: sessionStorage.length,
        idb: (await indexedDB.databases()).length, url: location.href }));
      assert.deepEqual(kept, { local: 0, session: 0, idb: 0, url: page.url() }, 'nothing kept in storage or in the address');
      await tab.goto('about:blank'); // the page's state goes into its history entry
    } finally {
      await own.close(); // and the session is written out
    }
    try {
      assert.ok(token.length > 20, 'the bearer was seen');
      const found = [];
      const needles = [marker, token].flatMap((s) => [Buffer.from(s, 'utf8'), Buffer.from(s, 'utf16le')]);
      const walk = (d) => {
        for (const e of readdirSync(d, { withFileTypes: true })) {
          const p = join(d, e.name);
          if (e.isDirectory()) walk(p);
          else if (e.isFile()) {
            const b = readFileSync(p);
            if (needles.some((n) => b.includes(n))) found.push(p.slice(dir.length));
          }
        }
      };
      walk(dir);
      assert.deepEqual(found, [], 'files of the profile holding the question or the bearer');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('a stream refused with 408 or 500 is resumed, as the Go client; with 501 it is final', async () => {
    const warned = [];
    const onConsole = (m) => { if (m.type() === 'warning' && m.text().includes('event stream')) warned.push(m.text()); };
    page.on('console', onConsole);
    for (const [status, resumed] of [[408, true], [500, true], [501, false]]) {
      const streams = [];
      await page.route('**/v1/asks/*/events', (r) => {
        streams.push(r.request().headers()['last-event-id'] ?? '');
        return streams.length === 1
          ? r.fulfill({ status, contentType: 'application/problem+json', headers: { 'Retry-After': '0' },
            body: JSON.stringify({ type: 'about:blank', title: 'x', status, detail: `refused with ${status}` }) })
          : r.continue();
      });
      try {
        if (resumed) {
          const turn = await ask('How many sev1 incidents did we have in 2026-Q2?');
          assert.equal(await turn.getAttribute('data-outcome'), 'answer', `after ${status}`);
          assert.equal(streams.length, 2, `${status}: resumed once`);
          assert.ok(warned.some((w) => w.includes(`reconnecting (attempt 2)`) && w.includes(`refused with ${status}`)),
            `${status}: the reconnect is said on the console, never silent: ${warned.join(' | ')}`);
          warned.length = 0;
        } else {
          await start('How many sev1 incidents did we have in 2026-Q2?');
          await page.locator('#ask-error').filter({ hasText: `refused with ${status}` }).waitFor();
          assert.equal(streams.length, 1, `${status}: not resumed`);
          // That run goes on unwatched in this conversation: later questions start a new one.
          await page.click('#new-conversation');
        }
      } finally {
        await page.unroute('**/v1/asks/*/events');
        const i = problems.findIndex((p) => p.includes(`status of ${status}`) && p.includes('/events'));
        if (i >= 0) problems.splice(i, 1);
      }
    }
    page.off('console', onConsole);
  });

  test('an event with an id and no data is the Last-Event-ID the resume sends, as in Go', async () => {
    // The first connection carries only `id: 1` and a blank line (an event with no data), then
    // ends: nothing is dispatched, but 1 is the stream's last event ID. The page resumed from
    // the start, sending none.
    const streams = [];
    await page.route('**/v1/asks/*/events', (r) => {
      streams.push(r.request().headers()['last-event-id'] ?? '');
      return streams.length === 1 ? r.fulfill({ status: 200, contentType: 'text/event-stream', body: ': ask events\nid: 1\n\n' }) : r.continue();
    });
    try {
      const turn = await ask('How many sev1 incidents did we have in 2026-Q2?');
      assert.equal(await turn.getAttribute('data-outcome'), 'answer');
      assert.deepEqual(streams, ['', '1']);
    } finally {
      await page.unroute('**/v1/asks/*/events');
    }
  });

  test('a refused stream’s Retry-After holds for the next connection only, as in Go', async () => {
    // A 503 with Retry-After: 4, then two connections that end at once: their own backoff (at
    // most 1.1 s and 2.1 s), not the 503's 4 s again, as the page did, before the real stream.
    const at = [];
    await page.route('**/v1/asks/*/events', (r) => {
      at.push(Date.now());
      if (at.length === 1) {
        return r.fulfill({ status: 503, contentType: 'application/problem+json', headers: { 'Retry-After': '4' },
          body: JSON.stringify({ type: 'about:blank', title: 'x', status: 503 }) });
      }
      return at.length <= 3 ? r.fulfill({ status: 200, contentType: 'text/event-stream', body: ': ask events\n' }) : r.continue();
    });
    try {
      const turn = await ask('How many sev1 incidents did we have in 2026-Q2?');
      assert.equal(await turn.getAttribute('data-outcome'), 'answer');
      assert.equal(at.length, 4);
      assert.ok(at[1] - at[0] >= 3900, `resumed ${at[1] - at[0]} ms after the 503, before its Retry-After`);
      for (const i of [2, 3]) assert.ok(at[i] - at[i - 1] < 3500, `connection ${i + 1} waited out the earlier Retry-After again (${at[i] - at[i - 1]} ms)`);
    } finally {
      await page.unroute('**/v1/asks/*/events');
      const i = problems.findIndex((p) => p.includes('status of 503') && p.includes('/events'));
      if (i >= 0) problems.splice(i, 1);
    }
  });

  test('an event that is not JSON is final: said without its data, and not resumed', async () => {
    // The page once skipped such a frame, and then reconnected to the same stream eight times.
    const streams = [];
    await page.route('**/v1/asks/*/events', (r) => {
      streams.push(r.request().headers()['last-event-id'] ?? '');
      return r.fulfill({ status: 200, contentType: 'text/event-stream',
        body: 'id: 1\nevent: accepted\ndata: {"seq":1,"type":"accepted","question":zq-frame-secret}\n\n' });
    });
    try {
      await start('How many sev1 incidents did we have in 2026-Q2?');
      const said = page.locator('#ask-error').filter({ hasText: 'Event 1 of the stream is not one' });
      await said.waitFor();
      assert.ok(!(await said.textContent()).includes('zq-frame-secret'), 'the frame’s data is never shown');
      assert.equal(streams.length, 1, 'not resumed');
      await page.click('#new-conversation');
    } finally {
      await page.unroute('**/v1/asks/*/events');
    }
  });

  test('an event beyond 16 MiB is final, said at once, and not resumed', async () => {
    // The page's parser held an endless line in memory and rescanned it for every piece (a 16 Mi
    // event took tens of seconds), then reconnected to the same stream when it ended.
    const streams = [];
    const body = 'id: 1\ndata: {"seq":1,"type":"accepted"}\n\nid: 2\ndata: ' + 'x'.repeat((16 << 20) + 1024) + '\n\n';
    await page.route('**/v1/asks/*/events', (r) => {
      streams.push(r.request().headers()['last-event-id'] ?? '');
      return r.fulfill({ status: 200, contentType: 'text/event-stream', body });
    });
    try {
      await start('How many sev1 incidents did we have in 2026-Q2?');
      await page.locator('#ask-error').filter({ hasText: 'larger than 16777216 bytes' }).waitFor();
      assert.equal(streams.length, 1, 'not resumed');
      await page.click('#new-conversation');
    } finally {
      await page.unroute('**/v1/asks/*/events');
    }
  });

  test('the bound counts bytes of UTF-8, as the Go, TypeScript and Python clients, not characters', async () => {
    // It counted UTF-16 code units: data of 9 Mi "é" (18 MiB) passed the 16 MiB bound as 9 Mi characters.
    const streams = [];
    const body = 'id: 1\ndata: {"seq":1,"type":"accepted"}\n\nid: 2\ndata: ' + 'é'.repeat(9 << 20) + '\n\n';
    await page.route('**/v1/asks/*/events', (r) => {
      streams.push(r.request().headers()['last-event-id'] ?? '');
      return r.fulfill({ status: 200, contentType: 'text/event-stream; charset=utf-8', body });
    });
    try {
      await start('How many sev1 incidents did we have in 2026-Q2?');
      await page.locator('#ask-error').filter({ hasText: 'larger than 16777216 bytes' }).waitFor();
      assert.equal(streams.length, 1, 'not resumed');
      await page.click('#new-conversation');
    } finally {
      await page.unroute('**/v1/asks/*/events');
    }
  });

  test('an outcome, branch, milestone, step or done that breaks the contract is final, named by type, seq and field, never shown', async () => {
    // An answer without text was shown empty, an error without kind as "Something went wrong:
    // undefined"-like words, a provenance without kind broke the rendering.
    const frame = (seq, ev) => `id: ${seq}\ndata: ${JSON.stringify({ seq, ticket: 't', ts: '2026-11-29T20:00:00Z', ...ev })}\n\n`;
    const answer = { type: 'answer', text: 'zq-secret', caveats: [], provenance: [], sql: [], path: { speed: 'full', detail: 'd' } };
    for (const [ev, want] of [
      [{ ...answer, text: undefined }, 'The answer event 2 of the stream is not one the service\'s contract allows (the field text is missing)'],
      [{ ...answer, provenance: [{ term: 'zq-secret', statement: 's', source: 'demo' }] }, 'The answer event 2 of the stream is not one the service\'s contract allows (the field provenance is not of the contract\'s type)'],
      [{ type: 'error', message: 'zq-secret' }, 'The error event 2 of the stream is not one the service\'s contract allows (the field kind is missing)'],
      [{ type: 'refusal', tool: 'run_query', source: 7, reason: 'zq-secret' }, 'The refusal event 2 of the stream is not one the service\'s contract allows (the field source is not of the contract\'s type)'],
      [{ type: 'milestone', phase: 'grounding', source: 'zq-secret' }, 'The milestone event 2 of the stream is not one the service\'s contract allows (the field subject is missing)'],
      // What the page shows of a step, a done and a refusal's call: said "undefined.undefined",
      // "undefined tool calls", "(call undefined)".
      [{ type: 'refusal', tool: 'run_query', source: 'demo', reason: 'zq-secret' }, 'The refusal event 2 of the stream is not one the service\'s contract allows (the field call_id is missing)'],
      [{ type: 'step', call_id: 'c1', source: 'demo', args: { sql: 'zq-secret' }, ms: 3, refused: false }, 'The step event 2 of the stream is not one the service\'s contract allows (the field tool is missing)'],
      [{ type: 'done', outcome: 'answer', steps: 0 }, 'The done event 2 of the stream is not one the service\'s contract allows (the field model_calls is missing)'],
    ]) {
      const streams = [];
      await page.route('**/v1/asks/*/events', (r) => {
        streams.push(r.request().headers()['last-event-id'] ?? '');
        return r.fulfill({ status: 200, contentType: 'text/event-stream',
          body: frame(1, { type: 'accepted' }) + frame(2, ev) + frame(3, { type: 'done', outcome: ev.type, steps: 0 }) });
      });
      try {
        const turn = await start('How many sev1 incidents did we have in 2026-Q2?');
        const said = page.locator('#ask-error').filter({ hasText: want });
        await said.waitFor();
        assert.ok(!(await said.textContent()).includes('zq-secret'), 'no value is shown');
        assert.ok(!(await turn.textContent()).includes('undefined'), 'nothing said as "undefined"');
        assert.equal(await turn.getAttribute('data-outcome'), null, 'no outcome shown');
        assert.equal(streams.length, 1, 'not resumed');
        await page.click('#new-conversation');
      } finally {
        await page.unroute('**/v1/asks/*/events');
      }
    }
  });

  test('what the service says is shown as text: markup never runs, a bidirectional control is shown as its escape', async () => {
    // Everything an event carries comes from a model and from sources, which data can steer. Markup
    // in any field must stay text; an override (U+202E) made the page show a source's 0001 as 1000
    // and turned a caveat, and the page's words after it, backwards.
    await signIn('alice');
    const X = (tag) => `<img src=x onerror="window.zqPwned=(window.zqPwned||[]).concat('${tag}')"><script>window.zqPwned=1</script><svg onload="window.zqPwned=1"> \u202e${tag}`;
    const frame = (seq, ev) => `id: ${seq}\ndata: ${JSON.stringify({ seq, ticket: 't', conversation_id: 'c', ts: '2026-11-29T20:00:00Z', ...ev })}\n\n`;
    const result = { columns: [X('column'), 'n'], rows: [[X('cell'), { o: X('object') }], ['x', 1]], truncated: false };
    const steps = [
      { type: 'accepted', question: X('question') },
      { type: 'branch', branch_id: X('branch'), role: 'source', source: X('branch-source'), state: 'open' },
      { type: 'milestone', phase: 'grounding', subject: X('subject'), source: X('milestone-source') },
      { type: 'milestone', phase: 'querying', subject: X('branch-subject'), source: 'demo', branch_id: X('branch') },
      { type: 'step', call_id: 'c1', tool: X('tool'), source: X('step-source'), args: { sql: X('args') }, ms: 3, refused: false, error: X('step-error') },
    ];
    const outcomes = [
      { type: 'answer', text: X('text'), result, caveats: [{ term: X('caveat-term'), text: X('caveat'), source: X('caveat-source') }],
        provenance: [{ term: X('term'), statement: X('statement'), source: X('provenance-source'), kind: X('kind') }],
        sql: [X('sql')], path: { speed: 'full', detail: X('detail') }, divergence: { without: [X('without')], result, sql: [X('divergence-sql')] } },
      { type: 'answer', text: 't', headline: { value: X('figure'), label: X('label') }, result: { columns: ['n'], rows: [[1]], truncated: false },
        caveats: [], provenance: [], sql: [], path: { speed: 'fast', detail: '' } },
      { type: 'refusal', tool: X('refused-tool'), source: X('refusing-source'), reason: X('reason'), call_id: X('call') },
      { type: 'abstention', terms: [X('looked-for')], sources: [X('consulted')], text: X('agent-said') },
      { type: 'error', kind: X('error-kind'), message: X('error-message') },
    ];
    const dialogs = [];
    const onDialog = (d) => { dialogs.push(d.message()); d.dismiss(); };
    page.on('dialog', onDialog);
    try {
      for (const outcome of outcomes) {
        await page.route('**/v1/asks/*/events', (r) => r.fulfill({ status: 200, contentType: 'text/event-stream',
          body: [...steps, outcome, { type: 'done', outcome: outcome.type, steps: 1, model_calls: 1, input_tokens: 10, output_tokens: 2, elapsed_ms: 5 }].map((ev, i) => frame(i + 1, ev)).join('') }));
        try {
          const turn = await start('How many sev1 incidents did we have in 2026-Q2?');
          await page.waitForFunction(() => document.querySelector('.turn:last-child')?.dataset.outcome);
          await turn.locator('details').evaluateAll((ds) => ds.forEach((d) => { d.open = true; }));
          assert.equal(await turn.locator('img, svg, script, iframe, a').count(), 0, `${outcome.type}: markup became elements`);
          const said = await turn.textContent();
          assert.ok(said.includes('<img src=x onerror='), `${outcome.type}: the markup is shown as text`);
          assert.ok(!said.includes('\u202e'), `${outcome.type}: a bidirectional override is obeyed`);
          assert.ok(said.includes('\\u202e'), `${outcome.type}: a bidirectional override is not shown as its escape`);
          await page.click('#new-conversation');
        } finally {
          await page.unroute('**/v1/asks/*/events');
        }
      }
      // A problem's words too.
      await page.route('**/v1/conversations/*/asks', (r) => r.fulfill({ status: 400, contentType: 'application/problem+json',
        body: JSON.stringify({ type: 'about:blank', title: X('title'), status: 400, detail: X('problem'), violations: [{ field: X('field'), message: X('violation') }] }) }));
      try {
        await page.fill('#question', 'How many sev1 incidents did we have in 2026-Q2?');
        await page.click('#ask-button');
        const error = page.locator('#ask-error').filter({ hasText: '<img src=x onerror=' });
        await error.waitFor();
        assert.ok(!(await error.textContent()).includes('\u202e'), 'a problem’s bidirectional override is obeyed');
        for (let i = problems.length - 1; i >= 0; i--) if (/status of 400/.test(problems[i])) problems.splice(i, 1);
      } finally {
        await page.unroute('**/v1/conversations/*/asks');
      }
      assert.equal(await page.evaluate(() => window.zqPwned ?? null), null, 'a script ran');
      assert.deepEqual(dialogs, []);
      await page.click('#new-conversation');
    } finally {
      page.off('dialog', onDialog);
    }
  });

  test('a refused ask says the problem’s detail and its violations', async () => {
    const problem = { type: 'about:blank', title: 'Bad Request', status: 400, detail: 'the request does not satisfy the API description',
      errors: ['body/question: maximum string length is 4000'] };
    await page.route('**/v1/conversations/*/asks', (r) => r.fulfill({ status: 400, contentType: 'application/problem+json', body: JSON.stringify(problem) }));
    try {
      await page.fill('#question', 'How many sev1 incidents did we have in 2026-Q2?');
      await page.click('#ask-button');
      await page.locator('#ask-error').waitFor();
      assert.equal(await page.locator('#ask-error').textContent(),
        'the request does not satisfy the API description (body/question: maximum string length is 4000)');
    } finally {
      await page.unroute('**/v1/conversations/*/asks');
      // Chromium logs the 400 this test asked for as a failed load: that one is not a problem.
      const i = problems.findIndex((p) => p.includes('status of 400 (Bad Request)') && p.includes('/asks'));
      if (i >= 0) problems.splice(i, 1);
    }
  });

  test('the Cancel button stops a running question', async () => {
    const turn = await start('Take your time: how many sev1 incidents did we have in 2026-Q2?');
    const cancel = page.locator('#cancel-button');
    assert.equal(await cancel.isEnabled(), true, 'Cancel is offered while the question runs');
    assert.equal(await page.locator('#ask-button').isEnabled(), false, 'one question at a time');
    await cancel.click();
    await turn.locator('.usage').waitFor();
    assert.equal(await turn.getAttribute('data-outcome'), 'error');
    assert.equal(await turn.locator('.outcome.error-cancelled h3').textContent(), 'Cancelled');
    assert.equal(await turn.locator('.outcome.answer').count(), 0);
    assert.equal(await cancel.isEnabled(), false);
    assert.equal(await page.locator('#ask-button').isEnabled(), true);
  });

  test('leaving the page cancels the question that was running', async () => {
    const turn = await start('Take your time: how many sev1 incidents did we have in 2026-Q2?');
    const ticket = await turn.getAttribute('data-ticket');
    assert.equal(await turn.getAttribute('data-outcome'), null, 'still running');
    const pageURL = page.url();
    await page.goto('about:blank'); // the person has gone
    // Ask the service, as alice, how that ticket ended.
    const tokenResp = await fetch(new URL('token', pageURL), { method: 'POST', body: new URLSearchParams({ oid: 'alice' }) });
    const { access_token: token } = await tokenResp.json();
    const statusResp = await fetch(new URL(`../v1/asks/${ticket}`, pageURL), {
      headers: { Authorization: `Bearer ${token}`, Prefer: 'wait=20' },
    });
    assert.equal(statusResp.status, 200);
    const status = await statusResp.json();
    assert.equal(status.state, 'error');
    assert.equal(status.terminal.kind, 'cancelled', 'the page cancelled on pagehide');
    await page.goto(pageURL);
  });

  test('bob is refused on-call pay, and the page says so as a refusal', async () => {
    await signIn('bob');
    assert.equal(await page.locator('.turn').count(), 0, 'a new identity starts a new conversation');
    const turn = await ask('What was the on-call pay per team in 2026-Q3?');
    assert.equal(await turn.getAttribute('data-outcome'), 'refusal');
    const outcome = turn.locator('.outcome.refusal');
    assert.equal(await outcome.locator('h3').textContent(), 'Refused: you are not permitted to see this');
    assert.match(await outcome.textContent(), /The demo source refused the run_query call/);
    assert.match(await outcome.textContent(), /not an empty result/);
    assert.equal(await turn.locator('.outcome.answer, .headline, table.result').count(), 0, 'nothing that looks like an answer');
    await page.screenshot({ path: join(artifacts, 'ask-ui-refusal.png'), fullPage: true });
  });

  test('a question the agent cannot take up: nothing claimed as looked up, and the agent’s own words shown', async () => {
    await signIn('alice');
    const turn = await ask('How many deployments did that team ship in 2026-Q3?'); // no earlier turn: which team?
    assert.equal(await turn.getAttribute('data-outcome'), 'abstention');
    const outcome = turn.locator('.outcome.abstention');
    assert.equal(await outcome.locator('h3').textContent(), 'No answer: nothing was looked up');
    assert.doesNotMatch(await outcome.textContent(), /looked and could not find|Looked for/);
    assert.match(await outcome.locator('.agent-said').textContent(), /^The agent said: .*Could you name the team\?$/);
    assert.equal(await turn.locator('.progress li').count(), 0, 'no milestone: no tool was called');
  });

  test('Enter in the pasted-token field uses that token, not the development sign-in', async () => {
    if (await page.locator('#signout-button').isVisible()) await page.click('#signout-button');
    const tokenResp = await fetch(new URL('token', page.url()), { method: 'POST', body: new URLSearchParams({ oid: 'bob' }) });
    const { access_token: token } = await tokenResp.json();
    await page.selectOption('#identity', 'alice');
    let minted = false;
    const onRequest = (r) => { if (r.url().endsWith('/ui/token')) minted = true; };
    page.on('request', onRequest);
    try {
      await page.click('#paste-token summary');
      await page.fill('#token-input', token);
      await page.press('#token-input', 'Enter');
      await page.locator('#whoami').filter({ hasText: 'Using your bearer token.' }).waitFor();
      assert.equal(minted, false, 'Enter signed in through the development sign-in (as alice) instead');
      const refused = await ask('What was the on-call pay per team in 2026-Q3?');
      assert.equal(await refused.getAttribute('data-outcome'), 'refusal', 'the question ran as bob, the pasted token');
    } finally {
      page.off('request', onRequest);
    }
  });

  test('a cancel sent as the person signs out is retried with their bearer, not the emptied one', async () => {
    await signIn('alice');
    const turn = await start('Take your time: how many sev1 incidents did we have in 2026-Q2?');
    const ticket = await turn.getAttribute('data-ticket');
    const bearers = [];
    let retried;
    const second = new Promise((resolve) => { retried = resolve; });
    await page.route('**/v1/asks/*/cancel', (r) => {
      bearers.push(r.request().headers()['authorization']);
      if (bearers.length === 1) {
        return r.fulfill({ status: 503, contentType: 'application/problem+json', headers: { 'Retry-After': '0' },
          body: JSON.stringify({ type: 'about:blank', title: 'Service Unavailable', status: 503 }) });
      }
      retried();
      return r.continue();
    });
    try {
      await page.click('#signout-button');
      await second;
      assert.equal(bearers.length, 2, 'the 503 retried once');
      assert.match(bearers[0], /^Bearer \S{20,}$/, 'the first attempt carried alice’s bearer');
      assert.equal(bearers[1], bearers[0], 'the retry carried the same bearer');
      const tokenResp = await fetch(new URL('token', page.url()), { method: 'POST', body: new URLSearchParams({ oid: 'alice' }) });
      const { access_token: token } = await tokenResp.json();
      const status = await (await fetch(new URL(`../v1/asks/${ticket}`, page.url()), {
        headers: { Authorization: `Bearer ${token}`, Prefer: 'wait=20' },
      })).json();
      assert.equal(status.terminal.kind, 'cancelled', 'the retried cancel cancelled the question');
    } finally {
      await page.unroute('**/v1/asks/*/cancel');
      for (let i = problems.length - 1; i >= 0; i--) {
        if (/status of 503/.test(problems[i]) && /\/cancel/.test(problems[i])) problems.splice(i, 1);
      }
    }
  });

  test('sign out forgets the identity and cancels the question that was running', async () => {
    await signIn('alice');
    const turn = await start('Take your time: how many sev1 incidents did we have in 2026-Q2?');
    const ticket = await turn.getAttribute('data-ticket');
    await page.click('#signout-button');
    assert.equal(await page.locator('#conversation').isVisible(), false, 'the conversation is gone');
    assert.equal(await page.locator('#whoami').isVisible(), false, 'nobody is signed in');
    assert.equal(await page.locator('#signin-button').isVisible(), true, 'the sign-in is offered');
    const tokenResp = await fetch(new URL('token', page.url()), { method: 'POST', body: new URLSearchParams({ oid: 'alice' }) });
    const { access_token: token } = await tokenResp.json();
    const status = await (await fetch(new URL(`../v1/asks/${ticket}`, page.url()), {
      headers: { Authorization: `Bearer ${token}`, Prefer: 'wait=20' },
    })).json();
    assert.equal(status.terminal.kind, 'cancelled', 'signing out cancelled the running question');
  });

  // Leaving a running question for a new conversation, or signing in again as someone else,
  // cancels it at the service (with the bearer it was asked with): left running, it held one of
  // the identity's asks in flight for nothing.
  for (const [how, leave] of [
    ['a new conversation', async () => { await page.click('#new-conversation'); }],
    ['signing in as bob', async () => { await signIn('bob'); }],
  ]) {
    test(`${how} cancels the question that was running`, async () => {
      await signIn('alice');
      const turn = await start('Take your time: how many sev1 incidents did we have in 2026-Q2?');
      const ticket = await turn.getAttribute('data-ticket');
      await leave();
      const tokenResp = await fetch(new URL('token', page.url()), { method: 'POST', body: new URLSearchParams({ oid: 'alice' }) });
      const { access_token: token } = await tokenResp.json();
      const status = await (await fetch(new URL(`../v1/asks/${ticket}`, page.url()), {
        headers: { Authorization: `Bearer ${token}`, Prefer: 'wait=20' },
      })).json();
      assert.equal(status.terminal.kind, 'cancelled', `${how} cancelled the running question`);
    });
  }

  // A question longer than the contract allows is said so at once, in characters, and kept in
  // the box; nothing is sent.
  test('a question over 4000 characters is refused by the page in plain words', async () => {
    await signIn('alice');
    const asked = [];
    const seen = (r) => { if (r.url().includes('/v1/') && r.method() === 'POST') asked.push(r.url()); };
    page.on('request', seen);
    try {
      await page.fill('#question', 'x'.repeat(4001));
      await page.click('#ask-button');
      await page.locator('#ask-error').filter({ hasText: 'at most 4000 characters; this one has 4001' }).waitFor();
      assert.equal(await page.inputValue('#question'), 'x'.repeat(4001), 'the question stays in the box');
      assert.deepEqual(asked, [], 'nothing was sent');
    } finally {
      page.off('request', seen);
    }
  });

  // The page at a phone's width and a laptop's: it never scrolls sideways; a silent model wait
  // shows that work is going on; a refused call is marked refused, never ✓.
  for (const width of [390, 1280]) {
    test(`at ${width} px: no horizontal overflow, a visible working state, a refused step marked refused`, async () => {
      await page.setViewportSize({ width, height: 900 });
      const overflow = () => page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
      try {
        await signIn('alice');
        assert.equal(await overflow(), 0, 'signed in: no horizontal overflow');
        const slow = await start('Take your time: how many sev1 incidents did we have in 2026-Q2?');
        await slow.locator('.working').waitFor({ state: 'visible' });
        // Read the silent moment at once: before the model's first call returns, no milestone yet.
        const silent = await slow.evaluate((t) => ({ milestones: t.querySelectorAll('.progress li').length, words: t.querySelector('.working').textContent }));
        assert.equal(silent.milestones, 0, 'the model is still silent');
        assert.match(silent.words, /^Working: the agent is thinking about the question… \d+ s$/);
        await page.screenshot({ path: join(artifacts, `ask-ui-working-${width}.png`), fullPage: true });
        await slow.locator('.usage').waitFor();
        assert.equal(await slow.locator('.working').isVisible(), false, 'the working state ends with the outcome');

        await signIn('bob');
        const refused = await ask('What was the on-call pay per team in 2026-Q3?');
        assert.equal(await refused.getAttribute('data-outcome'), 'refusal');
        const marked = refused.locator('.progress li.refused');
        assert.equal(await marked.count(), 1, 'the refused call’s milestone is marked');
        assert.match(await marked.textContent(), /^Querying oncall_pay.* — refused$/);
        const marker = await marked.evaluate((li) => getComputedStyle(li, '::marker').content);
        assert.match(marker, /✗/);
        assert.doesNotMatch(marker, /✓/);
        await refused.locator('.work summary').click(); // the tool calls, with their long ids and arguments
        assert.equal(await overflow(), 0, `no horizontal overflow at ${width} px`);
        await page.screenshot({ path: join(artifacts, `ask-ui-${width}.png`), fullPage: true });
      } finally {
        await page.setViewportSize({ width: 1100, height: 900 });
      }
    });
  }

  test('no script error and no blocked resource on the way', () => {
    assert.deepEqual(problems, []);
  });
});
