import {expect} from 'chai'

import {compileGlob, globProblem} from '../../../src/lib/devices/glob.js'

describe('compileGlob', () => {
  // [glob, text, matches as a path glob (devName), matches as a text glob (property and attribute values)]
  const cases: Array<[string, string, boolean, boolean]> = [
    // literals
    ['0403', '0403', true, true],
    ['0403', '04031', false, false],
    ['0403', '403', false, false],
    ['ttyusb*', 'ttyUSB0', false, false],
    ['', '', true, true],
    ['', 'a', false, false],
    ['a', '', false, false],
    // *
    ['ttyUSB*', 'ttyUSB', true, true],
    ['ttyUSB*', 'ttyUSB12', true, true],
    ['*', '', true, true],
    ['*', '.hidden', true, true],
    ['*', 'input/event3', false, true],
    ['input*', 'input/event3', false, true],
    ['input/*', 'input/event3', true, true],
    ['input/*', 'input/by-id/x', false, true],
    ['*/*', 'input/event3', true, true],
    ['*10/100*', 'USB 10/100 LAN', true, true],
    ['*Bridge*', 'CP2102 USB to UART Bridge / Serial', false, true],
    ['*Serial', 'CP2102 USB to UART Bridge / Serial', false, true],
    ['a*b*c', 'abc', true, true],
    ['a*b*c', 'axxbyyc', true, true],
    ['a*b*c', 'axxbyy', false, false],
    ['a*a', 'a', false, false],
    ['*a*a*a*b', 'aaab', true, true],
    // ** crosses / in a path glob too; in a text glob it is *
    ['dvb/**', 'dvb/adapter0/frontend0', true, true],
    ['**', 'bus/usb/001/002', true, true],
    ['**/event*', 'input/event3', true, true],
    ['**/event*', 'event3', false, false],
    ['bus/**/002', 'bus/usb/001/002', true, true],
    // ?
    ['ttyUSB?', 'ttyUSB0', true, true],
    ['ttyUSB?', 'ttyUSB10', false, false],
    ['ttyUSB?', 'ttyUSB', false, false],
    ['a?b', 'a/b', false, true],
    ['?', '', false, false],
    ['?', 'é', true, true],
    ['?', '😀', true, true],
    ['??', '😀', false, false],
    // [...]
    ['ttyUSB[0-3]', 'ttyUSB2', true, true],
    ['ttyUSB[0-3]', 'ttyUSB4', false, false],
    ['ttyUSB[0-3]', 'ttyUSB', false, false],
    ['tty[AU][CS][MB]0', 'ttyUSB0', true, true],
    ['[!0-3]', '4', true, true],
    ['[!0-3]', '2', false, false],
    ['[^0-3]', '2', false, false],
    ['[]]', ']', true, true],
    ['[!]]', ']', false, false],
    ['[!]]', 'a', true, true],
    ['[a-]', '-', true, true],
    ['[-a]', '-', true, true],
    ['[\\]]', ']', true, true],
    ['[a\\-z]', '-', true, true],
    ['[a\\-z]', 'b', false, false],
    ['[😀-😂]', '😁', true, true],
    ['a[/]b', 'a/b', false, true],
    ['a[!x]b', 'a/b', false, true],
    // escapes
    ['\\*', '*', true, true],
    ['\\*', 'a', false, false],
    ['a\\?', 'a?', true, true],
    ['a\\?', 'ab', false, false],
    ['\\[x]', '[x]', true, true],
    ['\\\\', '\\', true, true],
    ['odd\\[name', 'odd[name', true, true],
    // what globProblem refuses is read literally
    ['tty[', 'tty[', true, true],
    ['tty]', 'tty]', true, true],
    ['tty\\', 'tty\\', true, true],
    ['+(a)', '+(a)', true, true],
    ['+(a)', 'a', false, false],
    ['{a,b}', 'a', false, false],
    ['{a,b}', '{a,b}', true, true],
    ['!x*', 'y', false, false],
    ['!x*', '!xy', true, true],
  ]
  for (const [glob, text, asPath, asText] of cases) {
    it(`${JSON.stringify(glob)} against ${JSON.stringify(text)}: path ${asPath}, text ${asText}`, () => {
      expect(compileGlob(glob, 'path')(text), 'as a path glob').to.equal(asPath)
      expect(compileGlob(glob, 'text')(text), 'as a text glob').to.equal(asText)
    })
  }

  it('a compiled glob gives the same answers when used again', () => {
    const test = compileGlob('*a?[bc]*d', 'text')
    const texts = ['xxabcd', 'aabcd', 'abd', 'a/bXd', 'abbd']
    const first = texts.map(test)
    expect(texts.map(test)).to.deep.equal(first)
    expect(first).to.deep.equal([true, true, false, true, true])
  })
})

