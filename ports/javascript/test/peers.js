'use strict';
// A vector-style peer for the tests (the shape of a vector group's `peers` entry), with overrides.
const peer = (server, extra = {}) => ({
  server,
  address: server,
  weight: 1,
  down: false,
  backup: false,
  maxFails: 1,
  failTimeout: 10,
  refuses: false,
  ...extra,
});

module.exports = { peer };
