'use strict';
// §5.1 checks: the rule for one attempt (the table's rows and the statements around it) and whole requests
// under it (attempts, outcome, status, $upstream_status, what the peers keep). From docs/nginx-algorithm.md
// §5 and §5.1 only; these are not nginx recordings. Run: node --test ports/javascript/test/

const test = require('node:test');
const assert = require('node:assert/strict');
const { crc32, Ring, Worker, rulesFor, policyOf, DEFAULT_POLICY, Reply, decide } = require('../nginx_hash');

const RULES = rulesFor('1.30.6');
const NOW = 1_000_000_000;
const ET = policyOf(['error', 'timeout']);
const dec = (state, givenBack, retry, upstreamStatus, clientStatus, tries) => ({
  state,
  givenBack,
  retry,
  upstreamStatus,
  clientStatus,
  tries,
});

test('§5.1 connection refused', () => {
  assert.deepEqual(decide(Reply.REFUSED, ET, 'GET', 3), dec('FAILED', false, true, 502, null, 2));
  assert.deepEqual(decide(Reply.REFUSED, policyOf(['timeout']), 'GET', 3), dec('FAILED', false, false, 502, 502, 2));
  assert.deepEqual(decide(Reply.REFUSED, ET, 'GET', 1), dec('FAILED', false, false, 502, 502, 0));
  assert.equal(decide(Reply.REFUSED, ET, 'POST', 3).retry, true); // not sent
});

test('§5.1 off, the default, unknown words', () => {
  assert.deepEqual([...policyOf(['error', 'OFF', 'http_502']).nextUpstream], ['off']);
  assert.deepEqual(decide(Reply.REFUSED, policyOf(['off']), 'GET', 3), dec('FAILED', false, false, 502, 502, 2));
  assert.deepEqual([...DEFAULT_POLICY.nextUpstream].sort(), ['error', 'timeout']);
  assert.equal(decide(Reply.response(502), DEFAULT_POLICY, 'GET', 3).retry, false);
  assert.throws(() => policyOf(['http_501']));
});

test('§5.1 timeouts, closed connections, invalid headers, non_idempotent', () => {
  assert.deepEqual(decide(Reply.CONNECT_TIMEOUT, ET, 'POST', 3), dec('FAILED', false, true, 504, null, 2));
  assert.deepEqual(decide(Reply.READ_TIMEOUT, policyOf(['error']), 'GET', 3), dec('FAILED', false, false, 504, 504, 2));
  assert.equal(decide(Reply.READ_TIMEOUT, ET, 'POST', 3).retry, false);
  assert.equal(decide(Reply.READ_TIMEOUT, policyOf(['timeout', 'non_idempotent']), 'POST', 3).retry, true);
  assert.equal(decide(Reply.READ_TIMEOUT, ET, 'patch', 3).retry, false);
  assert.equal(decide(Reply.READ_TIMEOUT, ET, 'LOCK', 3).retry, false);
  assert.equal(decide(Reply.READ_TIMEOUT, ET, 'PUT', 3).retry, true);
  assert.deepEqual(decide(Reply.CLOSED, ET, 'GET', 3), dec('FAILED', false, true, 502, null, 2));
  assert.equal(decide(Reply.CLOSED, ET, 'POST', 3).retry, false);
  assert.deepEqual(decide(Reply.INVALID_HEADER, ET, 'GET', 3), dec('FAILED', false, false, 502, 502, 2));
  assert.equal(decide(Reply.INVALID_HEADER, policyOf(['invalid_header']), 'GET', 3).retry, true);
});

test('§5.1 an error on a cached connection is given back', () => {
  assert.deepEqual(decide(Reply.STALE_CACHED, ET, 'GET', 1), dec('FAILED', true, true, 502, null, 1));
  assert.deepEqual(decide(Reply.STALE_CACHED, ET, 'GET', 1, true), dec('FAILED', true, true, 502, null, 1));
  assert.deepEqual(decide(Reply.STALE_CACHED, ET, 'POST', 3), dec('FAILED', true, false, 502, 502, 3));
  const cachedTimeout = { kind: 'timeout', status: 0, sent: true, cached: true };
  assert.deepEqual(decide(cachedTimeout, ET, 'GET', 1), dec('FAILED', false, false, 504, 504, 0));
});

