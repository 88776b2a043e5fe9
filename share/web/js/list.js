// index.html: the log-in form, then the guest list (live every 2 s) and the
// host's switches and datastores.
import {
  $, api, el, fmtBytes, fmtDuration, initPage, isAdmin, login, notice, poll, queryParam, safeNext,
  showUser, stateBadge,
} from './api.js';

const rows = new Map(); // guest name -> its <tr>
let poller = null;
let hostShown = 0;

function showLogin() {
  $('main-view').hidden = true;
  $('nav').hidden = true;
  $('login-view').hidden = false;
  $('login-user').focus();
}

async function onLogin(ev) {
  ev.preventDefault();
  const err = $('login-error');
  const submit = $('login-submit');
  err.textContent = '';
  submit.disabled = true;
  try {
    const s = await login($('login-user').value, $('login-password').value);
    $('login-password').value = '';
    const next = safeNext(queryParam('next'));
    if (next !== '/' && next !== '/index.html') {
      location.href = next;
      return;
    }
    showUser(s);
    showMain();
  } catch (e) {
    err.textContent = e.status === 429 ? 'Too many failed log-ins: wait a minute and try again.' : e.message;
    $('login-password').select();
  } finally {
    submit.disabled = false;
  }
}

function consoleLinks(g) {
  const running = g.state === 'Running' || g.state === 'Paused';
  if (!running || !isAdmin()) return [el('span', { class: 'muted', text: '-' })];
  const links = [];
  if (g.vnc) links.push(el('a', { href: '/vnc.html?name=' + encodeURIComponent(g.name), text: 'VNC' }));
  links.push(el('a', { href: '/serial.html?name=' + encodeURIComponent(g.name), text: 'Serial' }));
  return links.flatMap((l, i) => (i ? [' · ', l] : [l]));
}

function cells(g) {
  const href = '/guest.html?name=' + encodeURIComponent(g.name);
  return [
    el('td', { class: 'name' }, el('a', { href, text: g.name })),
    el('td', { class: 'state' }, stateBadge(g.state)),
    el('td', { class: 'num', text: g.cpus || '-' }),
    el('td', { class: 'num', text: g.memory || '-' }),
    el('td', { class: 'num', text: g.cpu_percent === null || g.cpu_percent === undefined ? '-' : g.cpu_percent.toFixed(1) + ' %' }),
    el('td', { class: 'num', text: g.rss_kib === null || g.rss_kib === undefined ? '-' : fmtBytes(g.rss_kib * 1024) }),
    el('td', { class: 'num', text: fmtDuration(g.uptime_s) }),
    el('td', { class: 'mono', text: g.vnc || '-' }),
    el('td', { text: g.autostart ? 'yes' : 'no' }),
    el('td', { text: g.datastore || '-' }),
    el('td', { class: 'links' }, consoleLinks(g)),
  ];
}

// Rows are updated in place: a link being clicked is never swapped away.
function renderGuests(data) {
  const tbody = $('guest-list').tBodies[0];
  const seen = new Set();
  for (const g of data.guests || []) {
    seen.add(g.name);
    let tr = rows.get(g.name);
    if (!tr) {
      tr = el('tr', { dataset: { guest: g.name } });
      rows.set(g.name, tr);
    }
    const fresh = cells(g);
    if (tr.children.length !== fresh.length) {
      tr.replaceChildren(...fresh);
    } else {
      fresh.forEach((td, i) => {
        const old = tr.children[i];
        if (old.innerHTML !== td.innerHTML || old.className !== td.className) tr.replaceChild(td, old);
      });
    }
    tbody.append(tr); // keeps the daemon's order
  }
  for (const [name, tr] of rows) {
    if (!seen.has(name)) {
      tr.remove();
      rows.delete(name);
    }
  }
  $('guest-empty').hidden = rows.size > 0;
  const h = data.host || {};
  $('guest-summary').textContent =
    h.guests_total !== undefined ? `${h.guests_running} of ${h.guests_total} running` : '';
  if (h.name) $('host-name').textContent = h.name;
}

function usageBar(free, total) {
  if (!total) return el('span', { class: 'muted', text: '-' });
  const used = Math.max(0, Math.min(1, 1 - free / total));
  const pct = Math.round(used * 100);
  return el('div', { class: 'usage', title: `${fmtBytes(total - free)} of ${fmtBytes(total)} used` },
    el('div', { class: 'usage-fill' + (pct > 90 ? ' usage-high' : ''), style: `width:${pct}%` }),
    el('span', { class: 'usage-text', text: pct + ' %' }));
}

function renderHost(h) {
  const sw = $('switch-list').tBodies[0];
  sw.replaceChildren(...(h.switches || []).map((s) =>
    el('tr', {}, el('td', { text: s.name }), el('td', { text: s.type || '-' }),
      el('td', { class: 'mono', text: (s.interfaces || []).join(', ') || '-' }),
      el('td', { class: 'mono', text: s.address || '-' }))));
  if (!sw.children.length) sw.append(el('tr', {}, el('td', { colspan: 4, class: 'muted', text: 'No switches.' })));
  const ds = $('datastore-list').tBodies[0];
  ds.replaceChildren(...(h.datastores || []).map((d) =>
    el('tr', {}, el('td', { text: d.name }), el('td', { class: 'mono', text: d.path }),
      el('td', {}, usageBar(d.free_bytes, d.total_bytes)),
      el('td', { class: 'num', text: fmtBytes(d.free_bytes) }))));
  if (h.name) $('host-name').textContent = h.name;
}

async function refresh() {
  if ($('main-view').hidden) return;
  const data = await api('/api/guests');
  renderGuests(data);
  notice('');
  // Switches and datastores change rarely: every 10 s is enough.
  if (Date.now() - hostShown > 10000) {
    hostShown = Date.now();
    renderHost(await api('/api/host'));
  }
}

function showMain() {
  $('login-view').hidden = true;
  $('main-view').hidden = false;
  $('nav').hidden = false;
  if (!poller) {
    poller = poll(() => refresh().catch((e) => {
      if (e.status !== 401) notice(e.message, true);
    }), 2000);
  }
}

document.addEventListener('khyve-login-needed', showLogin);
$('login-form').addEventListener('submit', onLogin);
initPage({ requireLogin: false }).then((s) => (s ? showMain() : showLogin()));
