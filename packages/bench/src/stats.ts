// Percentiles and medians over plain arrays: a run holds at most a few hundred thousand
// samples, so sorting them costs less than a histogram dependency.

/** The p-th percentile (0..100) by nearest rank; NaN for no samples. */
export function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank - 1))]!;
}

export function summarize(samples: number[]): { count: number; p50: number; p99: number; max: number } {
  const sorted = Float64Array.from(samples).sort();
  const list = Array.from(sorted);
  return {
    count: list.length,
    p50: percentile(list, 50),
    p99: percentile(list, 99),
    max: list.length ? list[list.length - 1]! : Number.NaN,
  };
}

export function median(values: number[]): number {
  const finite = values.filter(Number.isFinite).sort((a, b) => a - b);
  if (finite.length === 0) return Number.NaN;
  const mid = finite.length >> 1;
  return finite.length % 2 ? finite[mid]! : (finite[mid - 1]! + finite[mid]!) / 2;
}

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
