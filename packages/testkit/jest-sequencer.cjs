// jest's own test sequencer (failed files first, then the slowest), which also leaves the
// paths of the files this run selected in globalThis.__DUET_SELECTED_TESTS__, so that a
// global setup can start only what those files need. jest sorts the tests before it runs
// the global setup, in the same process.
//
//   testSequencer: "<rootDir>/../testkit/jest-sequencer.cjs"
const Sequencer = require("@jest/test-sequencer").default;

class SelectionRecordingSequencer extends Sequencer {
  sort(tests) {
    globalThis.__DUET_SELECTED_TESTS__ = tests.map((test) => test.path);
    return super.sort(tests);
  }
}

module.exports = SelectionRecordingSequencer;
