// Shell text the relay prints for agents to paste (the recipe, the join and landing pages,
// the share block): every URL in it is one single-quoted word, so that nothing in an address
// (a Host header included) can end the word or start another command.

/** `text` as one single-quoted POSIX shell word. */
export const shellQuote = (text: string) => `'${text.replace(/'/g, `'\\''`)}'`;
