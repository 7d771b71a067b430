// vidfeat serve's page: plain JavaScript over the JSON API (docs/serve.md). Every name shown is
// set as text (textContent), never parsed as HTML; the server's Content-Security-Policy allows
// no inline script.
'use strict';

const $ = (id) => document.getElementById(id);

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === 'class') e.className = v;
    else if (k.startsWith('data-')) e.setAttribute(k, v);
    else e[k] = v;
  }
  for (const c of children) e.append(c);
  return e;
}

function say(text) {
  $('message').textContent = text || '';
}

async function api(url, options) {
  const r = await fetch(url, options);
  let body = null;
  try {
    body = await r.json();
  } catch (e) {
    throw new Error(r.status + ' ' + r.statusText);
  }
  if (!r.ok) throw new Error(body && body.error ? body.error : r.status + ' ' + r.statusText);
  return body;
}

// A value as the bytes the server knows it by: UTF-8, except that a byte of a file name that is
// not UTF-8 comes in the JSON as a lone surrogate, U+DC80 + the byte (as Python's
// surrogateescape), and goes back as that byte (URLSearchParams would send U+FFFD: a 404).
function arg(value) {
  let out = '';
  for (const ch of String(value)) { // by code point: a lone surrogate comes alone
    const c = ch.charCodeAt(0);
    if (ch.length === 1 && c >= 0xdc80 && c <= 0xdcff)
      out += '%' + (c - 0xdc00).toString(16).toUpperCase();
    else
      out += encodeURIComponent(ch);
  }
  return out;
}
const q = (params) =>
  Object.entries(params).map(([k, v]) => encodeURIComponent(k) + '=' + arg(v)).join('&');
const thumbUrl = (path, t) => '/api/thumb?' + q({path: path, t: t.toFixed(3)});
const baseName = (path) => path.split('/').pop();
const seconds = (t) => {
  const m = Math.floor(t / 60);
  const s = (t - 60 * m).toFixed(2).padStart(5, '0');
  return m + ':' + s;
};

// ---- views ----

function show(view) {
  for (const b of document.querySelectorAll('.tab'))
    b.classList.toggle('active', b.dataset.view === view);
  for (const s of document.querySelectorAll('.view')) s.hidden = s.id !== 'view-' + view;
  say('');
  if (view === 'status') refreshStatus();
}

// ---- search ----

// The hits as cards, in the API's order; a stored query frame ("more like this") first.
function showHits(doc, what) {
  const grid = $('results');
  grid.replaceChildren();
  const hits = (doc.neighbours || []).slice();
  const query = doc.query;
  if (query && query.stored)
    hits.unshift({path: query.path, t: query.t, frame_index: query.frame_index, similarity: 1,
                  query: true});
  $('search-info').textContent = doc.neighbours.length + ' frames like ' + what + ' (' + doc.search +
    ', ' + doc.search_ms.toFixed(1) + ' ms)' +
    (doc.weights === 'random weights' ? ': random weights, these mean nothing' : '');
  for (const h of hits) {
    const img = el('img', {alt: baseName(h.path) + ' at ' + seconds(h.t), loading: 'lazy',
                           src: thumbUrl(h.path, h.t)});
    img.addEventListener('click', () => play(h.path, h.t));
    // the asked frame itself says so, with no score (it is not a match) and no "more like this"
    // (it is what this is)
    const label = h.query ? el('div', {class: 'asked', textContent: 'the frame asked'}) : null;
    const what = seconds(h.t) + ' · frame ' + h.frame_index +
      (h.query ? '' : ' · ' + h.similarity.toFixed(3));
    const card = el('div', {'class': h.query ? 'card query' : 'card', 'data-path': h.path,
                            'data-t': String(h.t)}, img,
                    el('div', {class: 'meta'}, ...(label ? [label] : []),
                       el('div', {class: 'name', textContent: h.path}),
                       el('div', {textContent: what})));
    if (!h.query) {
      const more = el('button', {type: 'button', class: 'more', textContent: 'More like this'});
      more.addEventListener('click', () => moreLike(h.path, h.t));
      card.append(more);
    }
    grid.append(card);
  }
}

async function searchWords(text) {
  say('');
  try {
    showHits(await api('/api/search?' + q({text: text, k: 24})), '"' + text + '"');
  } catch (e) {
    say(e.message);
  }
}

async function moreLike(path, t) {
  show('search');
  try {
    showHits(await api('/api/similar?' + q({path: path, t: t, k: 24})),
             baseName(path) + ' at ' + seconds(t));
  } catch (e) {
    say(e.message);
  }
}

async function searchImage(file) {
  say('');
  try {
    showHits(await api('/api/similar?k=24', {method: 'POST', body: file}), file.name);
  } catch (e) {
    say(e.message);
  }
}

// ---- the player: the video from t, or a strip of frames where the browser cannot play it ----

function closePlayer() {
  const v = $('video');
  v.pause();
  v.removeAttribute('src');
  v.load();
  $('player').hidden = true;
}

function strip(path, t) {
  const s = $('strip');
  s.replaceChildren();
  for (let dt = -4; dt <= 4; dt += 1) {
    const at = t + dt;
    if (at < 0) continue;
    const img = el('img', {src: thumbUrl(path, at), alt: seconds(at)});
    const fig = el('figure', {class: dt === 0 ? 'at' : ''}, img,
                   el('figcaption', {textContent: seconds(at)}));
    img.addEventListener('error', () => fig.remove()); // past the end of the file
    s.append(fig);
  }
  $('video').hidden = true;
  s.hidden = false;
}

