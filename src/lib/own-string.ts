/**
 * A copy of `text` that refers to no other string. V8 keeps a substring of 13 characters or more (from split,
 * slice, a RegExp's match) as a slice of the string it was cut from, so a short string kept for long keeps
 * all of its source alive: a mount point kept per container kept the host's whole mount table (150 KB on a
 * node with 100 pods) once for each container (docs/benchmarks.md, where the memory goes).
 */
export function ownString(text: string): string {
  return Buffer.from(text, 'utf8').toString('utf8')
}
