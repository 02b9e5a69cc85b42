'use strict';
// nginx upstream `hash $key;` and `hash $key consistent;`, ported to JavaScript (Node 20, no dependencies)
// from docs/nginx-algorithm.md alone. "§N" below is a section of that document.

// ---------------------------------------------------------------------------------------------------------
// §1 CRC32: reflected polynomial 0xEDB88320, preset and final XOR 0xFFFFFFFF (zlib's crc32).

const CRC_TABLE = (() => {
  const t = new Uint32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? (c >>> 1) ^ 0xedb88320 : c >>> 1;
    t[n] = c >>> 0;
  }
  return t;
})();

/** Raw register update (no pre/post XOR): `crcFinal(crcUpdate(CRC_INIT, A ‖ B)) == crc32(A ‖ B)`. */
const CRC_INIT = 0xffffffff;
function crcUpdate(reg, bytes) {
  let c = reg >>> 0;
  for (let i = 0; i < bytes.length; i++) c = CRC_TABLE[(c ^ bytes[i]) & 0xff] ^ (c >>> 8);
  return c >>> 0;
}
function crcFinal(reg) {
  return (reg ^ 0xffffffff) >>> 0;
}

/** crc32 of a Uint8Array/Buffer or of a string (encoded as UTF-8), as an unsigned 32-bit number. */
function crc32(data) {
  return crcFinal(crcUpdate(CRC_INIT, toBytes(data)));
}

function toBytes(data) {
  if (typeof data === 'string') return Buffer.from(data, 'utf8');
  return data;
}

// ---------------------------------------------------------------------------------------------------------
// §3.1 step 1: split the configured server string into the host and port that are hashed.

const ASCII_0 = 0x30;
const ASCII_9 = 0x39;
const COLON = 0x3a;

/** Returns { host, port } as Buffers (byte slices of the UTF-8 server string). */
function splitServer(server) {
  const s = toBytes(server);
  if (s.length >= 5 && Buffer.from(s.subarray(0, 5)).toString('latin1').toLowerCase() === 'unix:') {
    return { host: Buffer.from(s.subarray(5)), port: Buffer.alloc(0) };
  }
  let i = s.length;
  while (i > 0 && s[i - 1] >= ASCII_0 && s[i - 1] <= ASCII_9) i--;
  // i is the start of the trailing run of digits (possibly empty)
  if (i > 0 && s[i - 1] === COLON) {
    return { host: Buffer.from(s.subarray(0, i - 1)), port: Buffer.from(s.subarray(i)) };
  }
  return { host: Buffer.from(s), port: Buffer.alloc(0) };
}

/** §3.1 step 2: base = host ‖ 0x00 ‖ port. */
function baseString(server) {
  const { host, port } = splitServer(server);
  return Buffer.concat([host, Buffer.from([0]), port]);
}

/** §3.1 step 3: the first `count` points of a server string's chain. */
function pointChain(server, count) {
  const base = baseString(server);
  const baseReg = crcUpdate(CRC_INIT, base); // running hasher after `base`, reused for every point
  const out = new Array(count);
  const le = Buffer.alloc(4);
  let prev = 0;
  for (let i = 0; i < count; i++) {
    le.writeUInt32LE(prev, 0);
    const h = crcFinal(crcUpdate(baseReg, le));
    out[i] = h;
    prev = h;
  }
  return out;
}

// ---------------------------------------------------------------------------------------------------------
// §3.1–§3.3: the ring.

class Ring {
  /**
   * @param {Array<{server:string, weight:number}>} primaryPeers the primary list, in list order
   *        (down and failed peers included: health is checked at lookup time).
   */
  constructor(primaryPeers) {
    const pts = []; // { h, server, seq }
    let seq = 0;
    for (const p of primaryPeers) {
      const chain = pointChain(p.server, 160 * p.weight);
      for (const h of chain) pts.push({ h, server: p.server, seq: seq++ });
    }
    // §3.2: stable sort by unsigned hash (glibc's merge sort); the generation order breaks ties
    // explicitly so that the result does not depend on the engine's sort.
    pts.sort((a, b) => (a.h !== b.h ? (a.h < b.h ? -1 : 1) : a.seq - b.seq));
    // §3.1 step 5: keep the first of every run of equal hashes.
    const hashes = [];
    const servers = [];
    for (const pt of pts) {
      if (hashes.length > 0 && hashes[hashes.length - 1] === pt.h) continue;
      hashes.push(pt.h);
      servers.push(pt.server);
    }
    this.hashes = Uint32Array.from(hashes);
    this.servers = servers;
  }

