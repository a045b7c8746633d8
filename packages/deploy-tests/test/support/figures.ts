// Figures a test measures (seconds, counts): quiet by default, printed with DUET_FIGURES=1.
const wanted = process.env.DUET_FIGURES === "1";

export const figures = {
  record(group: string, name: string, value: number | string): void {
    if (wanted) process.stdout.write(`FIGURE ${group}: ${name} = ${value}\n`);
  },
};
