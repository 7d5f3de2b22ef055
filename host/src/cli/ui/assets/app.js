'use strict';
// Read-only view of workflow groups, fed by server-sent events.
// Every string from the API is untrusted: the DOM is built with
// createElement, textContent and setAttribute only, never parsed as HTML.

const $ = (id) => document.getElementById(id);
const enc = encodeURIComponent;

const state = {
  route: { page: 'list' },
  es: null,            // the open EventSource
  retry: null,         // timer for a reconnect after the browser gave up
  list: null,          // last list data
  group: null,         // last group detail data
  gone: null,          // message when the group was deleted
  cell: null,          // selected grid cell {wave, target, type}
  details: new Map(),  // <details> the user opened or closed, by data-key
  log: null,           // open log {workflow, step}
  logSeq: 0,           // guards against late log responses
  renders: 0,
};

// Grid cell states: symbol and word, so a cell reads without colour.
const CELL = Object.assign(Object.create(null), {
  ok: ['✓', 'ok'],
  failed: ['✗', 'failed'],
  unreachable: ['⚠', 'unreachable'],
  running: ['▶', 'running'],
  waiting: ['‖', 'waiting'],
  notStarted: ['·', 'not started'],
});

// X-Log-Source header of a step log, in words.
const LOG_SOURCE = Object.assign(Object.create(null),
  { pod: 'from the pod', status: "from the step's status (the pod is gone)", none: 'no output kept' });

// ---------- small DOM helpers ----------

// h('tag', {class, text, data: {...}, other attributes}, ...children)
function h(tag, props, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(props || {})) {
    if (v == null || v === false) continue;
    if (k === 'class') el.className = v;
    else if (k === 'text') el.textContent = String(v);
    else if (k === 'data') {
      for (const [dk, dv] of Object.entries(v)) if (dv != null) el.dataset[dk] = String(dv);
    } else el.setAttribute(k, v === true ? '' : String(v));
  }
  add(el, children);
  return el;
}

// Appends nodes and strings (as text) and skips null/false.
function add(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c == null || c === false) continue;
    el.append(c instanceof Node ? c : String(c));
  }
  return el;
}

const table = (headers, rows, cls) =>
  h('div', { class: 'table-wrap' },
    h('table', { class: cls || null },
      h('thead', null, h('tr', null, headers.map((t) => h('th', { scope: 'col', text: t })))),
      h('tbody', null, rows)));

const td = (...children) => h('td', null, children);
const muted = (text) => h('span', { class: 'muted', text });
const join = (items, sep) => items.filter((x) => x != null && x !== '').flatMap((x, i) => (i ? [sep, x] : [x]));

const badge = (phase) => h('span',
  { class: 'badge phase-' + String(phase || 'unknown').toLowerCase().replace(/[^a-z]/g, ''), text: phase || 'unknown' });

// "reason: message", either part optional.
const reasonMessage = (reason, message) => join([reason ? h('strong', { text: reason }) : null, message], ': ');

// <details> whose open state survives re-renders once the user toggled it.
function details(key, openByDefault, summary, ...body) {
  const open = state.details.has(key) ? state.details.get(key) : openByDefault;
  return h('details', { data: { key }, open }, h('summary', null, summary), body);
}

// ---------- time ----------

const pad = (n) => String(n).padStart(2, '0');

// Local time: "HH:MM:SS" today, else "YYYY-MM-DD HH:MM". Tooltip: the UTC value.
function time(t) {
  if (!t) return muted('—');
  const d = new Date(t);
  if (isNaN(d)) return String(t);
  const now = new Date();
  const text = d.toDateString() === now.toDateString()
    ? `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`
    : `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}`;
  return h('time', { datetime: t, title: t, text });
}

