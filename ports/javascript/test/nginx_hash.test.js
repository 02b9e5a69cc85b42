'use strict';
// Checks of intermediate values from docs/nginx-algorithm.md §1, §3, §4 and §11 (vectors A–F, worked
// examples 1, 2, 3 and 5). Needs no vector files. Run: node --test ports/javascript/test/

const test = require('node:test');
const assert = require('node:assert/strict');
const {
  crc32,
  splitServer,
  baseString,
  pointChain,
  Ring,
  plainStep,
  slotOwner,
  rulesFor,
  Worker,
} = require('../nginx_hash');

const hex = (n) => n.toString(16).padStart(8, '0');
const RULES = rulesFor('1.30.6');
const five = [9001, 9002, 9003, 9004, 9005].map((p) => ({ server: `127.0.0.1:${p}`, weight: 1 }));
const { peer } = require('./peers');

test('§1 CRC32 check values', () => {
  assert.equal(crc32('123456789'), 0xcbf43926);
  assert.equal(crc32(''), 0);
  assert.equal(crc32('k0'), 0xe109903f);
  assert.equal(crc32('k1'), 0x960ea0a9);
  assert.equal(crc32('1k0'), 0x7a38d475);
  assert.equal(crc32('k261'), 0x324e0faf);
  assert.equal(crc32('+yU'), 0x2ea517d7);
});

test('§3.1 step 1 split of the server string', () => {
  const s = (x) => {
    const { host, port } = splitServer(x);
    return [host.toString('latin1'), port.toString('latin1')];
  };
  assert.deepEqual(s('127.0.0.1:9001'), ['127.0.0.1', '9001']);
  assert.deepEqual(s('127.0.0.1'), ['127.0.0.1', '']);
  assert.deepEqual(s('[::1]:9101'), ['[::1]', '9101']);
  assert.deepEqual(s('[::1]'), ['[::1]', '']);
  assert.deepEqual(s('UNIX:/tmp/b.sock'), ['/tmp/b.sock', '']);
  assert.deepEqual(s('unix:/tmp/s'), ['/tmp/s', '']);
  assert.deepEqual(s('host123'), ['host123', '']);
  assert.deepEqual(s('backend'), ['backend', '']);
  assert.deepEqual(s('127.0.5.4:0080'), ['127.0.5.4', '0080']);
  assert.equal(baseString('127.0.0.1:9001').length, 14);
});

test('worked example 1: point chains', () => {
  const first3 = (s) => pointChain(s, 3).map(hex);
  assert.deepEqual(first3('127.0.0.1:9001'), ['70533e04', '10571e62', '1f895401']);
  assert.deepEqual(first3('127.0.0.1'), ['c3b5e186', '38787b01', 'ec494a32']);
  assert.deepEqual(first3('127.0.0.1:80'), ['b205012f', '138ef295', 'af65431c']);
  assert.deepEqual(first3('[::1]:9101'), ['d31335d4', '26b0fe9d', '15ab7932']);
  assert.deepEqual(first3('[::1]'), ['b368a5ff', '4d923f1c', 'cd8a3ac0']);
  assert.deepEqual(first3('unix:/tmp/s'), ['347e2e66', '88e84d9e', '6467d494']);
  assert.deepEqual(first3('UNIX:/tmp/s'), ['347e2e66', '88e84d9e', '6467d494']);
  // p0 and p1 spelled out
  const base = Buffer.concat([Buffer.from('127.0.0.1'), Buffer.from([0]), Buffer.from('9001')]);
  assert.equal(crc32(Buffer.concat([base, Buffer.from([0, 0, 0, 0])])), 0x70533e04);
  assert.equal(crc32(Buffer.concat([base, Buffer.from([0x04, 0x3e, 0x53, 0x70])])), 0x10571e62);
});

test('vector A and worked example 2: ring lookup', () => {
  const ring = new Ring(five);
  assert.equal(ring.length, 800);
  const want = [9005, 9003, 9002, 9003, 9004, 9001, 9001, 9003, 9002, 9005, 9004, 9002];
  want.forEach((port, k) => assert.equal(ring.lookup(`k${k}`), `127.0.0.1:${port}`, `k${k}`));
  assert.equal(ring.find(crc32('k0')), 700);
  assert.equal(hex(ring.hashes[700]), 'e15b2f49');
  assert.equal(ring.servers[700], '127.0.0.1:9005');
  assert.equal(ring.find(crc32('k1')), 472);
  assert.equal(hex(ring.hashes[472]), '965ec233');
  assert.equal(ring.servers[472], '127.0.0.1:9003');
  assert.equal(hex(ring.hashes[799]), 'ffeea1b4');
  assert.equal(hex(ring.hashes[0]), '006fff97');
  assert.equal(ring.find(0xffffffff), 800); // one past the end: wraps to point 0
  assert.equal(ring.find(ring.hashes[10]), 10); // equal hash: that point
});

