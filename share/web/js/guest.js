// guest.html?name=NAME: one guest's state, actions, graphs, configuration,
// disks, CD/DVD drives (drives.js), NICs, snapshots and its tasks; live
// every 2 s.
import {
  $, api, el, fmtBytes, fmtDuration, fmtTime, initPage, isAdmin, notice, poll, queryParam, stateBadge,
} from './api.js';
import { createDrivesCard } from './drives.js';
import { LineGraph, counterRates, counterTotals } from './graphs.js';

const name = queryParam('name') || '';
const ACTIONS = ['start', 'stop', 'restart', 'poweroff', 'reset'];
// Which actions apply in which state (vm start on a running guest does not).
const APPLIES = {
  Running: ['stop', 'restart', 'poweroff', 'reset'],
  Paused: ['stop', 'restart', 'poweroff', 'reset'],
  Stopped: ['start'],
  Suspended: ['start'], // vm start resumes it
  Starting: ['poweroff'],
  Locked: [],
};
const watched = new Set(); // task ids this page started
let busy = false; // an action request is on its way
let prevTotals = null;
let lastConfigText = '';
let graphs = null;
let poller = null;
let current = { state: 'Locked', vnc: '' }; // the guest as last seen
const drivesCard = createDrivesCard(name, () => poller && poller.now());

function setupGraphs() {
  graphs = {
    cpu: new LineGraph($('graph-cpu'), {
      title: 'CPU (exits/s)', unit: 'exits/s', series: [{ label: 'exits', color: '#2563eb' }],
    }),
    disk: new LineGraph($('graph-disk'), {
      title: 'Disk', unit: 'B/s',
      series: [{ label: 'read', color: '#0891b2' }, { label: 'write', color: '#d97706' }],
    }),
    net: new LineGraph($('graph-net'), {
      title: 'Network', unit: 'B/s',
      series: [{ label: 'in', color: '#16a34a' }, { label: 'out', color: '#9333ea' }],
    }),
  };
}

function updateGraphs(counters) {
  const has = (group) => !!counters && Object.keys(counters[group] || {}).length > 0;
  const why = counters ? 'collecting samples...' : 'no counters: the guest is not running';
  graphs.cpu.emptyText = why;
  graphs.disk.emptyText = counters && !has('disk') ? 'the guest has no disks' : why;
  graphs.net.emptyText = counters && !has('nic') ? 'the guest has no NICs' : why;
  if (!counters) {
    if (prevTotals) for (const g of Object.values(graphs)) g.clear();
    prevTotals = null;
    return;
  }
  const cur = counterTotals(counters);
  const r = counterRates(prevTotals, cur);
  prevTotals = cur;
  if (!r) {
    for (const g of Object.values(graphs)) g.draw();
    return;
  }
  graphs.cpu.push([r.exits]);
  if (has('disk')) graphs.disk.push([r.diskRead, r.diskWrite]);
  else graphs.disk.draw();
  if (has('nic')) graphs.net.push([r.netRx, r.netTx]);
  else graphs.net.draw();
}

function setButtons() {
  const state = current.state;
  // While a task this page started runs, nothing is offered twice.
  const ok = (!busy && watched.size === 0 && isAdmin() && APPLIES[state]) || [];
  for (const a of ACTIONS) {
    const b = $('btn-' + a);
    b.disabled = !ok.includes(a);
    b.title = isAdmin() ? '' : 'viewers may not change guests';
  }
  const live = state === 'Running' || state === 'Paused';
  for (const [id, page] of [['link-vnc', 'vnc'], ['link-serial', 'serial']]) {
    const a = $(id);
    a.href = `/${page}.html?name=${encodeURIComponent(name)}`;
    a.hidden = !isAdmin() || !live || (page === 'vnc' && !current.vnc);
  }
}

function kvRows(pairs) {
  return pairs.map(([k, v]) => el('tr', {}, el('td', { text: k }), el('td', {}, v)));
}

