// The bench commands' own flags: `--name value`, and `--env KEY=VALUE` (repeatable) for the relay.

/** The value after `--name` on the command line, or the fallback. */
export function option(name: string, fallback: string): string {
  const at = process.argv.indexOf(`--${name}`);
  return at >= 0 ? process.argv[at + 1]! : fallback;
}

/** Every `--env KEY=VALUE` on the command line, as an environment for the relay. */
export function extraEnvFromArgs(): Record<string, string> {
  const env: Record<string, string> = {};
  process.argv.forEach((arg, i) => {
    if (arg === "--env") {
      const [key, ...value] = process.argv[i + 1]!.split("=");
      env[key!] = value.join("=");
    }
  });
  return env;
}
