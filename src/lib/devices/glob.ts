/**
 * The globs of DeviceClass match rules (devices.nfdctl.io). They are matched on the event loop of every
 * agent and plugin a class selects, so a match must stay cheap whatever the pattern: the cost here is
 * text length × (pattern length / 32 + 1), with no backtracking and no regular expression (one built
 * from `*a*a*a*a*a*a*a*a*a*a*a*b` takes minutes on a 40-character value).
 *
 * `*` any characters, `?` one character, `[a-z0-9_]` one of a set (`[!…]` or `[^…]` one not in it, `]`
 * first in the set is literal), `\x` a literal x. Two flavours:
 * - path, for devName (a path below /dev): `*`, `?` and sets never match `/`, so `input/*` is one level,
 *   as in a shell; `**` matches any characters, `/` included (as in rsync), so `dvb/**` is every depth.
 * - text, for property and attribute values ("USB 10/100 LAN"): `*` (and `**`) matches any characters.
 * Extglobs, braces, POSIX classes and a leading `!` mean something else in other glob dialects: globProblem
 * refuses them, saying what to write. The matcher reads such characters, and an unclosed `[`, as literals.
 */

export type GlobFlavour = 'path' | 'text'

// Token kinds. STAR and ANY compare greater than the one-character kinds.
const CHAR = 0 // one given character
const ONE = 1 // `?`
const SET = 2 // `[...]`
const STAR = 3 // `*` in a path glob: any characters but `/`
const ANY = 4 // `*` in a text glob, `**` in a path glob: any characters

interface Token {
  readonly kind: number
  readonly code?: number
  /** Inclusive [low, high] code point pairs. */
  readonly ranges?: readonly number[]
  readonly negated?: boolean
}

const code = (c: string): number => c.codePointAt(0)!
const [BACKSLASH, SLASH, STAR_SIGN, QUESTION, OPEN_SET, CLOSE_SET, BANG, CARET, DASH, COLON, OPEN_PAREN, OPEN_BRACE, CLOSE_BRACE] = Array.from('\\/*?[]!^-:({}', code)
const EXTGLOB_SIGNS = new Set(Array.from('+@!*?', code))

const literal = (c: number): Token => ({code: c, kind: CHAR})

/** What is wrong with a glob, in one line with what to write instead; undefined when it is fine. */
export function globProblem(pattern: string): string | undefined {
  return parse(pattern, 'text').problem
}

/** A test of a whole text against the glob. Compile once, test often: each test is linear in the text. */
export function compileGlob(pattern: string, flavour: GlobFlavour): (text: string) => boolean {
  const {tokens} = parse(pattern, flavour)
  if (tokens.every((t) => t.kind === CHAR)) {
    const exact = tokens.map((t) => String.fromCodePoint(t.code!)).join('')
    return (text) => text === exact
  }
  return automaton(tokens, flavour === 'path')
}

function parse(pattern: string, flavour: GlobFlavour): {tokens: Token[]; problem?: string} {
  const chars = Array.from(pattern, code)
  const tokens: Token[] = []
  let problem: string | undefined
  const report = (message: string): void => {
    problem ??= message
  }
  for (let i = 0; i < chars.length; i++) {
    const c = chars[i]
    if (c === BACKSLASH) {
      if (i + 1 === chars.length) report('it ends in a lone "\\"; write \\\\ for a literal "\\"')
      tokens.push(literal(chars[++i] ?? BACKSLASH))
      continue
    }
    let end = i
    if (c === STAR_SIGN) while (chars[end + 1] === STAR_SIGN) end++
    if (EXTGLOB_SIGNS.has(c) && chars[end + 1] === OPEN_PAREN) {
      const sign = String.fromCodePoint(c)
      report(`extglobs such as "${sign}(...)" are not supported; write one match rule per alternative, or \\( for a literal "("`)
    } else if (i === 0 && c === BANG) {
      report('a leading "!" (negation in other glob dialects) is not supported; match what you want instead, or write \\! for a literal "!"')
    }
    if (c === STAR_SIGN) {
      tokens.push({kind: flavour === 'path' && end === i ? STAR : ANY})
      i = end
    } else if (c === QUESTION) tokens.push({kind: ONE})
    else if (c === OPEN_SET) {
      const set = parseSet(chars, i + 1)
      if (set === undefined) {
        report('"[" is never closed; close it with "]" or write \\[ for a literal "["')
        tokens.push(literal(c))
        continue
      }
      if (set.problem !== undefined) report(set.problem)
      tokens.push(set.token)
      i = set.end
    } else {
      if (c === CLOSE_SET) report('"]" has no opening "["; write \\] for a literal "]"')
      if (c === OPEN_BRACE) {
        const close = chars.indexOf(CLOSE_BRACE, i)
        const braces = close < 0 || close - i > 40 ? '' : ` such as ${String.fromCodePoint(...chars.slice(i, close + 1))}`
        report(`braces${braces} are not supported; write one match rule per alternative, or \\{ for a literal "{"`)
      }
      if (c === CLOSE_BRACE) report('braces are not supported; write \\} for a literal "}"')
      tokens.push(literal(c))
    }
  }
  return {problem, tokens}
}

