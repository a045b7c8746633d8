// Numbers as C reads and writes them, where Redis (and its Lua 5.1) use the C library: strtod
// reads a score, a range bound and a Lua number; printf's %.17g writes a double Redis replies
// with or passes to a command, %.14g a Lua 5.1 number made text. JS's Number() and String()
// differ at the edges ("inf", " 5", "0x10"; 1e+17, 1e-05), and the in-process store must not.

/**
 * C's strtod on the whole text, as glibc reads it: leading spaces, a sign, inf/infinity/nan,
 * hex, decimal with an exponent. `consumed`: how many characters it read (0: no number);
 * `whole`: nothing was left over; `range`: the value overflowed to an infinity or underflowed
 * to 0 (errno ERANGE).
 */
export function strtod(text: string): { value: number; consumed: number; whole: boolean; range: boolean } {
  const match =
    /^[ \t\n\v\f\r]*([+-]?)(?:(inf(?:inity)?)|(nan(?:\([0-9A-Za-z_]*\))?)|0[xX]([0-9a-fA-F]*(?:\.[0-9a-fA-F]*)?)(?:[pP]([+-]?\d+))?|(\d*\.?\d*)(?:[eE]([+-]?\d+))?)/i.exec(
      text,
    )!;
  const [all, sign, inf, nan, hex, hexExp, decimal, decExp] = match;
  const negative = sign === "-";
  let value: number;
  let consumed = all.length;
  if (inf) value = Number.POSITIVE_INFINITY;
  else if (nan) value = Number.NaN;
  else if (hex !== undefined && /[0-9a-fA-F]/.test(hex)) {
    const [whole = "", fraction = ""] = hex.split(".");
    value = Number.parseInt(whole || "0", 16) + (fraction ? Number.parseInt(fraction, 16) / 16 ** fraction.length : 0);
    if (hexExp !== undefined) value *= 2 ** Number(hexExp);
  } else if (hex !== undefined) {
    value = 0; // "0x" alone reads the 0
    consumed = all.indexOf("0") + 1;
  } else if (decimal !== undefined && /\d/.test(decimal))
    value = Number(decimal + (decExp !== undefined ? `e${decExp}` : ""));
  else return { value: 0, consumed: 0, whole: text.length === 0, range: false };
  const range = !inf && !nan && (!Number.isFinite(value) || (value === 0 && /[1-9]/.test(hex ?? decimal ?? "")));
  return { value: negative ? -value : value, consumed, whole: consumed === text.length, range };
}

/** A double as Redis 7.0 writes one, in a reply or as a Lua number passed to a command: C's %.17g (inf and -inf by name). */
export function formatDouble(n: number): string {
  if (n === Number.POSITIVE_INFINITY) return "inf";
  if (n === Number.NEGATIVE_INFINITY) return "-inf";
  return formatG(n, 17);
}

/** C's printf %.<precision>g: the double's exact value rounded half to even (JS's toExponential and toFixed round a tie up). */
export function formatG(n: number, precision: number): string {
  if (Number.isNaN(n)) return "nan";
  if (!Number.isFinite(n)) return n > 0 ? "inf" : "-inf";
  if (n === 0) return Object.is(n, -0) ? "-0" : "0";
  const p = Math.max(precision, 1);
  const abs = Math.abs(n);
  // X, the exponent style e would write: |n|'s own (exact, not log10's estimate), plus one
  // when rounding carries it to the next power of ten.
  let exp = Math.floor(Math.log10(abs));
  while (compareExact(abs, exp) < 0) exp -= 1;
  while (compareExact(abs, exp + 1) >= 0) exp += 1;
  let digits = roundScaled(abs, p - 1 - exp);
  if (digits === 10n ** BigInt(p)) {
    exp += 1;
    digits = 10n ** BigInt(p - 1);
  }
  const text = digits.toString();
  const trim = (fraction: string) => fraction.replace(/0+$/, "");
  const sign = n < 0 ? "-" : "";
  if (exp < -4 || exp >= p) {
    const fraction = trim(text.slice(1));
    return `${sign}${text[0]}${fraction ? `.${fraction}` : ""}e${exp < 0 ? "-" : "+"}${String(Math.abs(exp)).padStart(2, "0")}`;
  }
  const whole = exp >= 0 ? text.slice(0, exp + 1) : "0";
  const fraction = trim(exp >= 0 ? text.slice(exp + 1) : "0".repeat(-exp - 1) + text);
  return `${sign}${whole}${fraction ? `.${fraction}` : ""}`;
}

/** abs as mantissa * 2^power, exactly. */
function exactParts(abs: number): { mantissa: bigint; power: number } {
  const view = new DataView(new ArrayBuffer(8));
  view.setFloat64(0, abs);
  const bits = view.getBigUint64(0);
  const exponent = Number((bits >> 52n) & 0x7ffn);
  const fraction = bits & ((1n << 52n) - 1n);
  return {
    mantissa: exponent === 0 ? fraction : fraction | (1n << 52n),
    power: exponent === 0 ? -1074 : exponent - 1075,
  };
}

/** abs * 10^shift as numerator / denominator, exactly. */
function scaled(abs: number, shift: number): [bigint, bigint] {
  const { mantissa, power } = exactParts(abs);
  let numerator = mantissa;
  let denominator = 1n;
  if (shift >= 0) numerator *= 10n ** BigInt(shift);
  else denominator *= 10n ** BigInt(-shift);
  if (power >= 0) numerator <<= BigInt(power);
  else denominator <<= BigInt(-power);
  return [numerator, denominator];
}

/** The sign of abs - 10^k, exactly. */
function compareExact(abs: number, k: number): number {
  const [numerator, denominator] = scaled(abs, -k);
  return numerator === denominator ? 0 : numerator > denominator ? 1 : -1;
}

/** round(|n| * 10^shift), half to even, on the double's exact value. */
function roundScaled(abs: number, shift: number): bigint {
  const [numerator, denominator] = scaled(abs, shift);
  let quotient = numerator / denominator;
  const twice = (numerator % denominator) * 2n;
  if (twice > denominator || (twice === denominator && quotient % 2n === 1n)) quotient += 1n;
  return quotient;
}

/** C's printf %.<digits>f: the double's exact value rounded half to even (JS's toFixed rounds 0.5 up). */
export function formatFixed(n: number, digits: number): string {
  if (!Number.isFinite(n)) return formatG(n, 1);
  const text = roundScaled(Math.abs(n), digits)
    .toString()
    .padStart(digits + 1, "0");
  const body = digits > 0 ? `${text.slice(0, -digits)}.${text.slice(-digits)}` : text;
  return (n < 0 || Object.is(n, -0) ? "-" : "") + body;
}