function render(g) {
  const st = $('guest-state');
  st.className = 'badge badge-' + String(g.state || 'unknown').toLowerCase();
  st.textContent = g.state || '-';
  $('guest-summary').textContent = g.state === 'Running' && g.uptime_s !== null ? 'up ' + fmtDuration(g.uptime_s) : '';
  current = { state: g.state, vnc: g.vnc };
  setButtons();

  $('guest-summary-table').tBodies[0].replaceChildren(...kvRows([
    ['State', stateBadge(g.state)],
    ['PID', g.pid ?? '-'],
    ['CPUs', g.cpus || '-'],
    ['Memory', g.memory || '-'],
    ['CPU usage', g.cpu_percent === null || g.cpu_percent === undefined ? '-' : g.cpu_percent.toFixed(1) + ' %'],
    ['Resident memory', g.rss_kib === null || g.rss_kib === undefined ? '-' : fmtBytes(g.rss_kib * 1024)],
    ['Uptime', fmtDuration(g.uptime_s)],
    ['VNC', el('span', { class: 'mono', text: g.vnc || '-' })],
    ['Autostart', g.autostart ? 'yes' : 'no'],
    ['Loader', g.loader || '-'],
    ['Datastore', g.datastore || '-'],
    ['Consoles', (g.console_ports || []).join(', ') || '-'],
  ]));

  // The configuration changes rarely: redrawn only when it did.
  const cfg = g.config || {};
  const cfgText = JSON.stringify(cfg);
  if (cfgText !== lastConfigText) {
    lastConfigText = cfgText;
    const keys = Object.keys(cfg).sort();
    $('guest-config').tBodies[0].replaceChildren(...(keys.length
      ? kvRows(keys.map((k) => [k, el('span', { class: 'mono', text: String(cfg[k]) })]))
      : [el('tr', {}, el('td', { class: 'muted', text: 'empty' }))]));
  }

  $('guest-disks').tBodies[0].replaceChildren(...orNone(g.disks, 4, (d) => el('tr', {},
    el('td', { class: 'num', text: d.index }), el('td', { text: d.type }),
    el('td', { class: 'mono', text: d.name }), el('td', { class: 'num', text: fmtBytes(d.size_bytes) }))));
  $('guest-nics').tBodies[0].replaceChildren(...orNone(g.nics, 4, (n) => el('tr', {},
    el('td', { class: 'num', text: n.index }), el('td', { text: n.type }),
    el('td', { text: n.switch || '-' }), el('td', { class: 'mono', text: n.mac || '-' }))));
  $('guest-snapshots').tBodies[0].replaceChildren(...orNone(g.snapshots, 1, (s) =>
    el('tr', {}, el('td', { class: 'mono', text: s }))));
  updateGraphs(g.counters);
}

function orNone(list, cols, row) {
  if (!list || !list.length) return [el('tr', {}, el('td', { colspan: cols, class: 'muted', text: 'none' }))];
  return list.map(row);
}

function renderTasks(tasks) {
  // Its own: started here, or a command naming it (vm create ... NAME && vm install NAME ISO).
  const mine = tasks.filter((t) => watched.has(t.id) || (t.command || '').split(' ').slice(2).includes(name));
  const body = $('guest-tasks').tBodies[0];
  body.replaceChildren(...orNone(mine.slice(0, 8), 4, (t) => el('tr', {},
    el('td', { text: fmtTime(t.started) }), el('td', { text: t.user }),
    el('td', { class: 'mono', text: t.command }),
    el('td', {}, el('span', { class: 'badge badge-' + t.state, text: t.state + (t.status ? ' (' + t.status + ')' : '') })))));
  for (const id of watched) if (!tasks.some((t) => t.id === id)) watched.delete(id);
  for (const t of tasks) {
    if (!watched.has(t.id) || t.state === 'running') continue;
    watched.delete(t.id);
    if (t.state === 'ok') notice(`${t.command}: done`);
    else notice(`${t.command} failed: ${(t.output || '').trim().split('\n').pop() || 'status ' + t.status}`, true);
  }
}

// The forced ones cut the guest off as pulling the plug would: ask first,
// as `vm poweroff` and Proxmox do.
const CONFIRM = {
  poweroff: 'Power off NAME at once, without shutting it down?',
  reset: 'Reset NAME at once, without shutting it down?',
};

async function act(action) {
  if (CONFIRM[action] && !window.confirm(CONFIRM[action].replace('NAME', name))) return;
  busy = true;
  setButtons();
  notice(`${action}: sending...`);
  try {
    const r = await api(`/api/guests/${encodeURIComponent(name)}/${action}`, { method: 'POST' });
    if (r && r.task) watched.add(r.task);
    notice(`${action}: task ${r && r.task} started`);
  } catch (e) {
    notice(`${action}: ${e.message}`, true);
  } finally {
    busy = false;
    poller.now();
  }
}

async function refresh() {
  let g;
  try {
    g = await api('/api/guests/' + encodeURIComponent(name));
  } catch (e) {
    if (e.status === 404) {
      $('guest-state').textContent = 'unknown';
      notice(`There is no guest named "${name}".`, true);
      current = { state: 'Locked', vnc: '' };
      setButtons();
      await drivesCard(current);
      return;
    }
    throw e;
  }
  render(g);
  await drivesCard(g);
  const t = await api('/api/tasks');
  renderTasks((t && t.tasks) || []);
  setButtons();
}

document.title = name + ' - khyve';
$('guest-name').textContent = name;
$('link-log').href = '/log.html?guest=' + encodeURIComponent(name);
for (const a of ACTIONS) $('btn-' + a).addEventListener('click', () => act(a));
setupGraphs();
initPage().then((s) => {
  if (!s) return;
  setButtons();
  poller = poll(() => refresh().catch((e) => e.status !== 401 && notice(e.message, true)), 2000);
});