describe('compileGlob cost: linear in the text, whatever the pattern', () => {
  /** The best of five runs, so that a busy machine's scheduling does not count; each run must answer `expected`. */
  function bestOfFive(test: (text: string) => boolean, text: string, expected: boolean): number {
    let best = Number.POSITIVE_INFINITY
    for (let run = 0; run < 5; run++) {
      const start = performance.now()
      expect(test(text)).to.equal(expected)
      best = Math.min(best, performance.now() - start)
    }
    return best
  }

  // picomatch turned the first two into backtracking regular expressions: 81 s on a 40-character
  // ID_MODEL, 5.8 s on 28 characters (issue 24). Here each matches in under 1 ms, with or without the
  // optimizing compiler: the texts are searched for the literal the stars wait on.
  const stars60 = '*a'.repeat(60)
  const pathological: Array<[string, string, string, 'path' | 'text', boolean]> = [
    ['*a*a*a*a*a*a*a*a*a*a*a*b against 40 characters', '*a*a*a*a*a*a*a*a*a*a*a*b', 'a'.repeat(40), 'text', false],
    ['the same as a path glob', '*a*a*a*a*a*a*a*a*a*a*a*b', 'a'.repeat(40), 'path', false],
    ['+(+(a))b against 28 characters', '+(+(a))b', 'a'.repeat(28), 'text', false],
    ['60 stars against 10 kB', `${stars60}*b`, 'a'.repeat(10_000), 'text', false],
    ['60 stars against 10 kB that match at the very end', `${stars60}*b`, `${'a'.repeat(10_000)}b`, 'text', true],
    ['60 stars against 10 kB without the literal they wait for', `${stars60}*b*`, 'a'.repeat(10_000), 'text', false],
    ['60 path stars against 10 kB', `${stars60}*b*`, 'a'.repeat(10_000), 'path', false],
  ]
  for (const [name, glob, text, flavour, expected] of pathological) {
    it(`${name}: under 1 ms`, () => {
      const best = bestOfFive(compileGlob(glob, flavour), text, expected)
      expect(best, `${best.toFixed(3)} ms`).to.be.below(1)
    })
  }

  // Where no shortcut applies (no literal to wait for), a match reads every character, each in a few
  // operations per 32 tokens. The most a class can ask: a 256-character glob against a 4 kB attribute
  // (a sysfs page). nfdctl runs without the optimizing compiler (--no-opt): about 10 ms there.
  const unbounded: Array<[string, string, string, 'path' | 'text']> = [
    ['60 stars and a set against 4 kB', `${stars60}*[b]`, 'a'.repeat(4096), 'text'],
    ['a 256-character glob of ? against 4 kB', `*${'?'.repeat(254)}[b]`, 'a'.repeat(4096), 'text'],
    ['a 256-character glob of sets against 4 kB', `*${'[a]'.repeat(85)}`, `${'a'.repeat(4095)}b`, 'text'],
    ['a 256-character path glob against 4 kB of path', `*${'[!b]/'.repeat(50)}[b]`, 'a/'.repeat(2048), 'path'],
    ['** and 60 path stars against 4 kB of path', `**/${stars60}*b*`, 'a/'.repeat(2048), 'path'],
  ]
  for (const [name, glob, text, flavour] of unbounded) {
    it(`${name}: under 50 ms`, () => {
      const best = bestOfFive(compileGlob(glob, flavour), text, false)
      expect(best, `${best.toFixed(3)} ms`).to.be.below(50)
    })
  }
})

describe('globProblem', () => {
  const cases: Array<[string, string | undefined]> = [
    ['ttyUSB*', undefined],
    ['tty[A-Z][!0-3]?[^/]', undefined],
    ['dvb/**', undefined],
    ['*a*a*a*a*a*a*a*a*a*a*a*b', undefined],
    ['odd\\[name', undefined],
    ['a\\(b\\)', undefined],
    ['(a)', undefined],
    ['a!(b', 'extglobs such as "!(...)" are not supported; write one match rule per alternative, or \\( for a literal "("'],
    ['+(+(a))b', 'extglobs such as "+(...)"'],
    ['tty@(USB|ACM)0', 'extglobs such as "@(...)"'],
    ['*(Generic)*', 'extglobs such as "*(...)"'],
    ['**(a)', 'extglobs such as "*(...)"'],
    ['?(a)', 'extglobs such as "?(...)"'],
    ['tty{USB,ACM}', 'braces such as {USB,ACM} are not supported; write one match rule per alternative, or \\{ for a literal "{"'],
    ['tty{USB,ACM', 'braces are not supported; write one match rule per alternative, or \\{ for a literal "{"'],
    ['tty}', 'braces are not supported; write \\} for a literal "}"'],
    ['tty\\{a,b\\}', undefined],
    ['!ttyS*', 'a leading "!" (negation in other glob dialects) is not supported; match what you want instead, or write \\! for a literal "!"'],
    ['\\!ttyS*', undefined],
    ['a!b', undefined],
    ['ttyUSB[', '"[" is never closed; close it with "]" or write \\[ for a literal "["'],
    ['ttyUSB[]', '"[" is never closed'],
    ['tty]', '"]" has no opening "["; write \\] for a literal "]"'],
    ['[[:digit:]]', 'POSIX classes such as [[:digit:]] are not supported; list the characters instead, such as [0-9]'],
    ['[9-0]', 'the range "9-0" in [...] is backwards and matches nothing; write "0-9"'],
    ['tty\\', 'it ends in a lone "\\"; write \\\\ for a literal "\\"'],
    ['', undefined],
  ]
  for (const [glob, problem] of cases) {
    it(`${JSON.stringify(glob)}: ${problem ?? 'fine'}`, () => {
      if (problem === undefined) expect(globProblem(glob)).to.equal(undefined)
      else expect(globProblem(glob)).to.be.a('string').and.contain(problem)
    })
  }

  it('names the first problem only, in one line', () => {
    const problem = globProblem('a{b}[c')
    expect(problem).to.match(/^braces such as \{b\}/)
    expect(problem).to.not.contain('\n')
  })
})