function play(path, t) {
  $('player-title').textContent = path + ' at ' + seconds(t);
  $('player').hidden = false;
  const v = $('video');
  v.hidden = false;
  $('strip').hidden = true;
  let fellBack = false;
  const fallBack = () => {
    if (!fellBack) {
      fellBack = true;
      strip(path, t);
    }
  };
  v.onerror = fallBack;
  v.onloadedmetadata = () => {
    if (!v.videoWidth) return fallBack(); // sound only, or pictures it cannot show
    v.currentTime = t;
    v.play().catch(() => {});
  };
  v.src = '/api/video?' + q({path: path});
}

// ---- reused footage ----

// One side of a reused piece: its thumbnails, and the segment on a timeline of the whole file
// (its extent as extracted), so that both sides' bars are to their files' scales.
function side(path, start, end, length) {
  const line = el('div', {class: 'timeline'});
  const span = el('span');
  const whole = Math.max(length || 0, end, 1e-3);
  span.style.left = (100 * start / whole) + '%';
  span.style.width = Math.max(1, 100 * (end - start) / whole) + '%';
  line.append(span);
  const row = el('div', {class: 'side'},
                 el('div', {class: 'label', textContent: path + ' ' + seconds(start) + '–' +
                                                         seconds(end)}));
  for (const at of [start, (start + end) / 2, end]) {
    const img = el('img', {src: thumbUrl(path, at), alt: seconds(at), loading: 'lazy'});
    img.addEventListener('click', () => play(path, at));
    row.append(img);
  }
  row.append(line);
  return row;
}

async function findMatches() {
  say('');
  $('matches-info').textContent = 'aligning…';
  try {
    const doc = await api('/api/matches');
    const list = $('matches');
    list.replaceChildren();
    $('matches-info').textContent = doc.matches.length + ' reused pieces of footage (' +
      doc.frames + ' frames searched, ' + doc.search + ')';
    for (const m of doc.matches)
      list.append(el('div', {class: 'match'}, side(m.a, m.a_start, m.a_end, m.a_length),
                     side(m.b, m.b_start, m.b_end, m.b_length),
                     el('div', {textContent: 'score ' + m.score.toFixed(3) + ', ' + m.frames +
                                             ' frames, speed ' + m.speed.toFixed(2)})));
  } catch (e) {
    $('matches-info').textContent = '';
    say(e.message);
  }
}

// ---- the archive's progress ----

let last = null;
let timer = null;

function number(label, value, id) {
  return el('div', {id: id}, el('b', {textContent: String(value)}), label);
}

function table(title, rows, cols) {
  if (!rows.length) return el('p', {textContent: 'no ' + title});
  const head = el('tr', {}, ...cols.map((c) => el('th', {textContent: c[0]})));
  const body = rows.map((r) => el('tr', {}, ...cols.map((c) =>
    el('td', {textContent: r[c[1]] === null ? '' : String(r[c[1]])}))));
  return el('div', {}, el('h3', {textContent: title}), el('table', {}, head, ...body));
}

async function refreshStatus() {
  clearTimeout(timer);
  if ($('view-status').hidden) return;
  try {
    const doc = await api('/api/status');
    const s = doc.summary;
    const now = performance.now() / 1000;
    let rate = '–';
    let files = '–';
    if (last && now > last.at) {
      rate = ((s.vectors - last.vectors) / (now - last.at)).toFixed(1);
      files = (60 * (s.done - last.done) / (now - last.at)).toFixed(1);
    }
    last = {at: now, vectors: s.vectors, done: s.done};
    $('status').replaceChildren(
      el('p', {textContent: s.database + ' (' + s.engine + ', schema ' + s.schema + '): ' +
                            doc.model + ' ' + doc.layer}),
      el('div', {class: 'numbers'}, number('files done', s.done, 'st-done'),
         number('failed', s.failed, 'st-failed'), number('unfinished', s.running, 'st-running'),
         number('queued, not started', s.pending, 'st-pending'),
         number('vectors', s.vectors, 'st-vectors'), number('vectors/s', rate, 'st-rate'),
         number('files/min', files, 'st-files-rate')),
      table('failed files', doc.failed, [['file', 'path'], ['why', 'error']]),
      table('unfinished files', doc.running, [['file', 'path'], ['frames', 'frames']]),
      table('search indexes', doc.indexes,
            [['file', 'path'], ['kind', 'kind'], ['vectors', 'vectors'], ['lacks', 'lacks_vectors'],
             ['problem', 'problem']]));
  } catch (e) {
    say(e.message);
  }
  timer = setTimeout(refreshStatus, 2000);
}

// ---- wiring ----

document.addEventListener('DOMContentLoaded', () => {
  for (const b of document.querySelectorAll('.tab'))
    b.addEventListener('click', () => show(b.dataset.view));
  $('search-form').addEventListener('submit', (e) => {
    e.preventDefault();
    const text = $('q').value.trim();
    if (text) searchWords(text);
  });
  $('upload').addEventListener('change', () => {
    const f = $('upload').files[0];
    if (f) searchImage(f);
  });
  $('find-matches').addEventListener('click', findMatches);
  $('player-close').addEventListener('click', closePlayer);
  $('player').addEventListener('click', (e) => {
    if (e.target === $('player')) closePlayer();
  });
  document.addEventListener('keydown', (e) => {
    if (e.key === 'Escape' && !$('player').hidden) closePlayer();
  });
});
