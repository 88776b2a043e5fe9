// The pages' one way to the daemon: JSON over fetch() with the session cookie,
// X-CSRF-Token on every change, and a 401 sending the user to the log-in view.
// Also the small DOM and formatting helpers every page shares.

let session = null; // {user, role, csrf} from /api/session or /api/login

export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

// The log-in view lives on index.html; other pages come back after it (?next=).
export function toLogin() {
  if (location.pathname === '/' || location.pathname === '/index.html') {
    document.dispatchEvent(new CustomEvent('khyve-login-needed'));
    return;
  }
  location.href = '/?next=' + encodeURIComponent(location.pathname + location.search);
}

// Only a path on this origin may be a place to come back to.
export function safeNext(value) {
  if (!value || value[0] !== '/' || value[1] === '/' || value.includes('\\')) return '/';
  return value;
}

async function parseBody(r) {
  const text = await r.text();
  if (!text) return null;
  try {
    return JSON.parse(text);
  } catch {
    return { error: text.slice(0, 200) };
  }
}

// api(path, {method, body}) -> the parsed JSON reply (null for 204).
// Throws ApiError(status, message) on an HTTP error or a network failure.
export async function api(path, { method = 'GET', body } = {}) {
  const opts = { method, credentials: 'same-origin', headers: {} };
  if (method !== 'GET') opts.headers['X-CSRF-Token'] = session ? session.csrf : '';
  if (body !== undefined) {
    opts.headers['Content-Type'] = 'application/json';
    opts.body = JSON.stringify(body);
  }
  let r;
  try {
    r = await fetch(path, opts);
  } catch (e) {
    throw new ApiError(0, 'the web daemon cannot be reached');
  }
  const data = await parseBody(r);
  if (r.status === 401 && path !== '/api/login' && path !== '/api/session') {
    session = null;
    toLogin();
  }
  if (!r.ok) throw new ApiError(r.status, (data && data.error) || r.statusText || 'HTTP ' + r.status);
  return data;
}

// The session, or null when not logged in.
export async function getSession() {
  try {
    session = await api('/api/session');
  } catch (e) {
    if (e.status !== 401) throw e;
    session = null;
  }
  return session;
}

export function currentSession() {
  return session;
}

export function isAdmin() {
  return !!session && session.role === 'admin';
}

export async function login(user, password) {
  session = await api('/api/login', { method: 'POST', body: { user, password } });
  return session;
}

export async function logout() {
  try {
    await api('/api/logout', { method: 'POST' });
  } finally {
    session = null;
    location.href = '/';
  }
}

// el('td', {class: 'x', dataset: {guest: n}}, 'text', child...): DOM without innerHTML,
// so no name or log line from the host can become markup.
export function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') e.className = v;
    else if (k === 'dataset') Object.assign(e.dataset, v);
    else if (k === 'text') e.textContent = v;
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? '' : v);
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    e.append(c instanceof Node ? c : String(c));
  }
  return e;
}

export function $(id) {
  return document.getElementById(id);
}

export function stateBadge(state) {
  const s = state || 'Unknown';
  return el('span', { class: 'badge badge-' + s.toLowerCase(), text: s });
}

export function fmtBytes(n) {
  if (n === null || n === undefined || isNaN(n)) return '-';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
  let i = 0;
  let v = Number(n);
  while (Math.abs(v) >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return (i === 0 ? v.toFixed(0) : v.toFixed(v < 10 ? 2 : v < 100 ? 1 : 0)) + ' ' + units[i];
}

export function fmtDuration(s) {
  if (s === null || s === undefined || isNaN(s)) return '-';
  s = Math.floor(s);
  const d = Math.floor(s / 86400);
  const h = Math.floor((s % 86400) / 3600);
  const m = Math.floor((s % 3600) / 60);
  const sec = s % 60;
  if (d) return `${d}d ${h}h ${m}m`;
  if (h) return `${h}h ${m}m`;
  if (m) return `${m}m ${sec}s`;
  return `${sec}s`;
}

export function fmtTime(unix) {
  if (!unix) return '-';
  const d = new Date(unix * 1000);
  const p = (x) => String(x).padStart(2, '0');
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
}

export function queryParam(key) {
  return new URLSearchParams(location.search).get(key);
}

// Run fn now and every `ms` while the tab is visible; a hidden tab stops asking.
export function poll(fn, ms = 2000) {
  let timer = null;
  let running = false;
  const tick = async () => {
    timer = null;
    if (document.hidden || running) return;
    running = true;
    try {
      await fn();
    } catch (e) {
      console.warn(e.message || e);
    } finally {
      running = false;
    }
    if (!document.hidden && timer === null) timer = setTimeout(tick, ms);
  };
  document.addEventListener('visibilitychange', () => {
    if (document.hidden) {
      if (timer !== null) clearTimeout(timer);
      timer = null;
    } else if (timer === null) {
      tick();
    }
  });
  tick();
  return { now: () => { if (timer !== null) clearTimeout(timer); timer = null; tick(); } };
}

// A short message in the page's status line (#notice): kind true is an error
// (red), 'info' a remark (grey), else a success (green).
export function notice(text, kind = false) {
  const n = $('notice');
  if (!n) return;
  n.textContent = text || '';
  const cls = kind === true ? ' notice-error' : kind === 'info' ? ' notice-info' : ' notice-ok';
  n.className = 'notice' + (text ? cls : '');
}

// The header bar: host name, user and role, logout.  Returns the session, or
// null after sending the user to the log-in view (requireLogin).
export async function initPage({ requireLogin = true } = {}) {
  const btn = $('logout');
  if (btn) btn.addEventListener('click', () => logout());
  let s = null;
  try {
    s = await getSession();
  } catch (e) {
    notice(e.message, true);
  }
  if (!s) {
    if (requireLogin) toLogin();
    return null;
  }
  showUser(s);
  api('/api/host')
    .then((h) => {
      const hn = $('host-name');
      if (hn && h && h.name) hn.textContent = h.name;
      if (h && h.name) document.title = document.title.replace(/ - .*$/, '') + ' - ' + h.name;
    })
    .catch(() => {});
  return s;
}

export function showUser(s) {
  const u = $('user-info');
  if (u) {
    u.replaceChildren(el('span', { class: 'user-name', text: s.user }), ' ',
      el('span', { class: 'role role-' + s.role, text: s.role }));
  }
  const btn = $('logout');
  if (btn) btn.hidden = false;
  document.body.classList.toggle('viewer', s.role !== 'admin');
}

// Why a console's WebSocket closed before it opened: the browser shows no
// HTTP status for a refused upgrade, so ask the guest's page data.  `what`
// is 'vnc' or a serial port ('com1').  Resolves to a sentence, or '' when
// nothing explains it (the guest's khyve may have just exited).
export async function consoleRefusal(name, what) {
  let g;
  try {
    g = await api('/api/guests/' + encodeURIComponent(name));
  } catch (e) {
    return e.status === 404 ? `There is no guest ${name}.` : '';
  }
  if (!g || !/^(running|paused)$/i.test(g.state || '')) return `${name} is not running.`;
  if (what === 'vnc' && !g.vnc) return `${name} has no graphical console: set graphics="yes" and restart it.`;
  if (what !== 'vnc' && !(g.console_ports || []).includes(what)) return `${name} has no ${what}.`;
  return '';
}
