// vm web in headless Chromium (Debian's /usr/bin/chromium driven by npm's
// playwright-core), for tests/web/run: a wrong password is refused; log in
// as khyveadm; the list shows the guest; start it on its page; eject and
// insert its CD on the drives card; the serial
// console shows "WEB TICK"; the VNC canvas is not blank; stop it.  Element
// ids are the contract's (share/web).  Screenshots OUT/{login,list,guest,
// vnc,serial}.png (tests/web/run checks them with tests/web/pngcheck).
// Prints "ok STEP" or "FAIL STEP: detail" per step, then one JSON summary
// line; exit 0 when every step passed.  A step that a later one needs
// (log-in, start) ends the run when it fails.
//
// Environment: WEB_URL (https://127.0.0.1:PORT), WEB_ADMIN_PASSWORD,
// WEB_GUEST (default webtest), WEB_OUT (screenshots), PW_DIR (where
// node_modules/playwright-core is), WEB_PROFILE (a fresh directory for
// Chromium's profile), WEB_STEP_MS (each step's timeout, default 15000).
import { createRequire } from 'node:module';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const env = process.env;
const base = env.WEB_URL;
const guest = env.WEB_GUEST || 'webtest';
const out = env.WEB_OUT || 'build/web';
const stepMs = Number(env.WEB_STEP_MS || 15000);
if (!base || !env.WEB_ADMIN_PASSWORD || !env.PW_DIR) {
	console.error('ui.mjs: set WEB_URL, WEB_ADMIN_PASSWORD and PW_DIR');
	process.exit(2);
}
const require = createRequire(join(env.PW_DIR, 'package.json'));
const { chromium } = require('playwright-core');

const results = [];
const shots = [];
let failed = 0;
function ok(step, detail) {
	results.push({ step, ok: true, detail: detail || '' });
	console.log(`ok ui-${step}${detail ? ` (${detail})` : ''}`);
}
function bad(step, detail) {
	failed++;
	results.push({ step, ok: false, detail });
	console.log(`FAIL ui-${step}: ${String(detail).split('\n')[0].slice(0, 300)}`);
}
// step(NAME, FN): FN's result is the detail; an exception fails the step
// (the page as it was then: OUT/failed-NAME.png).
async function step(name, fn) {
	try {
		ok(name, await fn());
		return true;
	} catch (e) {
		bad(name, e && e.message ? e.message : String(e));
		await page.screenshot({ path: join(out, `failed-${name}.png`), timeout: 5000 }).catch(() => {});
		return false;
	}
}
async function shot(page, name) {
	const path = join(out, `${name}.png`);
	await page.screenshot({ path, timeout: stepMs });
	shots.push(path);
}
const url = (path) => new URL(path, base).toString();
const enc = encodeURIComponent(guest);

const profile = env.WEB_PROFILE || mkdtempSync(join(tmpdir(), 'khyve-chromium-'));
let context;
const pageErrors = [];
try {
	context = await chromium.launchPersistentContext(profile, {
		executablePath: '/usr/bin/chromium',
		headless: true,
		args: [
			'--headless', '--no-sandbox', '--disable-gpu', '--no-first-run',
			'--disable-background-networking', '--disable-component-update', '--disable-sync',
		],
		ignoreHTTPSErrors: true,
		viewport: { width: 1280, height: 900 },
		timeout: stepMs,
	});
} catch (e) {
	bad('launch', e.message);
	summary();
	process.exit(1);
}
const page = context.pages()[0] || (await context.newPage());
page.setDefaultTimeout(stepMs);
// A confirm() before a change (stop, power-off) is answered yes.
page.on('dialog', (d) => d.accept().catch(() => {}));
page.on('pageerror', (e) => pageErrors.push(`${page.url()}: ${e.message}`));
page.on('console', (m) => {
	if (m.type() === 'error') pageErrors.push(`${page.url()}: console: ${m.text()}`);
});

// The guest's state text on guest.html, waited for until it matches re.
async function waitState(re) {
	await page.waitForFunction(
		(src) => {
			const el = document.querySelector('#guest-state');
			return el && new RegExp(src, 'i').test(el.textContent);
		},
		re.source,
		{ timeout: stepMs, polling: 200 },
	);
	return (await page.textContent('#guest-state')).trim();
}