test('§5.1 listed statuses count only when another attempt will happen', () => {
  const all = policyOf(['http_500', 'http_502', 'http_503', 'http_504', 'http_429', 'http_403', 'http_404']);
  for (const s of [500, 502, 503, 504, 429]) {
    assert.deepEqual(decide(Reply.response(s), all, 'GET', 2), dec('FAILED', false, true, s, null, 1), `${s}`);
    assert.deepEqual(decide(Reply.response(s), all, 'GET', 1), dec('OK', false, false, s, s, 0), `last ${s}`);
  }
  for (const s of [403, 404]) {
    assert.deepEqual(decide(Reply.response(s), all, 'GET', 2), dec('NEXT', false, true, s, null, 1), `${s}`);
    assert.deepEqual(decide(Reply.response(s), all, 'GET', 1), dec('OK', false, false, s, s, 0), `last ${s}`);
  }
  for (const s of [200, 301, 400, 501]) {
    assert.deepEqual(decide(Reply.response(s), all, 'GET', 3), dec('OK', false, false, s, s, 2), `${s}`);
  }
  assert.equal(decide(Reply.response(502), policyOf(['http_502']), 'POST', 3).state, 'OK');
  assert.equal(decide(Reply.response(502), policyOf(['http_502', 'non_idempotent']), 'POST', 3).state, 'FAILED');
});

// ---- whole requests ----

const { peer } = require('./peers');
const TWO = [peer('127.0.0.1:9001'), peer('127.0.0.1:9002')];
function ownerOf(peers, key) {
  const ring = new Ring(peers.filter((p) => !p.backup));
  return ring.servers[ring.find(crc32(key)) % ring.length];
}
const a = ownerOf(TWO, 'k0');
const b = a === '127.0.0.1:9001' ? '127.0.0.1:9002' : '127.0.0.1:9001';
const P502 = policyOf(['error', 'timeout', 'http_502']);

function go(w, answers, policy = P502, method = 'GET', now = NOW, key = 'k0') {
  const o = w.run(Buffer.from(key), { policy, method, now, answer: (p) => answers[p.address] ?? null });
  return [o.attempts.join(' '), o.outcome, o.status, o.upstreamStatuses.join(',')];
}
const fresh = (peers = TWO) => new Worker(peers, 'consistent', RULES, { now: NOW });

test('§5.1 a listed 5xx moves on and fails the peer; the last one is passed on as a success', () => {
  let w = fresh();
  assert.deepEqual(go(w, { [a]: 'http_502' }), [`${a} ${b}`, 'answered', 200, '502,200']);
  assert.deepEqual(go(w, {}), [b, 'answered', 200, '200']);
  w = fresh();
  assert.deepEqual(go(w, { [a]: 'http_502' }, policyOf(['error', 'http_502'], 1)), [a, 'answered', 502, '502']);
  assert.deepEqual(go(w, {}), [a, 'answered', 200, '200']);
  assert.deepEqual(go(w, { [a]: 'http_503' }), [a, 'answered', 503, '503']);
  assert.deepEqual(go(w, {}), [a, 'answered', 200, '200']);
  w = fresh();
  const p404 = policyOf(['error', 'http_404']);
  assert.deepEqual(go(w, { [a]: 'http_404' }, p404), [`${a} ${b}`, 'answered', 200, '404,200']);
  assert.deepEqual(go(w, {}), [a, 'answered', 200, '200']); // NEXT: not failed
});

test('§5.1 methods, timeouts, invalid headers, off', () => {
  assert.deepEqual(go(fresh(), { [a]: 'http_502' }, P502, 'POST'), [a, 'answered', 502, '502']);
  const ni = policyOf(['error', 'timeout', 'http_502', 'non_idempotent']);
  assert.deepEqual(go(fresh(), { [a]: 'http_502' }, ni, 'POST'), [`${a} ${b}`, 'answered', 200, '502,200']);
  assert.deepEqual(go(fresh(), { [a]: 'refused' }, P502, 'POST'), [`${a} ${b}`, 'answered', 200, '502,200']);
  assert.deepEqual(go(fresh(), { [a]: 'timeout' }, P502, 'POST'), [a, 'failed', 504, '504']);
  assert.deepEqual(go(fresh(), { [a]: 'timeout' }), [`${a} ${b}`, 'answered', 200, '504,200']);
  assert.deepEqual(go(fresh(), { [a]: 'timeout' }, policyOf(['error'])), [a, 'failed', 504, '504']);
  assert.deepEqual(go(fresh(), { [a]: 'invalid_header' }), [a, 'failed', 502, '502']);
  assert.deepEqual(go(fresh(), { [a]: 'invalid_header', [b]: 'timeout' }, policyOf(['invalid_header'])), [
    `${a} ${b}`,
    'failed',
    504,
    '502,504',
  ]);
  const w = fresh();
  assert.deepEqual(go(w, { [a]: 'refused' }, policyOf(['off'])), [a, 'failed', 502, '502']);
  assert.deepEqual(go(w, {}), [b, 'answered', 200, '200']);
});

