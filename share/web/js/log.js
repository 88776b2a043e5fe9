// log.html: the daemon's tasks (/api/tasks) and the guests' vm-bhyve.log
// (/api/log) with a guest and a text filter; live every 2 s.
import { $, api, el, fmtTime, initPage, notice, poll, queryParam } from './api.js';

const open = new Set(); // task ids whose output is shown
let logKey = '';
let guestsLoaded = false;

function renderTasks(tasks) {
  const body = $('task-list').tBodies[0];
  const rows = [];
  for (const t of tasks) {
    const toggle = el('a', { href: '#', text: t.command, class: 'mono' });
    toggle.addEventListener('click', (e) => {
      e.preventDefault();
      if (open.has(t.id)) open.delete(t.id);
      else open.add(t.id);
      renderTasks(tasks);
    });
    const state = t.state + (t.state === 'failed' && t.status !== null ? ` (${t.status})` : '');
    rows.push(el('tr', { dataset: { task: t.id } },
      el('td', { class: 'num', text: t.id }), el('td', { text: fmtTime(t.started) }),
      el('td', { text: t.ended ? fmtTime(t.ended) : '-' }), el('td', { text: t.user }),
      el('td', {}, toggle), el('td', {}, el('span', { class: 'badge badge-' + t.state, text: state }))));
    if (open.has(t.id)) {
      rows.push(el('tr', { class: 'task-detail' }, el('td', { colspan: 6 },
        el('pre', { class: 'log output', text: t.output || '(no output)' }))));
    }
  }
  body.replaceChildren(...rows);
  $('task-empty').hidden = tasks.length > 0;
}

async function loadGuests() {
  const g = await api('/api/guests');
  const sel = $('log-guest');
  const keep = sel.value;
  sel.replaceChildren(el('option', { value: '', text: 'all guests' }),
    ...(g.guests || []).map((x) => el('option', { value: x.name, text: x.name })));
  sel.value = guestsLoaded ? keep : queryParam('guest') || '';
  guestsLoaded = true;
}

async function refreshLog(force) {
  const q = new URLSearchParams();
  if ($('log-guest').value) q.set('guest', $('log-guest').value);
  if ($('log-q').value) q.set('q', $('log-q').value);
  q.set('limit', $('log-limit').value);
  const key = q.toString();
  const r = await api('/api/log?' + key);
  const lines = (r && r.lines) || [];
  const box = $('log-lines');
  const atEnd = box.scrollTop + box.clientHeight >= box.scrollHeight - 4;
  const text = JSON.stringify(lines);
  if (!force && key === logKey && box.dataset.text === text) return;
  logKey = key;
  box.dataset.text = text;
  box.replaceChildren(...(lines.length ? lines.flatMap((l) => [
    el('span', { class: 't', text: l.time + ' ' }), el('span', { class: 'g', text: l.guest + ': ' }),
    l.text + '\n']) : [el('span', { class: 't', text: 'no lines' })]));
  if (atEnd || force) box.scrollTop = box.scrollHeight;
}

async function refresh() {
  const t = await api('/api/tasks');
  renderTasks((t && t.tasks) || []);
  if (!guestsLoaded) await loadGuests();
  await refreshLog(false);
  notice('');
}

let typing = null;
$('log-filters').addEventListener('submit', (e) => e.preventDefault());
for (const id of ['log-guest', 'log-limit']) {
  $(id).addEventListener('change', () => refreshLog(true).catch((e) => notice(e.message, true)));
}
$('log-q').addEventListener('input', () => {
  clearTimeout(typing);
  typing = setTimeout(() => refreshLog(true).catch((e) => notice(e.message, true)), 300);
});

initPage().then((s) => {
  if (s) poll(() => refresh().catch((e) => e.status !== 401 && notice(e.message, true)), 2000);
});
