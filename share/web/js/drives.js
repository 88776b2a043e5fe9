// The "CD/DVD drives" card of guest.html: each drive of a running guest
// (the "drives" of GET /api/guests/NAME) with its medium, a select of the
// datastore's ISOs (GET /api/isos) with Insert, and Eject; both are POST
// /api/guests/NAME/media.  khyve is handed an open file, never a name, so
// the name of the ISO in a drive is not known: the card shows its size.
// Rows are kept across refreshes, so that a choice in a select survives
// the page's 2 s poll.
import { $, api, el, isAdmin, notice } from './api.js';

const MiB = 1048576;
const ISO_REFRESH_MS = 10000; // the ISO list changes only by an upload
let isos = null; // names in $vm_dir/.iso, null before the first answer
let isosAt = 0;
let busy = false; // a change is on its way

function mib(bytes) {
  const v = (bytes || 0) / MiB;
  return v.toFixed(v < 1 ? 2 : v < 10 ? 1 : 0);
}

// What is in drive `d`: "medium (N MiB)", "empty", and whether the guest locked it.
export function mediumText(d) {
  const what = d.medium ? `medium (${mib(d.bytes)} MiB)` : 'empty';
  return d.locked ? `${what}, locked by the guest` : what;
}

async function loadIsos() {
  if (isos && Date.now() - isosAt < ISO_REFRESH_MS) return;
  isosAt = Date.now();
  try {
    const r = await api('/api/isos');
    isos = ((r && r.isos) || []).map((i) => i.name);
  } catch (e) {
    if (!isos) isos = [];
  }
}

function newRow(d, change) {
  const sel = el('select', { id: `drive-iso-${d.name}`, 'aria-label': `ISO for ${d.name}` });
  const insert = el('button', { type: 'button', class: 'btn', id: `btn-insert-${d.name}`, text: 'Insert' });
  const eject = el('button', { type: 'button', class: 'btn', id: `btn-eject-${d.name}`, text: 'Eject' });
  insert.addEventListener('click', () => change(d.name, sel.value));
  eject.addEventListener('click', () => change(d.name, null));
  return el('tr', { dataset: { drive: d.name } },
    el('td', { class: 'mono', text: d.name }), el('td', { class: 'device', text: d.device }),
    el('td', { class: 'medium' }), el('td', {}, el('div', { class: 'toolbar' }, sel, insert, eject)));
}

function fillSelect(sel) {
  const names = isos || [];
  const text = JSON.stringify(names);
  if (sel.dataset.isos === text) return;
  const keep = sel.value;
  sel.dataset.isos = text;
  sel.replaceChildren(...(names.length
    ? names.map((n) => el('option', { value: n, text: n }))
    : [el('option', { value: '', text: isos ? 'no ISOs in the datastore' : 'loading...' })]));
  if (names.includes(keep)) sel.value = keep;
}

function updateRow(tr, d) {
  const sel = tr.querySelector('select');
  const admin = isAdmin();
  tr.querySelector('td.medium').textContent = mediumText(d);
  tr.dataset.medium = d.medium ? 'yes' : 'no';
  tr.dataset.locked = d.locked ? 'yes' : 'no';
  fillSelect(sel);
  sel.disabled = !admin || busy;
  tr.querySelector(`#btn-insert-${d.name}`).disabled = !admin || busy || !sel.value;
  tr.querySelector(`#btn-eject-${d.name}`).disabled = !admin || busy || !d.medium;
  for (const b of tr.querySelectorAll('button, select')) b.title = admin ? '' : 'viewers may not change guests';
}

// The card for guest `name` as last seen (`g`); `refresh()` asks again
// after a change.  drives[] of a guest that does not run is empty.
export function createDrivesCard(name, refresh) {
  let last = [];

  async function change(drive, iso) {
    const d = last.find((x) => x.name === drive) || {};
    const what = iso ? `insert ${iso} into ${drive}` : `eject ${drive}`;
    let force = false;
    if (d.locked) {
      if (!window.confirm(`The guest locked ${drive}'s tray. ${iso ? 'Insert' : 'Eject'} anyway (force)?`)) return;
      force = true;
    }
    busy = true;
    render({ drives: last, running: true });
    notice(`${what}: sending...`);
    try {
      await api(`/api/guests/${encodeURIComponent(name)}/media`, { method: 'POST', body: { drive, iso, force } });
      notice(`${what}: done`);
    } catch (e) {
      notice(`${what}: ${e.message}`, true);
    } finally {
      busy = false;
      refresh();
    }
  }

  function render({ drives, running }) {
    const body = $('drives').tBodies[0];
    last = running ? drives || [] : [];
    if (!last.length) {
      body.replaceChildren(el('tr', {}, el('td', {
        colspan: 4, class: 'muted', text: running ? 'none' : 'the guest is not running',
      })));
      return;
    }
    const rows = new Map([...body.querySelectorAll('tr[data-drive]')].map((tr) => [tr.dataset.drive, tr]));
    body.replaceChildren(...last.map((d) => {
      const tr = rows.get(d.name) || newRow(d, change);
      updateRow(tr, d);
      return tr;
    }));
  }

  return async function update(g) {
    const running = g.state === 'Running' || g.state === 'Paused';
    if (running && (g.drives || []).length) await loadIsos();
    render({ drives: g.drives, running });
  };
}
