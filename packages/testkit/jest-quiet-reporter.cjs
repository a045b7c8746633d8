// A jest reporter for a quiet passing run: a file that passes prints nothing; a file that
// fails prints everything jest's default reporter would (its console output, then every
// failure with its diff and stack), as soon as it ends. At the end: one line of totals,
// and one line per failed file.
//
//   reporters: ["<rootDir>/../testkit/jest-quiet-reporter.cjs"], verbose: false
//
// DUET_FIGURES=1 also prints the `FIGURES <name> {json}` lines the reliability tests log
// (the measured numbers behind the README's reliability section), from passing files too.
// `npx jest --reporters=default` shows the usual per-file output.
const { relative } = require("node:path");

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

class QuietReporter {
  constructor(globalConfig) {
    this.rootDir = globalConfig.rootDir;
    this.tty = Boolean(process.stderr.isTTY);
    this.done = 0;
    this.total = 0;
  }

  onRunStart(results) {
    this.total = results.numTotalTestSuites;
  }

  onTestResult(_test, result) {
    this.done++;
    const path = relative(this.rootDir, result.testFilePath);
    const failed = result.numFailingTests > 0 || result.testExecError !== undefined || Boolean(result.failureMessage);
    if (this.tty) process.stderr.write(`\r\x1b[K[${this.done}/${this.total}] ${path}`);
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
    if (results.numRuntimeErrorTestSuites > 0 && failedFiles.length === 0)
      process.stderr.write("  a test file could not run: see above\n");
  }

  getLastError() {
    return undefined;
  }
}

module.exports = QuietReporter;