  get length() {
    return this.hashes.length;
  }

  /** §3.3: index of the first point with hash ≥ h; `length` when h is above the last point. */
  find(h) {
    h >>>= 0;
    let lo = 0;
    let hi = this.hashes.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.hashes[mid] < h) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  /** The server string that owns a key (first pick with every peer healthy). */
  lookup(key) {
    if (this.hashes.length === 0) return null;
    return this.servers[this.find(crc32(key)) % this.hashes.length];
  }
}

// ---------------------------------------------------------------------------------------------------------
// §4 plain hash: one step of the rehash sequence.

/** step = (crc32(prefix ‖ key) >> 16) & 0x7fff, prefix = decimal rehash when rehash > 0. */
function plainStep(keyBytes, rehash) {
  const prefix = rehash > 0 ? Buffer.from(String(rehash), 'ascii') : Buffer.alloc(0);
  return (crc32(Buffer.concat([prefix, keyBytes])) >>> 16) & 0x7fff;
}

/** Slot owner: walk the list subtracting weights until w < weight. Returns the position. */
function slotOwner(peers, w) {
  for (let i = 0; i < peers.length; i++) {
    if (w < peers[i].weight) return i;
    w -= peers[i].weight;
  }
  throw new Error('slot beyond total_weight');
}

// ---------------------------------------------------------------------------------------------------------
// §8: version-dependent rules.

function parseVersion(v) {
  const m = /^(\d+)\.(\d+)\.(\d+)/.exec(v);
  if (!m) return null;
  return [Number(m[1]), Number(m[2]), Number(m[3])];
}
function atLeast(v, a, b, c) {
  if (v[0] !== a) return v[0] > a;
  if (v[1] !== b) return v[1] > b;
  return v[2] >= c;
}

/** The rule set of one nginx version. Versions before 1.13.6 are not modelled (null). */
function rulesFor(version) {
  const v = parseVersion(version);
  if (!v || !atLeast(v, 1, 13, 6)) return null;
  return {
    plainBypassNumberLt2: atLeast(v, 1, 27, 3), // §4 step 1: number < 2 (else: single)
    downOutOfBudget: atLeast(v, 1, 19, 6), // §5 retry budget
    emptyKeyRoundRobin: atLeast(v, 1, 17, 1), // §9 item 1
  };
}
function rulesId(r) {
  return `${+r.plainBypassNumberLt2}${+r.downOutOfBudget}${+r.emptyKeyRoundRobin}`;
}

// ---------------------------------------------------------------------------------------------------------
// §5.1: what each kind of attempt does — the retry policy, what one attempt met, and the rule for it.

const NEXT_UPSTREAM_WORDS = new Set([
  'error', 'timeout', 'invalid_header', 'http_500', 'http_502', 'http_503', 'http_504', 'http_403', 'http_404',
  'http_429', 'non_idempotent', 'updating', 'off',
]);
const RETRIED_STATUSES = new Set([500, 502, 503, 504, 403, 404, 429]);
const NON_IDEMPOTENT_METHODS = new Set(['POST', 'LOCK', 'PATCH']);

/**
 * `proxy_next_upstream` words (any case; `off` anywhere makes it `off` alone) and `proxy_next_upstream_tries`
 * (0: no cap). `proxy_next_upstream_timeout` is not modelled (0, none); request bodies are buffered (default).
 */
function policyOf(words, tries = 0) {
  const ws = new Set();
  for (const w of words) {
    const l = String(w).toLowerCase();
    if (!NEXT_UPSTREAM_WORDS.has(l)) throw new Error(`unknown proxy_next_upstream value ${JSON.stringify(w)}`);
    ws.add(l);
  }
  if (!Number.isInteger(tries) || tries < 0) throw new Error(`bad proxy_next_upstream_tries ${tries}`);
  return { nextUpstream: ws.has('off') ? new Set(['off']) : ws, tries };
}
const DEFAULT_POLICY = policyOf(['error', 'timeout']); // nginx's default
function lists(policy, condition) {
  return !policy.nextUpstream.has('off') && policy.nextUpstream.has(condition);
}

