/**
 * GET /docs: the OpenAPI document rendered as one self-contained HTML page. No CDN, no fetch:
 * warmpool runs in closed networks, so the document is embedded in the page and a small
 * vanilla-JS renderer draws it (tags → operations → parameters, bodies, responses, schemas).
 * The Content-Security-Policy allows exactly the page's own inline script and style (by hash)
 * and nothing from anywhere else.
 */
import { createHash } from 'node:crypto';

export interface DocsPage {
  html: string;
  contentSecurityPolicy: string;
}

export function renderDocsPage(document: object): DocsPage {
  // `<` escaped so no string inside the document can close the script element.
  const data = JSON.stringify(document).replace(/</g, '\\u003c');
  const html = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>warmpool API reference</title>
<style>${STYLE}</style>
</head>
<body>
<header><h1>warmpool API</h1><p id="intro"></p><nav id="toc"></nav></header>
<main id="ops"><noscript>This page renders /openapi.json with JavaScript; the raw document is at <a href="openapi.json">openapi.json</a>.</noscript></main>
<script type="application/json" id="openapi">${data}</script>
<script>${SCRIPT}</script>
</body>
</html>`;
  const csp = [
    "default-src 'none'",
    `script-src '${sha256(SCRIPT)}'`,
    `style-src '${sha256(STYLE)}'`,
    "img-src 'none'",
    "base-uri 'none'",
    "form-action 'none'",
    "frame-ancestors 'none'",
  ].join('; ');
  return { html, contentSecurityPolicy: csp };
}

function sha256(text: string): string {
  return `sha256-${createHash('sha256').update(text).digest('base64')}`;
}

const STYLE = `
:root { --fg:#1d2330; --muted:#5b6475; --line:#dfe3ea; --bg:#f7f8fa; --card:#fff; --code:#f1f3f6;
  --get:#1f6feb; --post:#1a7f37; --put:#9a6700; --delete:#cf222e; }
* { box-sizing: border-box; }
body { margin:0; font:15px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif; color:var(--fg); background:var(--bg); }
header { padding:24px 32px 8px; background:var(--card); border-bottom:1px solid var(--line); }
h1 { margin:0 0 4px; font-size:24px; }
#intro { color:var(--muted); max-width:900px; margin:4px 0 12px; }
nav a { display:inline-block; margin:0 14px 8px 0; color:var(--get); text-decoration:none; font-weight:600; }
main { padding:8px 32px 48px; max-width:1100px; }
h2 { margin:28px 0 4px; font-size:20px; }
.tagdesc { color:var(--muted); margin:0 0 12px; }
details.op { background:var(--card); border:1px solid var(--line); border-radius:8px; margin:8px 0; }
details.op > summary { list-style:none; cursor:pointer; padding:10px 14px; display:flex; gap:12px; align-items:center; }
details.op > summary::-webkit-details-marker { display:none; }
.method { font:700 12px/1 ui-monospace,monospace; color:#fff; padding:5px 8px; border-radius:4px; min-width:60px; text-align:center; text-transform:uppercase; }
.get { background:var(--get); } .post { background:var(--post); } .put { background:var(--put); } .delete { background:var(--delete); }
.path { font:600 14px ui-monospace,SFMono-Regular,Menlo,monospace; }
.summary { color:var(--muted); flex:1; }
.lock { font-size:12px; color:var(--muted); border:1px solid var(--line); border-radius:10px; padding:1px 8px; }
.body { padding:4px 16px 14px; border-top:1px solid var(--line); }
h4 { margin:14px 0 6px; font-size:13px; text-transform:uppercase; letter-spacing:.04em; color:var(--muted); }
table { border-collapse:collapse; width:100%; font-size:14px; }
td, th { text-align:left; vertical-align:top; padding:5px 8px; border-bottom:1px solid var(--line); }
th { font-weight:600; color:var(--muted); font-size:12px; }
code, .mono { font-family:ui-monospace,SFMono-Regular,Menlo,monospace; font-size:13px; }
code { background:var(--code); padding:1px 4px; border-radius:3px; }
pre { background:var(--code); padding:10px 12px; border-radius:6px; overflow:auto; max-height:320px; font-size:12.5px; }
.status { font:700 13px ui-monospace,monospace; }
.s2 { color:var(--post); } .s4 { color:var(--put); } .s5 { color:var(--delete); }
.schema { margin:4px 0 4px 0; }
.schema ul { list-style:none; margin:0; padding-left:18px; border-left:1px dashed var(--line); }
.schema li { margin:2px 0; }
.prop { font-family:ui-monospace,monospace; font-weight:600; }
.type { color:#8250df; font-family:ui-monospace,monospace; font-size:13px; }
.req { color:var(--delete); font-size:12px; margin-left:4px; }
.desc { color:var(--muted); margin-left:6px; }
a.ref { color:var(--get); }
#schemas details { background:var(--card); border:1px solid var(--line); border-radius:8px; margin:6px 0; padding:6px 12px; }
#schemas summary { cursor:pointer; font-family:ui-monospace,monospace; font-weight:600; }
`;

// The renderer: plain DOM, no dependencies. Schemas are drawn as nested lists; a $ref shows its
// component's name (linked to its entry under "Schemas") and is expanded once per branch.
const SCRIPT = `
(function () {
  var doc = JSON.parse(document.getElementById('openapi').textContent);
  var comps = (doc.components && doc.components.schemas) || {};
  function el(tag, attrs, kids) {
    var e = document.createElement(tag);
    for (var k in attrs || {}) { if (k === 'text') e.textContent = attrs[k]; else e.setAttribute(k, attrs[k]); }
    (kids || []).forEach(function (c) { if (c) e.appendChild(typeof c === 'string' ? document.createTextNode(c) : c); });
    return e;
  }
  function md(text) {
    var span = el('span', { class: 'desc' });
    String(text || '').split('\`').forEach(function (part, i) { span.appendChild(i % 2 ? el('code', { text: part }) : document.createTextNode(part)); });
    return span;
  }
  // Pretty JSON, but an array of plain values stays on one line (a tensor's data is long).
  function compactJson(value) {
    var flat = [];
    var text = JSON.stringify(value, function (k, v) {
      if (Array.isArray(v) && v.every(function (x) { return x === null || typeof x !== 'object'; })) { flat.push(JSON.stringify(v)); return '@@' + (flat.length - 1); }
      return v;
    }, 2);
    return text.replace(/"@@(\\d+)"/g, function (_, i) { return flat[Number(i)].replace(/,/g, ', '); });
  }
  function refName(ref) { return ref.split('/').pop(); }
  function typeLabel(s) {
    if (!s) return 'any';
    if (s.$ref) return refName(s.$ref);
    if (s.const !== undefined) return JSON.stringify(s.const);
    if (s.enum) return s.enum.map(function (v) { return JSON.stringify(v); }).join(' | ');
    if (s.anyOf || s.oneOf) return (s.anyOf || s.oneOf).map(typeLabel).join(' | ');
    var t = Array.isArray(s.type) ? s.type.join(' | ') : s.type;
    if (t === 'array') return 'array of ' + (s.prefixItems ? '[' + s.prefixItems.map(typeLabel).join(', ') + ', …' + typeLabel(s.items) + ']' : typeLabel(s.items));
    return t || (s.properties ? 'object' : 'any');
  }
  function constraints(s) {
    var out = [];
    if (s.pattern) out.push('pattern ' + s.pattern);
    if (s.minimum !== undefined) out.push('≥ ' + s.minimum);
    if (s.maximum !== undefined) out.push('≤ ' + s.maximum);
    if (s.minLength !== undefined) out.push('length ≥ ' + s.minLength);
    if (s.maxLength !== undefined) out.push('length ≤ ' + s.maxLength);
    if (s.minItems !== undefined) out.push('≥ ' + s.minItems + ' items');
    if (s.default !== undefined) out.push('default ' + JSON.stringify(s.default));
    if (s.additionalProperties === false) out.push('no other fields');
    return out.length ? ' (' + out.join(', ') + ')' : '';
  }
  function resolve(s) { return s && s.$ref ? comps[refName(s.$ref)] || {} : s || {}; }
  function objectOf(s) {
    s = resolve(s);
    if (s.properties) return s;
    if (s.type === 'array' && s.items) { var it = resolve(s.items); if (it.properties) return it; }
    return null;
  }
  function schemaTree(s, seen) {
    var obj = objectOf(s);
    if (!obj) return null;
    var ul = el('ul');
    var required = obj.required || [];
    Object.keys(obj.properties).forEach(function (name) {
      var p = obj.properties[name];
      var li = el('li', {}, [el('span', { class: 'prop', text: name }), ' ', typeLink(p),
        required.indexOf(name) >= 0 ? el('span', { class: 'req', text: 'required' }) : null,
        el('span', { class: 'desc', text: constraints(resolve(p)) }), p.description || resolve(p).description ? md(p.description || resolve(p).description) : null]);
      var key = p.$ref || (p.items && p.items.$ref);
      if (!key || seen.indexOf(key) < 0) { var sub = schemaTree(p, key ? seen.concat([key]) : seen); if (sub) li.appendChild(sub); }
      ul.appendChild(li);
    });
    return ul;
  }
  function typeLink(s) {
    var ref = s.$ref || (s.items && s.items.$ref);
    if (!ref) return el('span', { class: 'type', text: typeLabel(s) });
    return el('a', { class: 'type ref', href: '#schema-' + refName(ref), text: typeLabel(s) });
  }
  function schemaBlock(s) {
    var box = el('div', { class: 'schema' }, [typeLink(s), resolve(s).description ? md(resolve(s).description) : null]);
    var tree = schemaTree(s, s.$ref ? [s.$ref] : []);
    if (tree) box.appendChild(tree);
    return box;
  }
  function paramsTable(params) {
    var rows = params.map(function (p) {
      return el('tr', {}, [el('td', {}, [el('span', { class: 'prop', text: p.name }), p.required ? el('span', { class: 'req', text: 'required' }) : null]),
        el('td', { class: 'mono', text: p.in }), el('td', {}, [el('span', { class: 'type', text: typeLabel(p.schema) }), el('span', { class: 'desc', text: constraints(p.schema) })]),
        el('td', {}, [p.description ? md(p.description) : null, p.example !== undefined ? el('div', {}, ['e.g. ', el('code', { text: String(p.example) })]) : null])]);
    });
    return el('table', {}, [el('tr', {}, ['name', 'in', 'type', ''].map(function (h) { return el('th', { text: h }); }))].concat(rows));
  }
  // A media type: its schema and example; binary tensor data also shows its JSON header's schema.
  function mediaBlock(parent, media) {
    parent.appendChild(schemaBlock(media.schema));
    if (media.example !== undefined) parent.appendChild(el('pre', { text: compactJson(media.example) }));
    var header = media['x-inference-header'];
    if (!header) return;
    parent.appendChild(el('div', { text: 'JSON header:' }));
    parent.appendChild(schemaBlock(header));
    (header.examples || []).forEach(function (x) { parent.appendChild(el('pre', { text: compactJson(x) })); });
  }
  function operation(path, method, op) {
    var body = el('div', { class: 'body' });
    if (op.description) body.appendChild(el('p', {}, [md(op.description)]));
    if (op.parameters) { body.appendChild(el('h4', { text: 'Parameters' })); body.appendChild(paramsTable(op.parameters)); }
    if (op.requestBody) {
      body.appendChild(el('h4', { text: 'Request body' + (op.requestBody.required ? '' : ' (optional)') }));
      Object.keys(op.requestBody.content).forEach(function (type, i) {
        var media = op.requestBody.content[type];
        if (i > 0) body.appendChild(el('div', {}, ['or ', el('span', { class: 'mono desc', text: type })]));
        mediaBlock(body, media);
      });
    }
    body.appendChild(el('h4', { text: 'Responses' }));
    var rows = Object.keys(op.responses).map(function (status) {
      var r = op.responses[status];
      var cell = el('td', {}, [md(r.description)]);
      var content = r.content || {};
      Object.keys(content).forEach(function (type) {
        cell.appendChild(el('div', {}, [el('span', { class: 'mono desc', text: type }), ' ']));
        if (status[0] === '2') mediaBlock(cell, content[type]);
      });
      if (r.headers) cell.appendChild(el('div', {}, ['Headers: '].concat(Object.keys(r.headers).map(function (h) { return el('code', { text: h + ' ' }); }))));
      return el('tr', {}, [el('td', { class: 'status s' + status[0], text: status }), cell]);
    });
    body.appendChild(el('table', {}, rows));
    var lock = op.security && op.security.length ? el('span', { class: 'lock', text: 'bearer key' }) : el('span', { class: 'lock', text: 'no auth' });
    return el('details', { class: 'op', id: op.operationId }, [
      el('summary', {}, [el('span', { class: 'method ' + method, text: method }), el('span', { class: 'path', text: path }), el('span', { class: 'summary', text: op.summary || '' }), lock]),
      body]);
  }
  var intro = document.getElementById('intro');
  intro.appendChild(md(doc.info.description || ''));
  intro.appendChild(el('span', {}, [' · OpenAPI ' + doc.openapi + ' · ', el('a', { href: 'openapi.json', text: 'openapi.json' })]));
  var main = document.getElementById('ops');
  var toc = document.getElementById('toc');
  (doc.tags || []).forEach(function (tag, i) {
    var anchor = 'tag-' + i;
    toc.appendChild(el('a', { href: '#' + anchor, text: tag.name }));
    main.appendChild(el('h2', { id: anchor, text: tag.name }));
    if (tag.description) main.appendChild(el('p', { class: 'tagdesc' }, [md(tag.description)]));
    Object.keys(doc.paths).forEach(function (path) {
      Object.keys(doc.paths[path]).forEach(function (method) {
        var op = doc.paths[path][method];
        if ((op.tags || [])[0] === tag.name) main.appendChild(operation(path, method, op));
      });
    });
  });
  toc.appendChild(el('a', { href: '#schemas', text: 'Schemas' }));
  var schemas = el('section', { id: 'schemas' }, [el('h2', { text: 'Schemas' })]);
  Object.keys(comps).forEach(function (name) {
    schemas.appendChild(el('details', { id: 'schema-' + name }, [el('summary', { text: name }), schemaBlock({ $ref: '#/components/schemas/' + name })]));
  });
  main.appendChild(schemas);
  if (location.hash) { var target = document.getElementById(location.hash.slice(1)); if (target) { if (target.tagName === 'DETAILS') target.open = true; target.scrollIntoView(); } }
})();
`;