/** The set whose content starts at `start` (after the `[`), or undefined when no `]` closes it. */
function parseSet(chars: readonly number[], start: number): {token: Token; end: number; problem?: string} | undefined {
  let i = start
  const negated = chars[i] === BANG || chars[i] === CARET
  if (negated) i++
  const ranges: number[] = []
  let problem: string | undefined
  for (let first = true; i < chars.length; first = false, i++) {
    if (chars[i] === CLOSE_SET && !first) return {end: i, problem, token: {kind: SET, negated, ranges}}
    if (chars[i] === OPEN_SET && chars[i + 1] === COLON) problem ??= 'POSIX classes such as [[:digit:]] are not supported; list the characters instead, such as [0-9]'
    if (chars[i] === BACKSLASH && i + 1 < chars.length) i++
    const low = chars[i]
    let high = low
    if (chars[i + 1] === DASH && i + 2 < chars.length && chars[i + 2] !== CLOSE_SET) {
      i += 2
      if (chars[i] === BACKSLASH && i + 1 < chars.length) i++
      high = chars[i]
      if (high < low) {
        const [from, to] = [String.fromCodePoint(low), String.fromCodePoint(high)]
        problem ??= `the range "${from}-${to}" in [...] is backwards and matches nothing; write "${to}-${from}"`
      }
    }
    ranges.push(low, high)
  }
  return undefined
}

/**
 * The glob as a nondeterministic automaton, run over the text once with its states as bits (Shift-And):
 * state j means the first j tokens matched what was read so far. Each character moves all states at once
 * with a few operations per 32 tokens: one-character tokens that take it shift their state on, stars keep
 * theirs, and a live star also makes the state after it live (it may match nothing; no two stars are
 * adjacent, a run of `*` being one token). So a match costs text length × (tokens / 32 + 1) steps.
 */