function span(ms) {
  const s = Math.max(0, Math.floor(ms / 1000));
  if (s < 60) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m ${pad(s % 60)}s`;
  const hr = Math.floor(m / 60);
  if (hr < 24) return `${hr}h ${pad(m % 60)}m`;
  return `${Math.floor(hr / 24)}d ${hr % 24}h`;
}

// From start to end, or to now while it runs.
function duration(start, end) {
  const a = Date.parse(start);
  const b = end ? Date.parse(end) : Date.now();
  return !start || isNaN(a) || isNaN(b) ? '—' : span(b - a);
}

// "took 3m 05s" / "running for 3m 05s", or null before the start.
const ran = (start, end) => (start ? `${end ? 'took' : 'running for'} ${duration(start, end)}` : null);

function age(t) {
  const a = Date.parse(t);
  if (!t || isNaN(a)) return muted('—');
  return h('time', { datetime: t, title: t, text: span(Date.now() - a) + ' ago' });
}

// ---------- routing and live connection ----------

const groupHash = (ns, name) => `#/g/${enc(ns)}/${enc(name)}`;

function parseRoute() {
  const parts = location.hash.replace(/^#\/?/, '').split('/');
  if (parts[0] === 'g' && parts.length === 3 && parts[1] && parts[2]) {
    try {
      return { page: 'group', ns: decodeURIComponent(parts[1]), name: decodeURIComponent(parts[2]) };
    } catch (e) { /* malformed escape: fall back to the list */ }
  }
  return { page: 'list' };
}

function onRoute() {
  if (state.es) state.es.close();
  clearTimeout(state.retry);
  closeLog();
  Object.assign(state, { es: null, list: null, group: null, gone: null, cell: null });
  state.details.clear();
  state.route = parseRoute();
  showNotice(null);
  const r = state.route;
  $('list-controls').hidden = r.page !== 'list';
  $('content').replaceChildren(h('p', { class: 'muted', text: 'Loading…' }));
  if (r.page === 'list') {
    document.title = 'Workflow groups';
    connect('api/watch/groups', { groups: onGroups });
  } else {
    document.title = `${r.ns}/${r.name} — workflow group`;
    connect(`api/watch/groups/${enc(r.ns)}/${enc(r.name)}`, { group: onGroup, gone: onGone });
  }
  window.scrollTo(0, 0);
}

function connect(url, handlers) {
  const es = new EventSource(url);
  state.es = es;
  setLive('connecting', 'connecting…');
  es.onopen = () => { if (state.es === es) { setLive('on', 'live'); showNotice(null); } };
  es.onerror = () => {
    if (state.es !== es) return;
    setLive('off', 'reconnecting…');
    // After an HTTP error the browser stops retrying; try again ourselves.
    if (es.readyState === EventSource.CLOSED) {
      clearTimeout(state.retry);
      state.retry = setTimeout(() => { if (state.es === es) connect(url, handlers); }, 5000);
    }
  };
  for (const [name, fn] of Object.entries(handlers)) {
    es.addEventListener(name, (e) => { if (state.es === es) fn(e.data); });
  }
}

function setLive(cls, text) {
  const el = $('live');
  el.className = 'live ' + cls;
  el.textContent = text;
}

function showNotice(text) {
  const el = $('notice');
  el.hidden = !text;
  el.textContent = text || '';
}

function parse(raw) {
  try {
    return JSON.parse(raw);
  } catch (e) {
    showNotice('The server sent data this page cannot read: ' + e.message);
    return undefined;
  }
}

// Record of renders for measurements: window.__wfuiRenders and body[data-renders].
function recordRender(message) {
  if (!Array.isArray(window.__wfuiRenders)) window.__wfuiRenders = [];
  const list = window.__wfuiRenders;
  list.push({ at: Date.now(), message: message == null ? '' : String(message) });
  if (list.length > 2000) list.splice(0, list.length - 2000);
  state.renders += 1;
  document.body.dataset.renders = String(state.renders);
}

// Replaces the page content, keeping the scroll of the grids and of the window.
function replaceContent(nodes) {
  const content = $('content');
  const scrolls = new Map();
  for (const el of content.querySelectorAll('[data-scroll-key]')) scrolls.set(el.dataset.scrollKey, [el.scrollLeft, el.scrollTop]);
  const y = window.scrollY;
  content.replaceChildren(...nodes.filter(Boolean));
  for (const el of content.querySelectorAll('[data-scroll-key]')) {
    const xy = scrolls.get(el.dataset.scrollKey);
    if (xy) [el.scrollLeft, el.scrollTop] = xy;
  }
  if (window.scrollY !== y) window.scrollTo(window.scrollX, y);
}

// ---------- list page ----------

function onGroups(raw) {
  const data = parse(raw);
  if (!data || typeof data !== 'object') return;
  state.list = data;
  renderList();
  recordRender((data.groups || []).map((g) => g.message).filter(Boolean).join('\n'));
}

function matches(g, text, phase) {
  if (phase && g.phase !== phase) return false;
  if (!text) return true;
  return [g.namespace, g.name, g.type, g.phase, g.reason]
    .some((v) => v != null && String(v).toLowerCase().includes(text));
}

function renderList() {
  const data = state.list;
  const all = Array.isArray(data.groups) ? data.groups : [];
  const text = $('filter').value.trim().toLowerCase();
  const phase = $('phase-filter').value;
  const shown = all.filter((g) => matches(g, text, phase));
  const scope = data.namespace ? `in namespace ${data.namespace}` : 'in all namespaces you may list';
  $('count').textContent = `${shown.length} of ${all.length} groups ${scope}`;

  const rows = shown.map((g) => {
    const key = `${g.namespace}/${g.name}`;
    const progress = g.progress != null ? `${g.progress} waves` : g.workflows != null ? `${g.workflows} workflows` : '—';
    const full = join([g.reason, g.message], ': ').join('');
    return h('tr', { class: 'group-row', data: { group: key, phase: g.phase } },
      td(g.namespace),
      td(h('a', { href: groupHash(g.namespace, g.name), text: g.name })),
      td(g.type),
      td(badge(g.phase), g.paused ? h('span', { class: 'flag', text: 'paused' }) : null),
      h('td', { title: g.progress != null && g.workflows != null ? `workflows ${g.workflows}` : null, text: progress }),
      h('td', { class: g.failedTargets ? 'num bad' : 'num', text: g.failedTargets == null ? '—' : g.failedTargets }),
      td(age(g.started)),
      td(duration(g.started, g.finished)),
      h('td', { class: 'msg' }, h('div', { class: 'trunc', title: full || null }, reasonMessage(g.reason, g.message))));
  });

  replaceContent([
    data.error ? h('div', { class: 'notice error', role: 'alert', text: data.error }) : null,
    shown.length
      ? table(['Namespace', 'Name', 'Type', 'Phase', 'Progress', 'Failed targets', 'Started', 'Duration', 'Reason: message'], rows, 'groups')
      : h('p', { class: 'muted', text: all.length ? 'No groups match the filter.' : 'No groups.' }),
  ]);
}

// ---------- group page ----------

function onGroup(raw) {
  const data = parse(raw);
  if (!data || typeof data !== 'object' || !data.group) return;
  state.group = data;
  state.gone = null;
  renderGroup();
  recordRender(data.group.message);
}

function onGone(raw) {
  let msg = raw;
  try { msg = JSON.parse(raw); } catch (e) { /* plain text */ }
  state.gone = typeof msg === 'string' ? msg : 'This group was deleted.';
  state.group = null;
  const r = state.route;
  replaceContent([backLink(), h('h1', { text: `${r.ns}/${r.name}` }), h('div', { class: 'notice gone', role: 'alert', text: state.gone })]);
  recordRender(state.gone);
}

const backLink = () => h('p', { class: 'back' }, h('a', { href: '#/', text: '← all groups' }));

function renderGroup() {
  const d = state.group;
  const g = d.group;
  document.title = `${g.namespace}/${g.name} — ${g.phase || ''}`;
  replaceContent([backLink(), header(g), rollout(g), runs(g), locks(d.locks), grid(g), workflows(g), events(d.events)]);
  markLogRow();
}

function header(g) {
  return h('section', { class: 'head' },
    h('h1', { text: `${g.namespace}/${g.name}` }),
    h('p', { class: 'meta' },
      h('span', { class: 'type', text: g.type }),
      badge(g.phase),
      g.paused ? h('span', { class: 'flag', text: 'paused' }) : null,
      h('span', null, 'started ', time(g.started)),
      g.started ? h('span', { text: ran(g.started, g.finished) }) : null),
    g.reason || g.message ? h('p', { class: 'reason' }, reasonMessage(g.reason, g.message)) : null);
}

function rollout(g) {
  const r = g.rollout;
  if (!r) return null;
  return h('p', { class: 'rollout' },
    h('strong', { text: 'Rollout: ' }),
    join([
      `waves done ${r.progress ?? '—'}`,
      r.failedTargets ? h('span', { class: 'bad', text: `${r.failedTargets} failed target${r.failedTargets === 1 ? '' : 's'}` }) : 'no failed targets',
      r.nextWindow ? h('span', null, 'next window ', time(r.nextWindow)) : null,
      r.nextWaveAt ? h('span', null, 'next wave at ', time(r.nextWaveAt)) : null,
      r.pausedAfterWave != null ? h('span', { class: 'flag', text: `paused after wave ${r.pausedAfterWave}` }) : null,
    ], ' · '));
}

function runs(g) {
  if (!Array.isArray(g.runs) || !g.runs.length) return null;
  const rows = g.runs.map((r) => h('tr', { data: { run: r.run } },
    td(r.run), td(r.id ?? muted('—')), td(h('code', { text: r.runId ?? '' })), td(badge(r.phase)),
    td(r.requestedBy ?? muted('—')), td(time(r.startTime)), td(time(r.completionTime))));
  return h('section', null, h('h2', { text: 'Runs' }),
    table(['Run', 'Id', 'Run id', 'Phase', 'Requested by', 'Start', 'End'], rows, 'runs'));
}

function locks(l) {
  const body = [];
  if (!l) body.push(muted('No lock information.'));
  else {
    const held = Array.isArray(l.held) ? l.held : [];
    const waiting = Array.isArray(l.waitingFor) ? l.waitingFor : [];
    if (held.length) {
      body.push(details('locks-held', false, `Holds ${held.length} lock${held.length === 1 ? '' : 's'}`,
        h('ul', { class: 'locks' }, held.map((x) => h('li', null, h('code', { text: x }))))));
    } else body.push(h('p', { text: 'Holds no locks.' }));
    if (waiting.length) {
      body.push(h('ul', { class: 'waiting' }, waiting.map((w) => h('li', null,
        'waits for ', h('code', { text: w.lock }), ' held by ', h('strong', { text: w.holder || 'unknown' })))));
    }
    if (l.error) body.push(h('p', { class: 'notice error', text: l.error }));
  }
  return h('section', { class: 'locks-section' }, h('h2', { text: 'Locks' }), body);
}

// ---------- grid ----------

// Columns: the group's types in order, then any type only found in cells.
function gridTypes(g) {
  const types = Array.isArray(g.types) ? [...g.types] : [];
  for (const w of g.waves || []) for (const t of w.targets || []) for (const c of t.cells || []) {
    if (!types.includes(c.type)) types.push(c.type);
  }
  return types;
}

function findCell(g, wave, target, type) {
  const w = (g.waves || []).find((x) => String(x.wave) === String(wave));
  const t = w && (w.targets || []).find((x) => x.name === target);
  return (t && (t.cells || []).find((c) => c.type === type)) || null;
}

function cellTd(wave, target, type, cell) {
  const st = cell ? cell.state : 'notStarted';
  const [sym, word] = CELL[st] || ['?', String(st)];
  const sel = state.cell && state.cell.wave === String(wave) && state.cell.target === target && state.cell.type === type;
  return h('td', {
    class: `cell state-${CELL[st] ? st : 'unknown'}${sel ? ' selected' : ''}`,
    data: { wave, target, type, state: st },
    title: cell && cell.reason ? cell.reason : null,
    tabindex: 0,
  }, h('span', { class: 'sym', 'aria-hidden': 'true', text: sym }), ' ' + word);
}

function waveSummary(targets, types) {
  const counts = Object.create(null);
  for (const t of targets) for (const type of types) {
    const c = (t.cells || []).find((x) => x.type === type);
    const st = c ? c.state : 'notStarted';
    counts[st] = (counts[st] || 0) + 1;
  }
  const parts = Object.keys(CELL).filter((k) => counts[k]).map((k) => `${counts[k]} ${CELL[k][1]}`);
  return `${targets.length} target${targets.length === 1 ? '' : 's'}` + (parts.length ? `; cells: ${parts.join(', ')}` : '');
}

function grid(g) {
  const waves = Array.isArray(g.waves) ? g.waves : [];
  const types = gridTypes(g);
  const plain = waves.length === 1 && !g.rollout;
  const sections = waves.map((w) => {
    const targets = Array.isArray(w.targets) ? w.targets : [];
    // One wave without a rollout: the section heading "Targets" is the title.
    const title = plain ? null : h('h3', null, `Wave ${w.wave} — `, w.phase ? badge(w.phase) : muted('not started'));
    if (!targets.length) return h('div', { class: 'wave' }, title, muted('No targets.'));
    const rows = targets.map((t) => {
      const byType = new Map((t.cells || []).map((c) => [c.type, c]));
      return h('tr', null, h('th', { scope: 'row', class: 'target', title: t.name, text: t.name }),
        types.map((type) => cellTd(w.wave, t.name, type, byType.get(type))));
    });
    return h('div', { class: 'wave', data: { wave: w.wave } }, title,
      h('p', { class: 'muted small', text: waveSummary(targets, types) }),
      h('div', { class: 'grid-wrap', data: { scrollKey: 'wave-' + w.wave } },
        h('table', { class: 'grid' },
          h('thead', null, h('tr', null, h('th', { scope: 'col', class: 'target', text: 'target' }),
            types.map((t) => h('th', { scope: 'col', text: t })))),
          h('tbody', null, rows))));
  });
  return h('section', { class: 'grid-section' }, h('h2', { text: 'Targets' }),
    sections.length ? sections : muted('No targets yet.'),
    cellDetail());
}

function cellDetail() {
  const box = h('div', { id: 'cell-detail', class: 'cell-detail', 'aria-live': 'polite' });
  const s = state.cell;
  if (!s) return add(box, [muted('Select a cell to see its reason.')]);
  const cell = state.group && findCell(state.group.group, s.wave, s.target, s.type);
  const st = cell ? cell.state : 'notStarted';
  const [sym, word] = CELL[st] || ['?', String(st)];
  return add(box, [
    h('p', null, `Wave ${s.wave} · target `, h('strong', { text: s.target }), ' · type ', h('strong', { text: s.type }), ' · ',
      h('span', { class: `state-${CELL[st] ? st : 'unknown'} chip`, text: `${sym} ${word}` })),
    h('p', { class: 'pre' }, cell && cell.reason ? cell.reason : muted('No reason given.')),
  ]);
}

function selectCell(el) {
  state.cell = { wave: el.dataset.wave, target: el.dataset.target, type: el.dataset.type };
  for (const c of $('content').querySelectorAll('td.cell.selected')) c.classList.remove('selected');
  el.classList.add('selected');
  const old = $('cell-detail');
  if (old) old.replaceWith(cellDetail());
}

// ---------- workflows and steps ----------

function workflows(g) {
  const wfs = Array.isArray(g.workflows) ? g.workflows : [];
  const notStarted = Array.isArray(g.notStarted) && g.notStarted.length
    ? h('p', { class: 'muted', text: `Not started yet: ${g.notStarted.join(', ')}` }) : null;
  return h('section', { class: 'workflows' }, h('h2', { text: 'Workflows' }),
    wfs.length ? wfs.map((w) => workflow(g, w)) : muted('No workflows yet.'), notStarted);
}

function workflow(g, w) {
  const summary = [h('strong', { class: 'wf-name', text: w.name }), ' ', badge(w.phase)];
  const meta = h('p', { class: 'muted' },
    join([
      `type ${w.type}`,
      w.wave != null ? `wave ${w.wave}` : null,
      w.run != null ? `run ${w.run}` : null,
      h('span', null, 'started ', time(w.started)),
      ran(w.started, w.finished),
    ], ' · '));
  const steps = Array.isArray(w.steps) ? w.steps : [];
  return h('div', { class: 'workflow', data: { workflow: w.name } },
    details('wf:' + w.name, true, summary,
      meta,
      w.reason || w.message ? h('p', { class: 'reason' }, reasonMessage(w.reason, w.message)) : null,
      steps.length
        ? table(['Step', 'Phase', 'Started', 'Duration', 'Attempts', 'Exit', 'Approval', 'Targets', 'Message', ''],
          steps.map((s) => stepRow(w, s)), 'steps')
        : muted('No steps yet.')));
}

function approval(a) {
  if (!a) return h('td', { class: 'approval' }, muted('—'));
  const cell = h('td', { class: 'approval', data: { approval: a.state } });
  const approvers = Array.isArray(a.approvers) ? a.approvers : [];
  const by = Array.isArray(a.approvedBy) ? a.approvedBy : [];
  if (a.state === 'waiting') {
    add(cell, [h('span', { class: 'waiting-text', text:
      `waits for approval (${by.length} of ${a.required ?? 1}${approvers.length ? ', by ' + approvers.join(', ') : ''})` })]);
    if (a.content) add(cell, [h('pre', { class: 'approve-content', title: a.digest || null, text: a.content })]);
  } else if (a.state === 'approved') {
    add(cell, [`approved by ${by.join(', ') || 'someone'}`]);
  } else if (a.state === 'timedOut') {
    add(cell, ['started without approval (its timeout)']);
  } else add(cell, [String(a.state)]);
  return cell;
}

function stepTargets(w, s) {
  const t = s.targets;
  if (!t) return td(muted('—'));
  const cell = td(`${t.total}: ${t.ok} ok, ${t.failed} failed, ${t.unreachable} unreachable`);
  const problems = Array.isArray(t.problems) ? t.problems : [];
  if (!problems.length) return cell;
  const list = h('ul', { class: 'problems' }, problems.map((p) =>
    h('li', null, h('strong', { text: p.name }), ` ${p.outcome}`, p.reason ? `: ${p.reason}` : '')));
  return add(cell, [problems.length > 5
    ? details(`problems:${w.name}/${s.name}`, false, `${problems.length} problems`, list) : list]);
}

function stepRow(w, s) {
  return h('tr', { class: 'step-row', data: { step: `${w.name}/${s.name}`, phase: s.phase } },
    td(h('code', { text: s.name })), td(badge(s.phase)), td(time(s.started)), td(duration(s.started, s.finished)),
    h('td', { class: 'num', text: s.attempts ?? '—' }),
    h('td', { class: s.exitCode ? 'num bad' : 'num', text: s.exitCode ?? '—' }),
    approval(s.approval),
    stepTargets(w, s),
    h('td', { class: 'step-msg', text: s.message || '' }),
    td(h('button', { type: 'button', class: 'log-btn', data: { workflow: w.name, stepName: s.name }, text: 'log' })));
}

// ---------- events ----------

function events(list) {
  const evs = (Array.isArray(list) ? list : []).map((e, i) => [e, i]);
  // Newest first; events without a time last; keep server order otherwise.
  evs.sort(([a, i], [b, j]) => (Date.parse(b.last) || 0) - (Date.parse(a.last) || 0) || i - j);
  const rows = evs.map(([e]) => {
    const warn = e.type === 'Warning';
    return h('tr', { class: warn ? 'event warning' : 'event', data: { type: e.type } },
      td(warn ? h('strong', { text: '⚠ Warning' }) : e.type), td(e.reason), td(h('code', { text: e.object || '' })),
      h('td', { class: 'pre', text: e.message || '' }), h('td', { class: 'num', text: e.count ?? '' }), td(age(e.last)));
  });
  return h('section', { class: 'events' }, h('h2', { text: 'Events' }),
    rows.length ? table(['Type', 'Reason', 'Object', 'Message', 'Count', 'Last seen'], rows, 'events') : muted('No events.'));
}

// ---------- step logs ----------

function markLogRow() {
  const key = state.log ? `${state.log.workflow}/${state.log.step}` : null;
  for (const tr of $('content').querySelectorAll('tr.step-row')) tr.classList.toggle('log-open', tr.dataset.step === key);
}

async function loadLog() {
  const r = state.route;
  const l = state.log;
  if (!l || r.page !== 'group') return;
  const seq = ++state.logSeq;
  const pre = $('log');
  const atEnd = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
  $('log-source').textContent = 'loading…';
  let text, source, failed;
  try {
    const res = await fetch(`api/logs/${enc(r.ns)}/${enc(r.name)}/${enc(l.workflow)}/${enc(l.step)}`,
      { cache: 'no-store', headers: { Accept: 'text/plain' } });
    text = await res.text();
    failed = !res.ok;
    source = failed ? `error ${res.status}` : LOG_SOURCE[res.headers.get('X-Log-Source')] || '';
    if (failed) text = text || res.statusText;
  } catch (e) {
    [failed, source, text] = [true, 'could not load', String(e.message || e)];
  }
  if (seq !== state.logSeq) return; // closed, or a newer request
  pre.classList.toggle('error', failed);
  pre.textContent = text || '(empty)';
  $('log-source').textContent = source;
  if (atEnd || pre.dataset.fresh) pre.scrollTop = pre.scrollHeight;
  delete pre.dataset.fresh;
}

function openLog(workflow, step) {
  state.log = { workflow, step };
  const pre = $('log');
  pre.textContent = '';
  pre.classList.remove('error');
  pre.dataset.fresh = '1'; // scroll to the end once loaded
  $('log-title').textContent = `Log of ${workflow} / ${step}`;
  $('log-panel').hidden = false;
  document.body.classList.add('log-shown');
  markLogRow();
  loadLog();
}

function closeLog() {
  state.log = null;
  state.logSeq += 1;
  $('log-panel').hidden = true;
  document.body.classList.remove('log-shown');
  markLogRow();
}

// ---------- wiring ----------

function onContentClick(e) {
  const t = e.target;
  const summary = t.closest('summary');
  if (summary) {
    const d = summary.parentElement;
    if (d.dataset.key) state.details.set(d.dataset.key, !d.open); // the state after this click
    return;
  }
  const btn = t.closest('button.log-btn');
  if (btn) return openLog(btn.dataset.workflow, btn.dataset.stepName);
  const cell = t.closest('td.cell');
  if (cell) return selectCell(cell);
  const row = t.closest('tr.group-row');
  if (row && !t.closest('a')) {
    const key = row.dataset.group;
    const i = key.indexOf('/');
    location.hash = groupHash(key.slice(0, i), key.slice(i + 1));
  }
}

function start() {
  if (!Array.isArray(window.__wfuiRenders)) window.__wfuiRenders = [];
  document.body.dataset.renders = '0';
  const content = $('content');
  content.addEventListener('click', onContentClick);
  content.addEventListener('keydown', (e) => {
    const cell = e.target.closest && e.target.closest('td.cell');
    if (cell && (e.key === 'Enter' || e.key === ' ')) { e.preventDefault(); selectCell(cell); }
  });
  for (const [id, ev] of [['filter', 'input'], ['phase-filter', 'change']]) {
    $(id).addEventListener(ev, () => { if (state.list && state.route.page === 'list') renderList(); });
  }
  $('log-refresh').addEventListener('click', loadLog);
  $('log-close').addEventListener('click', closeLog);
  window.addEventListener('hashchange', onRoute);
  onRoute();
}

start();