async function run() {
	if (!(await step('login-page', async () => {
		await page.goto(url('/'), { timeout: stepMs });
		await page.waitForSelector('#login-user', { state: 'visible' });
		await shot(page, 'login');
		return 'login form shown';
	})))
		return;

	await step('wrong-password', async () => {
		await page.fill('#login-user', 'khyveadm');
		await page.fill('#login-password', 'not-the-password');
		await page.click('#login-submit');
		await page.waitForFunction(() => {
			const el = document.querySelector('#login-error');
			return el && el.textContent.trim() !== '' && el.offsetParent !== null;
		}, null, { timeout: stepMs, polling: 200 });
		if (await page.isVisible('#guest-list')) throw new Error('the guest list shows after a wrong password');
		return (await page.textContent('#login-error')).trim();
	});

	if (!(await step('login', async () => {
		await page.fill('#login-user', 'khyveadm');
		await page.fill('#login-password', env.WEB_ADMIN_PASSWORD);
		await page.click('#login-submit');
		await page.waitForSelector(`#guest-list tr[data-guest="${guest}"]`, { state: 'visible' });
		return 'guest list shown';
	})))
		return;

	await step('list', async () => {
		const row = page.locator(`#guest-list tr[data-guest="${guest}"]`);
		const state = (await row.locator('td.state').textContent()).trim();
		if (!/stopped/i.test(state)) throw new Error(`state '${state}', want Stopped`);
		await shot(page, 'list');
		return `${guest}: ${state}`;
	});

	if (!(await step('start', async () => {
		await page.goto(url(`/guest.html?name=${enc}`));
		await page.waitForSelector('#guest-state', { state: 'visible' });
		await page.click('#btn-start');
		const s = await waitState(/running/);
		await shot(page, 'guest');
		return s;
	})))
		return;

	// The CD card (tests/web/run inserted small.iso, 20000 bytes, into
	// cd0 before; this start has vm's cd.iso, 1 MiB): eject, then insert
	// small.iso through the select and the buttons.
	await step('drives', async () => {
		const medium = (re) => page.waitForFunction(
			(src) => new RegExp(src).test(document.querySelector('#drives tr[data-drive="cd0"] td.medium')?.textContent || ''),
			re.source, { timeout: stepMs, polling: 200 });
		await medium(/^medium \(1\.0 MiB\)$/);
		await page.click('#btn-eject-cd0');
		await medium(/^empty$/);
		await page.waitForFunction(
			() => [...(document.querySelector('#drive-iso-cd0')?.options || [])].some((o) => o.value === 'small.iso'),
			null, { timeout: stepMs, polling: 200 });
		await page.selectOption('#drive-iso-cd0', 'small.iso');
		await page.click('#btn-insert-cd0');
		await medium(/^medium \(0\.02 MiB\)$/);
		await shot(page, 'drives');
		return (await page.textContent('#drives tr[data-drive="cd0"] td.medium')).trim();
	});

	await step('serial', async () => {
		await page.goto(url(`/serial.html?name=${enc}`));
		await page.waitForFunction(
			() => /^\s*connected\s*$/i.test(document.querySelector('#serial-status')?.textContent || ''),
			null, { timeout: stepMs, polling: 200 });
		// xterm.js's DOM renderer keeps the rows' text in the page; with a
		// canvas renderer only its buffer has it (a Terminal on window).
		const handle = await page.waitForFunction(() => {
			let text = document.querySelector('#terminal')?.textContent || '';
			for (const t of [window.term, window.terminal, window.xterm]) {
				const b = t && t.buffer && t.buffer.active;
				for (let i = 0; b && i < b.length; i++) text += `\n${b.getLine(i)?.translateToString(true) || ''}`;
			}
			const m = text.match(/WEB TICK \d+/g);
			return m ? m[m.length - 1] : false;
		}, null, { timeout: stepMs, polling: 200 });
		const tick = await handle.jsonValue();
		await shot(page, 'serial');
		return tick;
	});

	await step('vnc', async () => {
		await page.goto(url(`/vnc.html?name=${enc}`));
		await page.waitForFunction(
			() => /^\s*connected\s*$/i.test(document.querySelector('#vnc-status')?.textContent || ''),
			null, { timeout: stepMs, polling: 200 });
		// noVNC draws on a 2D canvas inside #vnc-screen: wait for lit pixels.
		const handle = await page.waitForFunction(() => {
			const c = document.querySelector('#vnc-screen canvas');
			if (!c || !c.width || !c.height) return false;
			const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
			let lit = 0;
			const colours = new Set();
			for (let i = 0; i < d.length; i += 4 * 7) {
				if (d[i] | d[i + 1] | d[i + 2]) lit++;
				if (colours.size < 64) colours.add((d[i] << 16) | (d[i + 1] << 8) | d[i + 2]);
			}
			return lit > 0 && colours.size > 1 ? `${c.width}x${c.height}, ${colours.size} colours` : false;
		}, null, { timeout: stepMs, polling: 250 });
		const detail = await handle.jsonValue();
		await shot(page, 'vnc');
		return detail;
	});

	// For docs/web.md: the list with the guest running, and its page once
	// the graphs have a few samples (the page polls every 2 s).
	await step('list-running', async () => {
		await page.goto(url('/'));
		const row = page.locator(`#guest-list tr[data-guest="${guest}"] td.state`);
		await page.waitForFunction((sel) => /running/i.test(document.querySelector(sel)?.textContent || ''),
			`#guest-list tr[data-guest="${guest}"] td.state`, { timeout: stepMs, polling: 200 });
		await shot(page, 'list-running');
		return (await row.textContent()).trim();
	});

	await step('stop', async () => {
		await page.goto(url(`/guest.html?name=${enc}`));
		await page.waitForSelector('#guest-state', { state: 'visible' });
		await page.waitForTimeout(7000);
		await shot(page, 'guest-graphs');
		await page.click('#btn-stop');
		return waitState(/stopped/);
	});

	// A console of a stopped guest says why it did not open.
	await step('vnc-refused', async () => {
		await page.goto(url(`/vnc.html?name=${enc}`));
		const handle = await page.waitForFunction(
			() => (document.querySelector('#vnc-screen .console-msg')?.textContent || '').match(/is not running/) &&
				document.querySelector('#vnc-screen .console-msg').textContent,
			null, { timeout: stepMs, polling: 200 });
		return handle.jsonValue();
	});
}

function summary() {
	console.log(JSON.stringify({
		ui: failed === 0 ? 'ok' : 'failed',
		passed: results.filter((r) => r.ok).length,
		failed,
		steps: results,
		screenshots: shots,
		page_errors: pageErrors.slice(0, 20),
	}));
}

try {
	await run();
} catch (e) {
	bad('run', e.message);
} finally {
	for (const e of pageErrors.slice(0, 10)) console.log(`# ${e}`);
	await context.close().catch(() => {});
	if (!env.WEB_PROFILE) rmSync(profile, { recursive: true, force: true });
}
summary();
process.exit(failed === 0 ? 0 : 1);
