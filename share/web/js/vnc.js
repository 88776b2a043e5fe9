// vnc.html?name=NAME: the guest's graphical console through noVNC (Debian's
// novnc, served by the daemon at /novnc/) over wss://HOST/ws/vnc/NAME, which the
// daemon relays to khyve's VNC server for a logged-in admin only.
import RFB from '/novnc/core/rfb.js';
import { $, consoleRefusal, initPage, isAdmin, queryParam } from './api.js';

const name = queryParam('name') || '';
let rfb = null;
let opened = false; // the current connection got as far as the VNC handshake

function status(text, cls) {
  const s = $('vnc-status');
  s.textContent = text;
  s.className = 'status' + (cls ? ' ' + cls : '');
}

function connect() {
  if (rfb) {
    rfb.disconnect();
    rfb = null;
  }
  $('vnc-screen').replaceChildren();
  opened = false;
  status('connecting');
  const url = `wss://${location.host}/ws/vnc/${encodeURIComponent(name)}`;
  try {
    rfb = new RFB($('vnc-screen'), url, { wsProtocols: ['khyve-vnc'], shared: true });
  } catch (e) {
    status('disconnected', 'err');
    console.error(e);
    return;
  }
  rfb.scaleViewport = true;
  rfb.resizeSession = false;
  rfb.focusOnClick = true;
  rfb.addEventListener('connect', () => {
    opened = true;
    status('connected', 'on');
    $('btn-ctrlaltdel').disabled = false;
    rfb.focus();
  });
  rfb.addEventListener('disconnect', (e) => {
    status('disconnected', e.detail && e.detail.clean ? '' : 'err');
    $('btn-ctrlaltdel').disabled = true;
    if (!opened) explain();
  });
  rfb.addEventListener('securityfailure', (e) => {
    console.warn('VNC security failure: ' + ((e.detail && e.detail.reason) || ''));
  });
  rfb.addEventListener('desktopname', (e) => {
    if (e.detail && e.detail.name) document.title = `${name}: ${e.detail.name} - khyve`;
  });
}

async function explain() {
  const why = await consoleRefusal(name, 'vnc');
  if (why) $('vnc-screen').replaceChildren(Object.assign(document.createElement('p'),
    { className: 'console-msg', textContent: why }));
}

document.title = name + ' console - khyve';
$('console-name').textContent = name;
$('link-guest').href = '/guest.html?name=' + encodeURIComponent(name);
$('btn-ctrlaltdel').addEventListener('click', () => {
  if (!rfb) return;
  rfb.sendCtrlAltDel();
  const s = $('vnc-status');
  s.textContent = 'sent Ctrl-Alt-Del';
  setTimeout(() => { if (opened && s.textContent === 'sent Ctrl-Alt-Del') status('connected', 'on'); }, 1500);
});
$('btn-reconnect').addEventListener('click', connect);
initPage().then((s) => {
  if (!s) return;
  if (!isAdmin()) {
    status('disconnected', 'err');
    $('vnc-screen').replaceChildren(Object.assign(document.createElement('p'),
      { className: 'console-msg', textContent: 'The consoles are for administrators only.' }));
    return;
  }
  connect();
});