// What one attempt met: kind error | timeout | invalid_header | response (with a status), whether the request
// had been sent ("request sent", §5.1), whether it ran on a cached keepalive connection.
const Reply = Object.freeze({
  REFUSED: Object.freeze({ kind: 'error', status: 0, sent: false, cached: false }),
  CONNECT_TIMEOUT: Object.freeze({ kind: 'timeout', status: 0, sent: false, cached: false }),
  CLOSED: Object.freeze({ kind: 'error', status: 0, sent: true, cached: false }), // closed before the header
  READ_TIMEOUT: Object.freeze({ kind: 'timeout', status: 0, sent: true, cached: false }),
  INVALID_HEADER: Object.freeze({ kind: 'invalid_header', status: 0, sent: true, cached: false }),
  STALE_CACHED: Object.freeze({ kind: 'error', status: 0, sent: true, cached: true }), // error on a cached connection
  response: (status) => ({ kind: 'response', status, sent: true, cached: false }),
});

// A peer's answer as the failure vectors name it (peers[i].answer), plus 'refused' for `refuses`.
const ANSWERS = new Set([
  'refused', 'timeout', 'invalid_header', 'stale_keepalive',
  'http_500', 'http_502', 'http_503', 'http_504', 'http_403', 'http_404', 'http_429',
]);

/** The Reply of an answer (undefined/null: 200 OK); not stale_keepalive, which depends on the worker. */
function replyOf(answer) {
  if (answer === undefined || answer === null) return Reply.response(200);
  if (!ANSWERS.has(answer) || answer === 'stale_keepalive') throw new Error(`unknown peer answer ${answer}`);
  if (answer === 'refused') return Reply.REFUSED;
  if (answer === 'timeout') return Reply.READ_TIMEOUT;
  if (answer === 'invalid_header') return Reply.INVALID_HEADER;
  return Reply.response(Number(answer.slice(5)));
}

/**
 * §5.1 for one attempt. `tries`: pc.tries before this attempt is freed; `single`: the current list is nginx's
 * `single` list (whose free sets pc.tries to 0, §5). Returns { state: 'FAILED'|'NEXT'|'OK', givenBack, retry,
 * upstreamStatus, clientStatus (null when retried), tries (pc.tries after the free and the give-back) }.
 */
function decide(reply, policy, method, tries, single = false) {
  let after = single ? 0 : Math.max(tries - 1, 0);
  const idempotentOk = !NON_IDEMPOTENT_METHODS.has(String(method).toUpperCase()) || lists(policy, 'non_idempotent');
  if (reply.kind === 'response') {
    const s = reply.status;
    // a listed status counts only if another attempt will really happen: budget left after this one
    if (RETRIED_STATUSES.has(s) && tries > 1 && lists(policy, `http_${s}`) && idempotentOk) {
      const state = s === 403 || s === 404 ? 'NEXT' : 'FAILED';
      return { state, givenBack: false, retry: true, upstreamStatus: s, clientStatus: null, tries: after };
    }
    return { state: 'OK', givenBack: false, retry: false, upstreamStatus: s, clientStatus: s, tries: after };
  }
  if (!['error', 'timeout', 'invalid_header'].includes(reply.kind)) throw new Error(`unknown kind ${reply.kind}`);
  const givenBack = reply.cached && reply.kind === 'error'; // a timeout on a cached connection is not given back
  if (givenBack) after += 1;
  const status = reply.kind === 'timeout' ? 504 : 502;
  const retry = after > 0 && lists(policy, reply.kind) && (!reply.sent || idempotentOk);
  const clientStatus = retry ? null : status;
  return { state: 'FAILED', givenBack, retry, upstreamStatus: status, clientStatus, tries: after };
}

// ---------------------------------------------------------------------------------------------------------
// §2.2, §3.4, §4, §5: a single nginx worker with its peer state.

const BUSY = Symbol('BUSY');

class PeerList {
  constructor(peers, isPrimary, hasBackup) {
    this.peers = peers;
    this.number = peers.length;
    this.totalWeight = peers.reduce((s, p) => s + p.weight, 0);
    this.tries = peers.filter((p) => !p.down).length;
    this.single = isPrimary && peers.length === 1 && !hasBackup;
    this.next = null;
  }
}

