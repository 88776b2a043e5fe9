// serial.html?name=NAME[&port=comN]: the guest's serial console in xterm.js
// (window.Terminal from /vendor/xterm/xterm.js, pinned by share/web's
// package-lock.json) over wss://HOST/ws/serial/NAME?port=comN.
import { $, api, consoleRefusal, initPage, isAdmin, queryParam } from './api.js';

const name = queryParam('name') || '';
const port = /^com[1-4]$/.test(queryParam('port') || '') ? queryParam('port') : 'com1';
let term = null;
let ws = null;
let fit = null;

function status(text, cls) {
  const s = $('serial-status');
  s.textContent = text;
  s.className = 'status' + (cls ? ' ' + cls : '');
}

function message(text) {
  $('terminal').replaceChildren(Object.assign(document.createElement('p'),
    { className: 'console-msg', textContent: text }));
}

// xterm.js's own fit addon is a separate package: the size from the cell size here.
function fitTerminal() {
  const box = $('terminal');
  const core = term && term._core;
  const dims = core && core._renderService && core._renderService.dimensions;
  const cw = dims && dims.css && dims.css.cell ? dims.css.cell.width : 9;
  const ch = dims && dims.css && dims.css.cell ? dims.css.cell.height : 17;
  if (!cw || !ch) return;
  const cols = Math.max(20, Math.floor((box.clientWidth - 20) / cw));
  const rows = Math.max(5, Math.floor((box.clientHeight - 12) / ch));
  if (cols !== term.cols || rows !== term.rows) term.resize(cols, rows);
}

function connect() {
  if (ws) {
    ws.onclose = null;
    ws.close();
  }
  status('connecting');
  const url = `wss://${location.host}/ws/serial/${encodeURIComponent(name)}?port=${port}`;
  ws = new WebSocket(url, ['khyve-serial']);
  ws.binaryType = 'arraybuffer';
  let opened = false;
  ws.onopen = () => {
    opened = true;
    status('connected', 'on');
    term.focus();
  };
  ws.onmessage = (ev) => {
    if (typeof ev.data === 'string') term.write(ev.data);
    else term.write(new Uint8Array(ev.data));
  };
  ws.onclose = async () => {
    status('disconnected', 'err');
    const why = opened ? '' : await consoleRefusal(name, port);
    term.write(`\r\n\x1b[2m[disconnected${why ? ': ' + why : ''}]\x1b[0m\r\n`);
  };
  ws.onerror = () => status('disconnected', 'err');
}

function start() {
  term = new window.Terminal({
    cursorBlink: true,
    convertEol: false,
    scrollback: 5000,
    fontFamily: 'ui-monospace, "DejaVu Sans Mono", Menlo, Consolas, monospace',
    fontSize: 14,
    theme: { background: '#000000' },
  });
  term.open($('terminal'));
  window.term = term; // for tests and the browser's console
  term.onData((d) => {
    if (ws && ws.readyState === WebSocket.OPEN) ws.send(d);
  });
  fitTerminal();
  fit = new ResizeObserver(() => fitTerminal());
  fit.observe($('terminal'));
  connect();
}

document.title = name + ' serial - khyve';
$('console-name').textContent = name;
$('link-guest').href = '/guest.html?name=' + encodeURIComponent(name);
$('serial-port').value = port;
$('serial-port').addEventListener('change', (e) => {
  const q = new URLSearchParams({ name, port: e.target.value });
  location.search = q.toString();
});
$('btn-reconnect').addEventListener('click', () => term && connect());

// Offer only the ports the guest has (all four until its page data says).
async function listPorts() {
  try {
    const g = await api('/api/guests/' + encodeURIComponent(name));
    const ports = (g && g.console_ports) || [];
    if (!ports.length) return;
    for (const o of [...$('serial-port').options])
      if (!ports.includes(o.value) && o.value !== port) o.remove();
  } catch (e) {
    /* the console itself says what is wrong */
  }
}
initPage().then((s) => {
  if (!s) return;
  if (typeof window.Terminal !== 'function') {
    status('unavailable', 'err');
    message('xterm.js is not installed: run make with npm');
    return;
  }
  if (!isAdmin()) {
    status('disconnected', 'err');
    message('The consoles are for administrators only.');
    return;
  }
  listPorts();
  start();
});