function automaton(tokens: readonly Token[], path: boolean): (text: string) => boolean {
  const m = tokens.length
  const words = (m >>> 5) + 1 // bits 0..m; bit m is the end: every token matched
  const bits = (): Uint32Array => new Uint32Array(words)
  const setBit = (mask: Uint32Array, j: number): void => {
    mask[j >>> 5] |= 1 << (j & 31)
  }
  const stars = bits() // STAR and ANY
  const anys = bits() // ANY only: it keeps its state on a `/` too
  for (const [j, t] of tokens.entries()) {
    if (t.kind >= STAR) setBit(stars, j)
    if (t.kind === ANY) setBit(anys, j)
  }
  // The one-character tokens that take a character, by character: computed on first sight, and kept
  // for the first few hundred characters seen (bounded memory, whatever the texts).
  const takers = new Map<number, Uint32Array>()
  const takersOf = (c: number): Uint32Array => {
    const known = takers.get(c)
    if (known) return known
    const mask = bits()
    for (const [j, t] of tokens.entries()) if (t.kind < STAR && takes(t, c, path)) setBit(mask, j)
    if (takers.size < 256) takers.set(c, mask)
    return mask
  }
  const [endWord, endBit] = [m >>> 5, 1 << (m & 31)]
  const endsOnAny = tokens[m - 1].kind === ANY // once the end is live, whatever follows matches
  // Literals before the first and after the last wildcard are compared as strings: most globs are a
  // literal and a star (ttyUSB*), and the automaton then starts after the prefix.
  let first = 0
  while (first < m && tokens[first].kind === CHAR) first++
  let last = m
  while (last > first && tokens[last - 1].kind === CHAR) last--
  const spell = (from: number, to: number): string =>
    tokens
      .slice(from, to)
      .map((t) => String.fromCodePoint(t.code!))
      .join('')
  const [prefix, suffix] = [spell(0, first), spell(last, m)]
  const tokenBits = bits() // 0..m-1: the end is no token
  for (let j = 0; j < m; j++) setBit(tokenBits, j)

  /**
   * Where in the text, from `from` on, the live states can next change, or -1 for nowhere, or undefined
   * when that cannot be told cheaply. It can be told when every live state is a star or follows a live
   * star, so no other character ends it, and the states that a character would add wait on literals:
   * then the text is searched for those (and a `/`, which ends a STAR) instead of read one by one.
   */
  const nextChange = (live: Uint32Array, text: string, from: number): number | undefined => {
    const awaited = new Set<string>()
    let starCarry = 0
    for (let w = 0; w < words; w++) {
      const liveStars = live[w] & stars[w]
      const afterStars = (liveStars << 1) | starCarry
      starCarry = liveStars >>> 31
      if ((live[w] & ~stars[w] & ~afterStars) !== 0) return undefined
      if (path && (liveStars & ~anys[w]) !== 0) awaited.add('/')
      const nextLive = (live[w] >>> 1) | (w + 1 < words ? live[w + 1] << 31 : 0)
      for (let waiting = live[w] & ~stars[w] & ~nextLive & tokenBits[w]; waiting !== 0; waiting &= waiting - 1) {
        const t = tokens[(w << 5) + 31 - Math.clz32(waiting & -waiting)]
        if (t.kind !== CHAR || awaited.size > 3) return undefined
        awaited.add(String.fromCodePoint(t.code!))
      }
    }
    let at = -1
    for (const literal of awaited) {
      const found = text.indexOf(literal, from)
      if (found >= 0 && (at < 0 || found < at)) at = found
    }
    return at
  }

  // One set of buffers per glob: a match is synchronous and never re-entered.
  let live = bits()
  let next = bits()

  return (text) => {
    if (!text.startsWith(prefix) || !text.endsWith(suffix)) return false
    live.fill(0)
    setBit(live, first)
    if (first < m && tokens[first].kind >= STAR) setBit(live, first + 1)
    let unknown = false
    for (let k = prefix.length; k < text.length; k++) {
      if (endsOnAny && (live[endWord] & endBit) !== 0) return true
      let c = text.charCodeAt(k)
      if (c >= 0xd8_00 && c <= 0xdb_ff && k + 1 < text.length) {
        const trail = text.charCodeAt(k + 1)
        if (trail >= 0xdc_00 && trail <= 0xdf_ff) {
          c = 0x1_00_00 + ((c - 0xd8_00) << 10) + (trail - 0xdc_00)
          k++
        }
      }
      const taking = takersOf(c)
      const keep = path && c === SLASH ? anys : stars // STAR never takes a `/`
      let carry = 0
      let starCarry = 0
      let any = 0
      let changed = 0
      for (let w = 0; w < words; w++) {
        const moved = live[w] & taking[w]
        let on = (moved << 1) | carry | (live[w] & keep[w])
        carry = moved >>> 31
        const starsOn = on & stars[w]
        on |= (starsOn << 1) | starCarry
        starCarry = starsOn >>> 31
        next[w] = on
        any |= on
        changed |= on ^ live[w]
      }
      if (any === 0) return false
      const read = live
      live = next
      next = read
      if (changed !== 0) unknown = false
      else if (!unknown) {
        // A character that changed nothing: perhaps nothing will until some literal.
        const at = nextChange(live, text, k + 1)
        if (at === -1) break
        if (at === undefined)
          unknown = true // not until the live states change
        else k = at - 1
      }
    }
    return (live[endWord] & endBit) !== 0
  }
}

/** Whether a one-character token takes c; in a path glob only a literal takes a `/`. */
function takes(t: Token, c: number, path: boolean): boolean {
  if (t.kind === CHAR) return t.code === c
  if (path && c === SLASH) return false
  if (t.kind === ONE) return true
  const ranges = t.ranges!
  let found = false
  for (let r = 0; r < ranges.length && !found; r += 2) found = c >= ranges[r] && c <= ranges[r + 1]
  return found !== t.negated
}