class Worker {
  /**
   * @param {Array<object>} peerDefs the group's `peers` (server, address, weight, down, backup, maxFails,
   *        failTimeout, refuses, optional maxConns), in nginx's list order.
   * @param {'consistent'|'plain'} method
   * @param {object} rules from rulesFor()
   * @param {{ring?: Ring, now?: number}} opts a prebuilt ring (it only depends on the primary list)
   */
  constructor(peerDefs, method, rules, opts = {}) {
    this.method = method;
    this.rules = rules;
    this.now = opts.now ?? 1_000_000_000;
    const mk = (d) => ({
      server: d.server,
      address: d.address ?? d.server,
      weight: d.weight ?? 1,
      down: !!d.down,
      maxFails: d.maxFails ?? 1,
      failTimeout: d.failTimeout ?? 10,
      maxConns: d.maxConns ?? 0,
      refuses: !!d.refuses,
      answer: d.answer ?? null, // failure groups (§5.1): what it answers when it does not refuse; null: 200
      effectiveWeight: d.weight ?? 1,
      currentWeight: 0,
      fails: 0,
      checked: 0,
      accessed: 0,
      conns: 0,
    });
    const primary = peerDefs.filter((d) => !d.backup).map(mk);
    const backup = peerDefs.filter((d) => d.backup).map(mk);
    this.primary = new PeerList(primary, true, backup.length > 0);
    if (backup.length > 0) {
      this.backup = new PeerList(backup, false, false);
      this.primary.next = this.backup;
    } else {
      this.backup = null;
    }
    if (method === 'consistent') this.ring = opts.ring ?? new Ring(primary);
    // keepalive (§5.1): per address, whether this worker holds a cached connection to it (only stale_keepalive
    // peers are tracked: a cached connection to any other peer answers as a new one would)
    this.cached = new Map();
  }

  // -- peer tests (§3.4 step 4) --
  isFailed(p) {
    return p.maxFails > 0 && p.fails >= p.maxFails && this.now - p.checked <= p.failTimeout;
  }
  isUsable(p) {
    return !p.down && !this.isFailed(p) && !(p.maxConns > 0 && p.conns >= p.maxConns);
  }

  /** One smooth weighted round-robin step over `positions` of `list`. Returns a position or -1. */
  swrr(list, positions) {
    let best = -1;
    let total = 0;
    for (const i of positions) {
      const p = list.peers[i];
      p.currentWeight += p.effectiveWeight;
      total += p.effectiveWeight;
      if (p.effectiveWeight < p.weight) p.effectiveWeight += 1;
      if (best < 0 || p.currentWeight > list.peers[best].currentWeight) best = i;
    }
    if (best >= 0) list.peers[best].currentWeight -= total;
    return best;
  }

  /** §3.4 step 5 / §4 step 4 / §5: take the peer at position i of the request's current list. */
  take(req, i) {
    const p = req.list.peers[i];
    p.conns += 1;
    if (this.now - p.checked > p.failTimeout) p.checked = this.now;
    req.tried[i] = true;
    return p;
  }

  /** §5 the round-robin getter. */
  getRoundRobin(req) {
    for (;;) {
      const list = req.list;
      if (list.single) {
        const p = list.peers[0];
        if (!p.down && !(p.maxConns > 0 && p.conns >= p.maxConns)) {
          p.conns += 1;
          return p;
        }
      } else {
        const cands = [];
        for (let i = 0; i < list.number; i++) {
          if (!req.tried[i] && this.isUsable(list.peers[i])) cands.push(i);
        }
        const best = this.swrr(list, cands);
        if (best >= 0) return this.take(req, best);
      }
      // nothing found
      if (list.next) {
        req.list = list.next;
        req.tried = new Array(req.list.number).fill(false);
        continue;
      }
      return BUSY;
    }
  }

  /** §3.4 consistent get(). */
  getConsistent(req) {
    if (req.misses > 20 || req.list.single || req.key.length === 0) return this.getRoundRobin(req);
    const list = req.list;
    if (list.number === 0) return BUSY;
    const ring = this.ring;
    for (;;) {
      const s = ring.servers[req.index % ring.length];
      const cands = [];
      for (let i = 0; i < list.number; i++) {
        const p = list.peers[i];
        if (!req.tried[i] && this.isUsable(p) && p.server === s) cands.push(i);
      }
      const best = this.swrr(list, cands);
      if (best >= 0) return this.take(req, best);
      req.index += 1;
      req.misses += 1;
      if (req.misses > 20) return this.getRoundRobin(req);
    }
  }

  /** §4 plain get(). */
  getPlain(req) {
    const tooSmall = this.rules.plainBypassNumberLt2 ? req.list.number < 2 : req.list.single;
    if (req.misses > 20 || req.key.length === 0 || tooSmall) return this.getRoundRobin(req);
    const list = req.list;
    for (;;) {
      const step = plainStep(req.key, req.rehash);
      req.sum = (req.sum + step) >>> 0;
      req.rehash += 1;
      const w = req.sum % list.totalWeight;
      const i = slotOwner(list.peers, w);
      if (req.tried[i] || !this.isUsable(list.peers[i])) {
        req.misses += 1;
        if (req.misses > 20) return this.getRoundRobin(req);
        continue;
      }
      return this.take(req, i);
    }
  }

