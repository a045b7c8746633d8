// A jest reporter for a quiet passing run: a file that passes prints nothing; a file that
// fails prints everything jest's default reporter would (its console output, then every
// failure with its diff and stack), as soon as it ends. At the end: one line of totals,
// and one line per failed file.
//
//   reporters: ["<rootDir>/../testkit/jest-quiet-reporter.cjs"], verbose: false
//
// A long run shows where it is: on a terminal, a status line (files done, the files running,
// seconds so far) that redraws itself; elsewhere (CI logs), a line every 30 s once the run
// has lasted that long. The last lines name the failed files and the slowest ones.
//
// DUET_FIGURES=1 also prints the `FIGURES <name> {json}` lines the reliability tests log
// (the measured numbers behind the README's reliability section), from passing files too.
// `npx jest --reporters=default` shows the usual per-file output.
const { basename, relative } = require("node:path");

const FIGURES = process.env.DUET_FIGURES === "1";

const indent = (text, by) =>
  text
    .split("\n")
    .map((line) => by + line)
    .join("\n");

function consoleText(entries) {
  return (entries ?? [])
    .map(({ type, message, origin }) => {
      const where = (origin ?? "").split("\n").find((line) => line.trim()) ?? "";
      return `  console.${type}${where ? ` ${where.trim()}` : ""}\n${indent(message, "    ")}`;
    })
    .join("\n");
}

/** How many of the slowest files (of 5 s or more) the last line names. */
const SLOWEST_SHOWN = 8;

/** Seconds between two progress lines in a log (not a terminal). */
const LOG_PROGRESS_SECONDS = 30;

class QuietReporter {
  constructor(globalConfig) {
    this.rootDir = globalConfig.rootDir;
    this.name = basename(globalConfig.rootDir);
    this.tty = Boolean(process.stderr.isTTY);
    this.done = 0;
    this.total = 0;
    this.running = new Set();
    this.started = Date.now();
    this.timer = undefined;
  }

  onRunStart(results) {
    this.total = results.numTotalTestSuites;
    this.started = Date.now();
    const every = this.tty ? 1000 : LOG_PROGRESS_SECONDS * 1000;
    this.timer = setInterval(() => this.progress(), every);
    this.timer.unref();
  }

  onTestFileStart(test) {
    this.running.add(relative(this.rootDir, test.path));
    if (this.tty) this.progress();
  }

  /** Where the run is: files done of all, what is running, seconds so far. */
  progress() {
    const seconds = Math.round((Date.now() - this.started) / 1000);
    const running = [...this.running].join(", ");
    const line = `${this.name}: ${this.done}/${this.total} files, ${seconds} s${running ? `; running ${running}` : ""}`;
    if (this.tty) process.stderr.write(`\r\x1b[K${line.slice(0, (process.stderr.columns || 100) - 1)}`);
    else process.stderr.write(`${line}\n`);
  }

  onTestResult(_test, result) {
    this.done++;
    const path = relative(this.rootDir, result.testFilePath);
    this.running.delete(path);
    const failed = result.numFailingTests > 0 || result.testExecError !== undefined || Boolean(result.failureMessage);
    if (this.tty) this.progress();
    let out = "";
    if (failed) {
      out += `FAIL ${path}\n`;
      const logged = consoleText(result.console);
      if (logged) out += `${logged}\n\n`;
      out += `${result.failureMessage ?? ""}\n`;
    } else if (FIGURES) {
      const figures = (result.console ?? []).filter((entry) => entry.message.startsWith("FIGURES "));
      if (figures.length > 0) out += `${figures.map((entry) => entry.message).join("\n")}\n`;
    }
    if (!out) return;
    if (this.tty) process.stderr.write("\r\x1b[K");
    process.stderr.write(out);
  }

  onRunComplete(_contexts, results) {
    clearInterval(this.timer);
    if (this.tty) process.stderr.write("\r\x1b[K");
    const seconds = ((Date.now() - results.startTime) / 1000).toFixed(1);
    const failedFiles = results.testResults.filter(
      (r) => r.numFailingTests > 0 || r.testExecError !== undefined || r.failureMessage,
    );
    const counts = [
      results.numFailedTests && `${results.numFailedTests} failed`,
      results.numPassedTests && `${results.numPassedTests} passed`,
      results.numPendingTests + results.numTodoTests && `${results.numPendingTests + results.numTodoTests} skipped`,
    ].filter(Boolean);
    const files = failedFiles.length
      ? `${failedFiles.length} of ${results.numTotalTestSuites} files failed`
      : `${results.numTotalTestSuites} file${results.numTotalTestSuites === 1 ? "" : "s"}`;
    process.stderr.write(`Tests: ${counts.join(", ") || "none"} (${files}, ${seconds} s)\n`);
    for (const r of failedFiles) process.stderr.write(`  failed: ${relative(this.rootDir, r.testFilePath)}\n`);
    // Where the time went: the slowest files, for whoever next shortens the gate.
    const slowest = results.testResults
      .map((r) => ({ path: relative(this.rootDir, r.testFilePath), s: (r.perfStats.end - r.perfStats.start) / 1000 }))
      .filter((r) => r.s >= 5)
      .sort((a, b) => b.s - a.s)
      .slice(0, SLOWEST_SHOWN);
    if (slowest.length > 0)
      process.stderr.write(`  slowest: ${slowest.map((r) => `${r.path} ${r.s.toFixed(0)} s`).join(", ")}\n`);
    if (results.numRuntimeErrorTestSuites > 0 && failedFiles.length === 0)
      process.stderr.write("  a test file could not run: see above\n");
  }

  getLastError() {
    return undefined;
  }
}

module.exports = QuietReporter;
