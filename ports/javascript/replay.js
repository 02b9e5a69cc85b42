#!/usr/bin/env node
'use strict';
// Replays the golden vectors (vectors/v1/*.json, or the files/directories given as arguments) against the
// JavaScript port. Prints a FAIL line per failing test, a SKIP line per group not run, and ends with
// `N passed, M failed` (plus `, K skipped` when tests were skipped). Exit status 1 on any failure, on an
// unreadable file or group, or when no test ran.

const fs = require('fs');
const path = require('path');
const { crc32, Ring, Worker, rulesFor, rulesId, policyOf, DEFAULT_POLICY, ANSWERS } = require('./nginx_hash');

const NOW = 1_000_000_000;

function vectorFiles(args) {
  const targets = args.length ? args : [path.join(__dirname, '..', '..', 'vectors', 'v1')];
  const files = [];
  for (const t of targets) {
    const st = fs.statSync(t);
    if (st.isDirectory()) {
      for (const f of fs.readdirSync(t).sort()) {
        if (f.endsWith('.json') && f !== 'schema.json') files.push(path.join(t, f));
      }
    } else {
      files.push(t);
    }
  }
  return files;
}

/** A failure group's policy (§5.1); nginx's default `error timeout` elsewhere. Throws for what is not modelled. */
function groupPolicy(g) {
  if (g.policy === undefined || g.policy === null) return DEFAULT_POLICY;
  const words = g.policy.nextUpstream;
  if (!Array.isArray(words) || words.length === 0) throw new Error('policy.nextUpstream is not a list of words');
  return policyOf(words, g.policy.tries ?? 0);
}

/** Throws for a peer answer this port does not model. */
function checkAnswers(g) {
  for (const p of g.peers) {
    if (p.answer !== undefined && p.answer !== null && (p.answer === 'refused' || !ANSWERS.has(p.answer))) {
      throw new Error(`peer answer ${JSON.stringify(p.answer)} is not modelled`);
    }
  }
}

function show(list, outcome) {
  return `[${list.join(', ')}] ${outcome}`;
}

function keyText(t) {
  return t.key === null ? `hex:${t.keyHex}` : JSON.stringify(t.key);
}

function main() {
  const args = process.argv.slice(2);
  let passed = 0;
  let failed = 0;
  let skipped = 0;
  let errors = 0;
  let files;
  try {
    files = vectorFiles(args);
  } catch (e) {
    console.log(`ERROR ${e.message}`);
    console.log('0 passed, 0 failed');
    process.exit(1);
  }
  for (const file of files) {
    const fname = path.basename(file);
    let doc;
    try {
      doc = JSON.parse(fs.readFileSync(file, 'utf8'));
    } catch (e) {
      console.log(`ERROR ${fname}: ${e.message}`);
      errors++;
      continue;
    }
    for (const g of doc.testGroups || []) {
      const where = `${fname}:${g.name}`;
      try {
        // one model per distinct rule set among the group's versions
        const models = new Map();
        let unmodelled = null;
        for (const v of g.source.versions) {
          const r = rulesFor(v);
          if (!r) {
            unmodelled = v;
            continue;
          }
          if (!models.has(rulesId(r))) models.set(rulesId(r), { rules: r, versions: [] });
          models.get(rulesId(r)).versions.push(v);
        }
        if (unmodelled) {
          console.log(`SKIP ${where}: nginx ${unmodelled} is not modelled (before 1.13.6 or not N.N.N)`);
          skipped += g.tests.length;
          continue;
        }
        // This port sorts ring points stably (glibc's rule); groups recorded only on musl need musl's.
        if (Array.isArray(g.libc) && !g.libc.includes('glibc')) {
          console.log(`SKIP ${where}: needs musl's tie rule (docs/nginx-algorithm.md §3.2); this port models glibc`);
          skipped += g.tests.length;
          continue;
        }
        // failure groups (§5.1): a policy word or a peer answer this port does not know
        let policy;
        try {
          policy = groupPolicy(g);
          checkAnswers(g);
        } catch (e) {
          console.log(`SKIP ${where}: ${e.message}`);
          skipped += g.tests.length;
          continue;
        }
        const ring = g.method === 'consistent' ? new Ring(g.peers.filter((p) => !p.backup)) : undefined;
        // results[testIndex][model] = result
        const results = g.tests.map(() => []);
        for (const m of models.values()) {
          let worker = null;
          g.tests.forEach((t, ti) => {
            if (!g.stateful || worker === null) {
              worker = new Worker(g.peers, g.method, m.rules, { ring, now: NOW });
            }
            const key = Buffer.from(t.keyHex, 'hex');
            const clock = t.clock ?? 0;
            if (!Number.isInteger(clock) || clock < 0) throw new Error(`bad clock ${clock}`);
            const got = worker.run(key, { policy, method: t.requestMethod ?? 'GET', now: NOW + clock });
            results[ti].push({ versions: m.versions, got });
          });
        }
        g.tests.forEach((t, ti) => {
          const problems = [];
          const key = Buffer.from(t.keyHex, 'hex');
          const c = crc32(key).toString(16).padStart(8, '0');
          if (c !== t.crc32) problems.push(`crc32 ${c} != ${t.crc32}`);
          for (const { versions, got } of results[ti]) {
            const same =
              JSON.stringify(got.attempts) === JSON.stringify(t.attempts) &&
              JSON.stringify(got.servers) === JSON.stringify(t.servers) &&
              got.outcome === t.outcome &&
              got.status === t.status &&
              (t.upstreamStatuses === undefined ||
                JSON.stringify(got.upstreamStatuses) === JSON.stringify(t.upstreamStatuses));
            if (!same) {
              problems.push(
                `expected ${show(t.attempts, t.outcome)} got ${show(got.attempts, got.outcome)}` +
                  ` (status expected ${t.status} got ${got.status}` +
                  (t.upstreamStatuses === undefined
                    ? ')'
                    : `, upstreamStatuses expected ${JSON.stringify(t.upstreamStatuses)}` +
                      ` got ${JSON.stringify(got.upstreamStatuses)})`) +
                  ` (servers expected ${JSON.stringify(t.servers)} got ${JSON.stringify(got.servers)};` +
                  ` rules of ${versions.join('+')})`,
              );
            }
          }
          if (problems.length) {
            failed++;
            console.log(`FAIL ${where} tcId=${t.tcId} key=${keyText(t)}: ${problems.join('; ')}`);
          } else {
            passed++;
          }
        });
      } catch (e) {
        console.log(`ERROR ${where}: ${e.stack || e.message}`);
        failed += (g.tests || []).length;
        errors++;
      }
    }
  }
  console.log(`${passed} passed, ${failed} failed${skipped ? `, ${skipped} skipped` : ''}`);
  process.exit(failed > 0 || errors > 0 || passed === 0 ? 1 : 0);
}

main();