test('§5.1 stale keepalive connections', () => {
  let w = fresh();
  const e1 = policyOf(['error'], 1);
  assert.deepEqual(go(w, { [a]: 'stale_keepalive' }, e1), [a, 'answered', 200, '200']);
  assert.deepEqual(go(w, { [a]: 'stale_keepalive' }, e1), [`${a} ${b}`, 'answered', 200, '502,200']);
  assert.deepEqual(go(w, { [a]: 'stale_keepalive' }, e1), [b, 'answered', 200, '200']);
  w = fresh([peer('127.0.0.1:9001', { address: 's' })]);
  const st = { s: 'stale_keepalive' };
  assert.deepEqual(go(w, st, ET), ['s', 'answered', 200, '200']);
  assert.deepEqual(go(w, st, ET), ['s s', 'answered', 200, '502,200']);
  assert.deepEqual(go(w, st, ET, 'POST'), ['s', 'failed', 502, '502']);
  assert.deepEqual(go(w, st, ET, 'POST'), ['s', 'answered', 200, '200']);
});

test('§5 the clock: fail_timeout is inclusive', () => {
  const w = fresh();
  assert.deepEqual(go(w, { [a]: 'timeout' }, ET, 'GET', 100), [`${a} ${b}`, 'answered', 200, '504,200']);
  assert.deepEqual(go(w, {}, ET, 'GET', 110), [b, 'answered', 200, '200']);
  assert.deepEqual(go(w, {}, ET, 'GET', 111), [a, 'answered', 200, '200']);
});

test('§5.1 no live upstreams after discarded 5xx responses', () => {
  const three = [peer('127.0.0.1:9001'), peer('127.0.0.1:9002'), peer('127.0.0.1:9003')];
  let key3 = null;
  for (let i = 0; key3 === null; i++) if (ownerOf(three, `k${i}`) === '127.0.0.1:9003') key3 = `k${i}`;
  const w = fresh(three);
  const first = go(w, { '127.0.0.1:9003': 'refused' }, P502, 'GET', NOW, key3);
  assert.deepEqual([first[0].split(' ')[0], first[1], first[3]], ['127.0.0.1:9003', 'answered', '502,200']);
  const all502 = { '127.0.0.1:9001': 'http_502', '127.0.0.1:9002': 'http_502', '127.0.0.1:9003': 'http_502' };
  const o = go(w, all502);
  assert.deepEqual([o[0].split(' ').length, o[1], o[2], o[3]], [2, 'noLiveUpstreams', 502, '502,502,502']);
});

test('shim.js speaks protocol 1 and 2 (ports/SHIM.md)', () => {
  const { spawnSync } = require('node:child_process');
  const path = require('node:path');
  const up = (protocol, answer, policy) => ({
    op: 'upstream',
    protocol,
    name: 'parity',
    method: 'consistent',
    version: '1.30.6',
    now: NOW,
    peers: TWO.map((p, i) => (i === TWO.findIndex((q) => q.address === a) && answer ? { ...p, answer } : p)),
    ...(policy ? { policy } : {}),
  });
  const pol = { nextUpstream: ['error', 'timeout', 'http_502'], tries: 0 };
  const keyHex = Buffer.from('k0').toString('hex');
  const lines = [
    up(2, 'http_502', pol),
    { op: 'request', keyHex, method: 'GET', now: NOW + 1 },
    { op: 'reset' },
    { op: 'request', keyHex, method: 'POST' },
    up(2, 'http_418', pol),
    up(3, null, pol),
    up(2, null, null),
    up(1, 'http_502', null),
    up(1, null, null),
    { op: 'request', keyHex },
  ];
  const r = spawnSync(process.execPath, [path.join(__dirname, '..', 'shim.js')], {
    input: lines.map((l) => JSON.stringify(l)).join('\n') + '\n',
    encoding: 'utf8',
  });
  assert.equal(r.status, 0);
  const out = r.stdout.trim().split('\n').map((l) => JSON.parse(l));
  assert.deepEqual(out[0], { ok: true });
  assert.deepEqual(out[1], { attempts: [a, b], outcome: 'answered', status: 200, upstreamStatuses: ['502', '200'] });
  assert.deepEqual(out[2], { ok: true });
  assert.deepEqual(out[3], { attempts: [a], outcome: 'answered', status: 502, upstreamStatuses: ['502'] });
  assert.ok(out[4].unsupported, 'unknown answer');
  assert.ok(out[5].unsupported, 'protocol 3');
  assert.ok(out[6].error, 'protocol 2 without policy');
  assert.ok(out[7].unsupported, 'an answer under protocol 1');
  assert.deepEqual(out[8], { ok: true });
  assert.deepEqual(out[9], { attempts: [a], outcome: 'answered' });
});