test('vector B and worked example 5: plain hash', () => {
  const k0 = Buffer.from('k0');
  assert.equal(plainStep(k0, 0), 24841);
  assert.equal(plainStep(k0, 1), 31288);
  assert.equal(plainStep(k0, 2), 30846);
  assert.equal(plainStep(Buffer.from('k1'), 0), 5646);
  assert.equal(plainStep(Buffer.from('k3'), 0), 30720);
  assert.equal(24841 + 31288, 56129);
  // weights 2, 1, 3: 24841 mod 6 = 1 -> first server, 56129 mod 6 = 5 -> third
  const w = [{ weight: 2 }, { weight: 1 }, { weight: 3 }];
  assert.equal(slotOwner(w, 24841 % 6), 0);
  assert.equal(slotOwner(w, 56129 % 6), 2);

  const want = [9002, 9002, 9003, 9001, 9003, 9002, 9005, 9002, 9002, 9003, 9003, 9004];
  const peers = five.map((p) => peer(p.server));
  want.forEach((port, k) => {
    const r = new Worker(peers, 'plain', RULES).request(`k${k}`);
    assert.deepEqual(r.attempts, [`127.0.0.1:${port}`], `k${k}`);
  });
  // if 9002 refused k0 (max_fails=0), the second attempt is 9005
  const refusing = five.map((p) => peer(p.server, { maxFails: 0, refuses: p.server.endsWith('9002') }));
  const r = new Worker(refusing, 'plain', RULES).request('k0');
  assert.deepEqual(r.attempts, ['127.0.0.1:9002', '127.0.0.1:9005']);
});

test('vector C and worked example 3: consistent failover', () => {
  const peers = [9001, 9002, 9901, 9902, 9903].map((p) =>
    peer(`127.0.0.1:${p}`, { maxFails: 0, refuses: p >= 9900 }),
  );
  const ring = new Ring(peers);
  assert.equal(ring.find(crc32('k0')), 691);
  const walk = [691, 692, 693, 694, 695, 696, 697, 698].map((i) => ring.servers[i].slice(-4));
  assert.deepEqual(walk, ['9903', '9901', '9901', '9903', '9903', '9901', '9002', '9001']);
  const want = {
    k0: [9903, 9901, 9002],
    k1: [9001],
    k4: [9902, 9903, 9901, 9002],
    k6: [9903, 9902, 9001],
    k9: [9903, 9902, 9901, 9001],
    k10: [9903, 9901, 9002],
    k11: [9901, 9002],
  };
  for (const [k, ports] of Object.entries(want)) {
    const w = new Worker(peers, 'consistent', RULES, { ring });
    const r = w.request(k);
    assert.deepEqual(r.attempts, ports.map((p) => `127.0.0.1:${p}`), k);
    assert.equal(r.outcome, 'answered');
  }
});

test('vector D: plain failover', () => {
  const peers = [9001, 9901, 9902, 9002].map((p) => peer(`127.0.0.1:${p}`, { maxFails: 0, refuses: p >= 9900 }));
  const want = { k0: [9901, 9002], k1: [9902, 9901, 9002], k2: [9002], k3: [9001], k7: [9901, 9002] };
  for (const [k, ports] of Object.entries(want)) {
    const r = new Worker(peers, 'plain', RULES).request(k);
    assert.deepEqual(r.attempts, ports.map((p) => `127.0.0.1:${p}`), k);
  }
});

test('vector E: mixed spellings', () => {
  const ring = new Ring([
    { server: '127.0.0.1:9001', weight: 3 },
    { server: '127.0.0.1:9002', weight: 1 },
    { server: '[::1]:9101', weight: 2 },
    { server: 'UNIX:/tmp/ngxrun/b.sock', weight: 1 },
  ]);
  assert.equal(ring.length, 1120);
  assert.equal(ring.lookup('k0'), '[::1]:9101');
  assert.equal(ring.lookup('k1'), '127.0.0.1:9001');
  assert.equal(ring.lookup('k2'), '127.0.0.1:9002');
  assert.equal(ring.lookup('k3'), '[::1]:9101');
  assert.equal(ring.lookup('k9'), 'UNIX:/tmp/ngxrun/b.sock');
});

test('vector F: collision, the server listed first keeps the point', () => {
  assert.equal(hex(pointChain('127.0.0.1:20195', 46)[45]), '32a8f0fa');
  assert.equal(hex(pointChain('127.0.0.1:20412', 110)[109]), '32a8f0fa');
  const a = { server: '127.0.0.1:20195', weight: 1 };
  const b = { server: '127.0.0.1:20412', weight: 1 };
  const ab = new Ring([a, b]);
  const ba = new Ring([b, a]);
  assert.equal(ab.length, 319);
  assert.equal(ab.find(crc32('k261')), 53);
  assert.equal(hex(ab.hashes[53]), '32a8f0fa');
  assert.equal(ab.lookup('k261'), a.server);
  assert.equal(ba.lookup('k261'), b.server);
});

test('§8 version rules', () => {
  assert.equal(rulesFor('1.26.3').plainBypassNumberLt2, false);
  assert.equal(rulesFor('1.27.3').plainBypassNumberLt2, true);
  assert.equal(rulesFor('1.19.5').downOutOfBudget, false);
  assert.equal(rulesFor('1.19.6').downOutOfBudget, true);
  assert.equal(rulesFor('1.13.5'), null);
});
