// A progress line on stderr while the CLI waits, drawn only when stderr is a terminal so
// that piped and captured output carries nothing extra.
const FRAMES = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];

export class Spinner {
  private timer: NodeJS.Timeout | undefined;
  private frame = 0;
  private text = "";

  constructor(private readonly stream: NodeJS.WriteStream = process.stderr) {}

  get enabled(): boolean {
    return this.stream.isTTY === true;
  }

  /** Shows (or retitles) the progress line. */
  start(text: string): void {
    if (!this.enabled) return;
    this.text = text;
    if (this.timer) return;
    this.draw();
    this.timer = setInterval(() => this.draw(), 100);
    this.timer.unref();
  }

  /** Removes the progress line, e.g. before printing a message. */
  stop(): void {
    if (!this.timer) return;
    clearInterval(this.timer);
    this.timer = undefined;
    this.stream.write("\r\x1b[K");
  }

  private draw(): void {
    this.frame = (this.frame + 1) % FRAMES.length;
    this.stream.write(`\r\x1b[K${FRAMES[this.frame]} ${this.text}`);
  }
}
