#!/usr/bin/env node
'use strict';
// The JavaScript port behind the shim protocol (ports/SHIM.md, versions 1 and 2): JSON lines on stdin, one answer
// per line on stdout.
//
//   nginx-ketama replay-vectors --shim "node ports/javascript/shim.js"
//   nginx-ketama verify --backend local --shim "node ports/javascript/shim.js"
//
// `upstream` builds the port's Worker (nginx_hash.js) from the message's peers, the same shape as a vector
// group's; `request` runs one request on it, the peers with `refuses` failing; `reset` starts a fresh Worker.
// A version the port does not model is answered {"unsupported": ...}; an unknown op or a malformed message
// {"error": ...}. Exits 0 when stdin ends. Protocol 2 (failure kinds, docs/nginx-algorithm.md §5.1): the
// upstream carries a `policy` and peer `answer`s, a request its `method` and optional `now`, and the answer
// `status` and `upstreamStatuses`.

const readline = require('readline');
const { Ring, Worker, rulesFor, policyOf, DEFAULT_POLICY, ANSWERS } = require('./nginx_hash');

const PROTOCOLS = [1, 2];
const NEEDS_2 = 'failure kinds (a policy or peer answers) need shim protocol 2, and this upstream says protocol 1';
const NOW = 1_000_000_000;

class Unsupported extends Error {}

function checkPeers(peers) {
  if (!Array.isArray(peers) || peers.length === 0) throw new Error('no peers');
  for (const p of peers) {
    if (p === null || typeof p !== 'object') throw new Error('a peer is not an object');
    for (const k of ['server', 'address']) {
      if (typeof p[k] !== 'string') throw new Error(`a peer without ${k}`);
    }
    for (const k of ['weight', 'maxFails', 'failTimeout']) {
      if (p[k] !== undefined && !(Number.isInteger(p[k]) && p[k] >= 0)) throw new Error(`bad ${k}: ${p[k]}`);
    }
    if (p.weight === 0) throw new Error('weight 0');
  }
  if (!peers.some((p) => !p.backup)) throw new Error('no primary peer');
}

/** A fresh-worker factory for an `upstream` message. */
function upstreamOf(msg) {
  const protocol = msg.protocol ?? 1;
  if (!PROTOCOLS.includes(protocol)) {
    throw new Unsupported(`protocol ${JSON.stringify(msg.protocol)} (this shim speaks 1 and 2)`);
  }
  if (msg.method !== 'consistent' && msg.method !== 'plain') {
    throw new Error(`unknown method ${JSON.stringify(msg.method)}`);
  }
  if (typeof msg.version !== 'string') throw new Error('no version');
  const rules = rulesFor(msg.version);
  if (!rules) throw new Unsupported(`nginx ${msg.version} is not modelled (before 1.13.6 or not N.N.N)`);
  const now = msg.now ?? NOW;
  if (!Number.isInteger(now)) throw new Error(`now is not an integer: ${now}`);
  checkPeers(msg.peers);
  const hasPolicy = msg.policy !== undefined && msg.policy !== null;
  if (protocol === 1 && hasPolicy) throw new Unsupported(NEEDS_2);
  if (protocol === 2 && !hasPolicy) throw new Error('a protocol-2 upstream without policy');
  let policy = DEFAULT_POLICY;
  if (protocol === 2) {
    const words = msg.policy.nextUpstream;
    if (!Array.isArray(words) || words.length === 0) throw new Error('policy.nextUpstream is not a list of words');
    policy = policyOf(words, msg.policy.tries ?? 0);
  }
  for (const p of msg.peers) {
    if (p.answer === undefined || p.answer === null) continue;
    if (protocol === 1) throw new Unsupported(NEEDS_2);
    if (p.answer === 'refused' || !ANSWERS.has(p.answer)) {
      throw new Unsupported(`peer answer ${JSON.stringify(p.answer)} is not modelled`);
    }
  }
  const ring = msg.method === 'consistent' ? new Ring(msg.peers.filter((p) => !p.backup)) : undefined;
  const fresh = () => new Worker(msg.peers, msg.method, rules, { ring, now });
  return { fresh, protocol, policy, now };
}

let fresh = null; // () => Worker for the current upstream
let worker = null;
let current = null; // { protocol, policy, now } of the current upstream

function answer(msg) {
  if (msg === null || typeof msg !== 'object' || Array.isArray(msg)) {
    return { error: 'a message must be a JSON object' };
  }
  switch (msg.op) {
    case 'upstream':
      fresh = null;
      worker = null;
      try {
        current = upstreamOf(msg);
        fresh = current.fresh;
        worker = fresh();
      } catch (e) {
        fresh = null;
        return e instanceof Unsupported ? { unsupported: e.message } : { error: `bad upstream: ${e.message}` };
      }
      return { ok: true };
    case 'request': {
      if (!worker) return { error: 'request before a (supported) upstream' };
      const hex = msg.keyHex;
      if (typeof hex !== 'string' || hex.length % 2 !== 0 || !/^[0-9a-fA-F]*$/.test(hex)) {
        return { error: `bad keyHex ${JSON.stringify(hex)}` };
      }
      let out;
      const method = msg.method ?? 'GET';
      if (typeof method !== 'string' || method === '') return { error: `bad method ${JSON.stringify(method)}` };
      const now = msg.now ?? current.now;
      if (!Number.isInteger(now)) return { error: `now is not an integer: ${JSON.stringify(now)}` };
      try {
        out =
          current.protocol === 1
            ? worker.request(Buffer.from(hex, 'hex'))
            : worker.run(Buffer.from(hex, 'hex'), { policy: current.policy, method, now });
      } catch (e) {
        // the port throws "... is not modelled" for what it cannot model (the empty key before 1.17.1)
        return /not modelled/.test(e.message) ? { unsupported: e.message } : { error: e.message };
      }
      if (current.protocol === 1) return { attempts: out.attempts, outcome: out.outcome };
      const { attempts, outcome, status, upstreamStatuses } = out;
      return { attempts, outcome, status, upstreamStatuses };
    }
    case 'reset':
      if (!fresh) return { error: 'reset before a (supported) upstream' };
      worker = fresh();
      return { ok: true };
    default:
      return { error: `unknown op ${JSON.stringify(msg.op)}` };
  }
}

const rl = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
rl.on('line', (line) => {
  let reply;
  try {
    reply = answer(JSON.parse(line));
  } catch (e) {
    reply = { error: `not JSON: ${e.message}` };
  }
  // On Linux, Node writes to a pipe synchronously: each answer is out before the next line is read.
  process.stdout.write(JSON.stringify(reply) + '\n');
});
// At the end of stdin readline closes, nothing is left to do, and node exits 0.
