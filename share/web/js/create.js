// create.html: create a guest from a template (and install it from an ISO of
// the datastore), and upload an ISO with a progress bar.
import { $, api, currentSession, el, fmtBytes, initPage, isAdmin, notice } from './api.js';

let upload = null; // the XMLHttpRequest of an upload in progress

function option(value, text) {
  return el('option', { value, text: text || value });
}

async function loadTemplates() {
  const t = await api('/api/templates');
  const sel = $('create-template');
  const names = (t && t.templates) || [];
  sel.replaceChildren(...names.map((n) => option(n)));
  if (names.includes('default')) sel.value = 'default';
}

async function loadDatastores() {
  const h = await api('/api/host');
  const sel = $('create-datastore');
  const ds = (h && h.datastores) || [];
  sel.replaceChildren(...ds.map((d) => option(d.name, `${d.name} (${fmtBytes(d.free_bytes)} free)`)));
  if (ds.some((d) => d.name === 'default')) sel.value = 'default';
}

async function loadIsos(select) {
  const r = await api('/api/isos');
  const isos = (r && r.isos) || [];
  const sel = $('create-iso');
  const keep = select || sel.value;
  sel.replaceChildren(option('', 'none (create only)'), ...isos.map((i) => option(i.name)));
  if (isos.some((i) => i.name === keep)) sel.value = keep;
  $('iso-list').tBodies[0].replaceChildren(...(isos.length
    ? isos.map((i) => el('tr', {}, el('td', { class: 'mono', text: i.name }),
      el('td', { class: 'num', text: fmtBytes(i.size_bytes) })))
    : [el('tr', {}, el('td', { colspan: 2, class: 'muted', text: 'No ISO images in the datastore yet.' }))]));
  $('iso-free').textContent = r && r.free_bytes !== undefined ? `${fmtBytes(r.free_bytes)} free for ISO images` : '';
}

async function watchTask(id, what) {
  for (;;) {
    await new Promise((ok) => setTimeout(ok, 1000));
    const t = await api('/api/tasks').catch(() => null);
    const task = t && (t.tasks || []).find((x) => x.id === id);
    if (!task) continue;
    if (task.state === 'running') {
      $('create-status').textContent = `${what}: running (task ${id})`;
      continue;
    }
    if (task.state === 'ok') {
      $('create-status').replaceChildren(`${what}: done. `,
        el('a', { href: '/guest.html?name=' + encodeURIComponent($('create-name').value), text: 'Open the guest' }));
    } else {
      const last = (task.output || '').trim().split('\n').pop();
      $('create-status').textContent = '';
      notice(`${what} failed: ${last || 'status ' + task.status}`, true);
    }
    return;
  }
}

async function onCreate(ev) {
  ev.preventDefault();
  notice('');
  const body = { name: $('create-name').value.trim(), template: $('create-template').value };
  for (const k of ['datastore', 'size', 'memory', 'cpus', 'iso']) {
    const v = $('create-' + k).value.trim();
    if (v) body[k] = v;
  }
  if (body.datastore === 'default') delete body.datastore;
  $('create-submit').disabled = true;
  try {
    const r = await api('/api/guests', { method: 'POST', body });
    const what = body.iso ? `create ${body.name} and install ${body.iso}` : `create ${body.name}`;
    $('create-status').textContent = `${what}: task ${r.task} started`;
    await watchTask(r.task, what);
  } catch (e) {
    notice(e.message, true);
  } finally {
    $('create-submit').disabled = !isAdmin();
  }
}

function uploadStatus(text, isError) {
  const s = $('upload-status');
  s.textContent = text;
  s.className = 'hint' + (isError ? ' error' : '');
}

// fetch() cannot report an upload's progress; XMLHttpRequest's upload.onprogress can.
function onUpload() {
  const f = $('upload-file').files[0];
  if (!f) return;
  if (!/^[A-Za-z0-9][A-Za-z0-9._+-]*\.iso$/.test(f.name) || f.name.length > 128) {
    uploadStatus('The file name must be a plain name ending in .iso (letters, digits, . _ + -).', true);
    return;
  }
  const xhr = new XMLHttpRequest();
  upload = xhr;
  const bar = $('upload-progress');
  bar.hidden = false;
  bar.value = 0;
  bar.max = 100;
  $('upload-submit').disabled = true;
  $('upload-cancel').hidden = false;
  const started = Date.now();
  xhr.open('POST', '/api/isos?name=' + encodeURIComponent(f.name));
  xhr.withCredentials = true;
  xhr.setRequestHeader('X-CSRF-Token', (currentSession() || {}).csrf || '');
  xhr.setRequestHeader('Content-Type', 'application/octet-stream');
  xhr.upload.onprogress = (e) => {
    if (!e.lengthComputable) return;
    bar.value = (100 * e.loaded) / e.total;
    const secs = (Date.now() - started) / 1000;
    const rate = secs > 0 ? e.loaded / secs : 0;
    uploadStatus(`${fmtBytes(e.loaded)} of ${fmtBytes(e.total)} (${Math.floor(bar.value)} %, ${fmtBytes(rate)}/s)`);
  };
  const done = () => {
    upload = null;
    $('upload-cancel').hidden = true;
    $('upload-submit').disabled = !isAdmin() || !$('upload-file').files.length;
  };
  xhr.onload = () => {
    done();
    let reply = null;
    try {
      reply = JSON.parse(xhr.responseText);
    } catch {
      reply = null;
    }
    if (xhr.status === 201) {
      bar.value = 100;
      uploadStatus(`${reply ? reply.name : f.name} uploaded (${fmtBytes(reply ? reply.size_bytes : f.size)}).`);
      loadIsos(f.name).catch(() => {});
    } else {
      bar.hidden = true;
      uploadStatus(`Upload refused (${xhr.status}): ${(reply && reply.error) || xhr.statusText}`, true);
    }
  };
  xhr.onerror = () => {
    done();
    bar.hidden = true;
    uploadStatus('The upload was cut off; nothing was kept.', true);
  };
  xhr.onabort = () => {
    done();
    bar.hidden = true;
    uploadStatus('Upload cancelled; nothing was kept.');
  };
  uploadStatus(`Uploading ${f.name}...`);
  xhr.send(f);
}

$('create-form').addEventListener('submit', onCreate);
$('upload-file').addEventListener('change', () => {
  $('upload-submit').disabled = !isAdmin() || !$('upload-file').files.length;
  uploadStatus('');
});
$('upload-submit').addEventListener('click', onUpload);
$('upload-cancel').addEventListener('click', () => upload && upload.abort());
window.addEventListener('beforeunload', (e) => {
  if (upload) e.preventDefault();
});

initPage().then(async (s) => {
  if (!s) return;
  if (!isAdmin()) {
    notice('You may look but not change: creating guests and uploading ISO images needs an administrator.', 'info');
    for (const e of $('create-form').elements) e.disabled = true;
    $('upload-file').disabled = true;
  }
  try {
    await Promise.all([loadTemplates(), loadDatastores(), loadIsos()]);
  } catch (e) {
    notice(e.message, true);
  }
});