  /** §5 free after an attempt, with state 'FAILED', 'NEXT' or 'OK'; the budget is decide()'s. */
  free(req, p, state) {
    if (req.list.single) {
      p.fails = 0;
      p.conns -= 1;
      return;
    }
    if (state === 'FAILED') {
      p.fails += 1;
      p.accessed = p.checked = this.now;
      if (p.maxFails > 0) {
        p.effectiveWeight -= Math.floor(p.weight / p.maxFails);
        if (p.effectiveWeight < 0) p.effectiveWeight = 0;
      }
    } else if (p.accessed < p.checked) {
      p.fails = 0;
    }
    p.conns -= 1;
  }

  /** What an attempt at peer p meets; a stale_keepalive peer depends on the worker's cached connection. */
  reply(p, answer) {
    if (answer === 'stale_keepalive') {
      if (this.cached.get(p.address)) {
        this.cached.set(p.address, false);
        return Reply.STALE_CACHED;
      }
      this.cached.set(p.address, true);
      return Reply.response(200);
    }
    return replyOf(answer);
  }

  /**
   * One request with `proxy_next_upstream error timeout`. Returns { attempts: [address], servers: [server],
   * outcome, status, upstreamStatuses }. Peers with `refuses` fail every connection; all others answer 200.
   */
  request(key) {
    return this.run(key, { answer: (p) => (p.refuses ? 'refused' : null) });
  }

  /**
   * One request under §5.1. opts: policy (policyOf(); default `error timeout`), method ('GET'), now (the
   * worker's clock for this request; default the worker's), answer(peer) (one of ANSWERS or null for 200;
   * default the peer's own `refuses`/`answer`). Every attempt is judged by decide().
   */
  run(key, opts = {}) {
    const policy = opts.policy ?? DEFAULT_POLICY;
    const method = opts.method ?? 'GET';
    const answer = opts.answer ?? ((p) => (p.refuses ? 'refused' : p.answer));
    if (opts.now !== undefined) this.now = opts.now;
    const keyBytes = toBytes(key);
    const budgetOf = (l) => (l ? (this.rules.downOutOfBudget ? l.tries : l.number) : 0);
    let tries = budgetOf(this.primary) + budgetOf(this.backup);
    if (policy.tries > 0 && policy.tries < tries) tries = policy.tries; // proxy_next_upstream_tries (§5)
    const req = {
      key: keyBytes,
      list: this.primary,
      tried: new Array(this.primary.number).fill(false),
      tries,
      misses: 0,
      index: 0,
      sum: 0,
      rehash: 0,
    };
    if (!this.rules.emptyKeyRoundRobin && keyBytes.length === 0) {
      throw new Error('empty key hashing (before 1.17.1) is not modelled');
    }
    if (this.method === 'consistent' && this.ring.length > 0 && keyBytes.length > 0) {
      req.index = this.ring.find(crc32(keyBytes));
    }
    const attempts = [];
    const servers = [];
    const upstreamStatuses = [];
    for (;;) {
      const p = this.method === 'consistent' ? this.getConsistent(req) : this.getPlain(req);
      if (p === BUSY) {
        upstreamStatuses.push('502'); // the peerless last attempt of "no live upstreams"
        return { attempts, servers, outcome: 'noLiveUpstreams', status: 502, upstreamStatuses };
      }
      attempts.push(p.address);
      servers.push(p.server);
      const reply = this.reply(p, answer(p));
      const d = decide(reply, policy, method, req.tries, req.list.single);
      this.free(req, p, d.state);
      req.tries = d.tries;
      upstreamStatuses.push(String(d.upstreamStatus));
      if (!d.retry) {
        const outcome = reply.kind === 'response' ? 'answered' : 'failed';
        return { attempts, servers, outcome, status: d.clientStatus, upstreamStatuses };
      }
    }
  }
}

module.exports = {
  crc32,
  crcUpdate,
  crcFinal,
  CRC_INIT,
  splitServer,
  baseString,
  pointChain,
  Ring,
  plainStep,
  slotOwner,
  rulesFor,
  rulesId,
  Worker,
  BUSY,
  NEXT_UPSTREAM_WORDS,
  RETRIED_STATUSES,
  policyOf,
  DEFAULT_POLICY,
  Reply,
  ANSWERS,
  replyOf,
  decide,
};
