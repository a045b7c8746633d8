// compose.test.ts last: it waits for the Docker engine the global setup is still bringing
// (test/support/docker-setup.ts), while the files before it need none. The rest in name order.
const Sequencer = require("@jest/test-sequencer").default;

class ComposeLastSequencer extends Sequencer {
  sort(tests) {
    const last = (test) => (/[\\/]compose\.test\.ts$/.test(test.path) ? 1 : 0);
    return [...tests].sort((a, b) => last(a) - last(b) || a.path.localeCompare(b.path));
  }
}

module.exports = ComposeLastSequencer;
