import {expect} from 'chai'

import {
  compileDeviceProgram,
  decodeInstructions,
  decompileDeviceProgram,
  deviceAccess,
  deviceType,
  emulateRules,
  encodeInstructions,
  ociDeviceRules,
  rulesWithout,
  type DeviceProgramRule,
  type EmulatedRules,
} from '../../../src/lib/runtime/device-program.js'
import {runDeviceProgram} from '../../../harness/devices/bpf-interpreter.js'
import {ruleOf, runcDeviceRules} from '../../../harness/devices/device-programs.js'

const rule = ruleOf
const rules = (...texts: string[]): DeviceProgramRule[] => texts.map(rule)
const show = (e: EmulatedRules): string[] => [`default ${e.defaultAllow ? 'allow' : 'deny'}`, ...e.rules.map((r) => `${r.allow ? 'allow' : 'deny'} ${r.type} ${r.major}:${r.minor} ${r.access}`)]

/** What a program for these rules must answer, stated without instructions: the first matching rule decides. */
function expected(emulated: EmulatedRules, request: {type: 'b' | 'c'; access: string; major: number; minor: number}): number {
  for (const r of emulated.rules) {
    const matches =
      r.type === request.type && [...request.access].every((c) => r.access.includes(c)) && (r.major === '*' || r.major === request.major) && (r.minor === '*' || r.minor === request.minor)
    if (matches) return r.allow ? 1 : 0
  }
  return emulated.defaultAllow ? 1 : 0
}
const accessSets = ['r', 'w', 'm', 'rw', 'rm', 'wm', 'rwm']
const bits = (access: string): number => [...access].reduce((b, c) => b | deviceAccess[c as 'r'], 0)

// What containerd 1.6's CRI puts in a container's spec (no linux.devices), and what runc 1.1 makes of it.
const criSpec = {linux: {resources: {devices: [{access: 'rwm', allow: false}]}}}
const runtimeDefault = runcDeviceRules(criSpec)
const allows = (input: readonly DeviceProgramRule[], type: 'b' | 'c', major: number, minor: number, access: string): boolean =>
  runDeviceProgram(compileDeviceProgram(input), {access: bits(access), major, minor, type: deviceType[type]}) === 1

describe('device programs for cgroup v2 (the rule compiler)', function () {
  describe("emulateRules: runc's emulator of the v1 controller, which it applies first", function () {
    const cases: Array<[string, DeviceProgramRule[], string[]]> = [
      ["no rules: nothing allowed (runc starts from deny-all, not v1's allow-all)", [], ['default deny']],
      ['an allow alone: nothing allowed but it', rules('allow c 1:3 rwm'), ['default deny', 'allow c 1:3 rwm']],
      ['deny a: nothing allowed', rules('deny a'), ['default deny']],
      ['allow a: everything allowed', rules('allow a'), ['default allow']],
      ['an allow-list in order', rules('deny a', 'allow c 1:3 rwm', 'allow b 7:* r'), ['default deny', 'allow c 1:3 rwm', 'allow b 7:* r']],
      ['an allow for the same device merges its access', rules('deny a', 'allow b 7:0 r', 'allow b 7:0 w'), ['default deny', 'allow b 7:0 rw']],
      ['a deny takes access from the exact exception', rules('deny a', 'allow b 7:0 rwm', 'deny b 7:0 w'), ['default deny', 'allow b 7:0 rm']],
      ['a deny of all its access removes it', rules('deny a', 'allow b 7:0 rw', 'deny b 7:0 rwm'), ['default deny']],
      ['a deny beside a wildcard allow of other access is no hole', rules('deny a', 'allow c 1:* r', 'allow c 1:3 w', 'deny c 1:3 w'), ['default deny', 'allow c 1:* r']],
      ['a deny of the wildcard exception itself takes from it', rules('deny a', 'allow c 1:* rw', 'deny c 1:* r'), ['default deny', 'allow c 1:* w']],
      ['a deny on a device of no exception changes nothing', rules('deny a', 'allow c 1:3 r', 'deny c 1:5 r'), ['default deny', 'allow c 1:3 r']],
      ['allow a resets to a deny-list', rules('deny a', 'allow c 1:3 rwm', 'allow a'), ['default allow']],
      ['a deny-list in order', rules('allow a', 'deny c 10:200 rwm', 'deny b 8:* w'), ['default allow', 'deny c 10:200 rwm', 'deny b 8:* w']],
      ['a deny without allow a first is a no-op on deny-all', rules('deny c 10:200 rwm'), ['default deny']],
      ['an allow removes access from a deny-list exception', rules('allow a', 'deny c 10:200 rwm', 'allow c 10:200 r'), ['default allow', 'deny c 10:200 wm']],
      ['a later deny a forgets everything before it', rules('allow c 1:3 r', 'deny b 8:0 r', 'deny a', 'allow c 1:5 r'), ['default deny', 'allow c 1:5 r']],
      ['access is normalised to r, w, m order', rules('deny a', 'allow c 1:3 mwr'), ['default deny', 'allow c 1:3 rwm']],
      ['an empty access grants nothing', [{access: '', allow: true, major: 1, minor: 3, type: 'c'}], ['default deny']],
      ['an empty access takes nothing, and punches no hole', [rule('deny a'), rule('allow c 1:* rw'), {access: '', allow: false, major: 1, minor: 3, type: 'c'}], ['default deny', 'allow c 1:* rw']],
      ['an empty access denies nothing on a deny-list', [rule('allow a'), {access: '', allow: false, major: 1, minor: 3, type: 'c'}], ['default allow']],
    ]
    for (const [name, input, output] of cases) it(name, () => expect(show(emulateRules(input))).to.deep.equal(output))

    it('refuses, as runc does, a rule that would punch a hole in a wildcard exception (v1 would ignore it)', function () {
      const holes: Array<[string, DeviceProgramRule[]]> = [
        ['minor wildcard', rules('deny a', 'allow c 1:* rwm', 'deny c 1:3 r')],
        ['major wildcard', rules('deny a', 'allow b *:0 rw', 'deny b 7:0 w')],
        ['both wildcards', rules('deny a', 'allow b *:* m', 'deny b 7:0 rm')],
        ['beside an exact exception', rules('deny a', 'allow c 1:* r', 'allow c 1:3 rw', 'deny c 1:3 rw')],
        ['on a deny-list', rules('allow a', 'deny c 1:* rw', 'allow c 1:3 r')],
        ["after the runtime's defaults (mknod of every device)", [...runtimeDefault, rule('deny c 1:3 m')]],
      ]
      for (const [name, input] of holes) expect(() => emulateRules(input), name).to.throw(/cannot punch a hole in the wildcard rule "(allow|deny) [bc] [*\d]+:[*\d]+ [rwm]+"/)
      expect(() => emulateRules(rules('deny a', 'allow c 1:* rwm', 'deny c 1:3 r'))).to.throw('device rule "deny c 1:3 r" cannot punch a hole in the wildcard rule "allow c 1:* rwm"')
    })

    it('refuses a device number the kernel cannot have (major over 12 bits, minor over 20)', function () {
      expect(() => emulateRules(rules('deny a', 'allow c 4096:0 r'))).to.throw('major must be 0-4095')
      expect(() => emulateRules(rules('deny a', 'allow c 1:1048576 r'))).to.throw('minor must be 0-1048575')
    })

    it('refuses access that is not a subset of rwm', function () {
      expect(() => emulateRules(rules('deny a', 'allow c 1:3 rwx'))).to.throw('subset of rwm')
    })
  })

  describe('ociDeviceRules: linux.resources.devices as rules', function () {
    it('fills in type a, wildcards, and no access for what is missing', function () {
      expect(ociDeviceRules([{allow: false}, {access: 'r', allow: true, major: 7, type: 'b'}])).to.deep.equal([
        {access: '', allow: false, major: '*', minor: '*', type: 'a'},
        {access: 'r', allow: true, major: 7, minor: '*', type: 'b'},
      ])
    })

    it('a rule without access grants nothing (not rwm)', function () {
      const input = [
        rule('deny a'),
        ...ociDeviceRules([
          {allow: true, major: 1, minor: 3, type: 'c'},
          {access: '', allow: true, major: 1, minor: 5, type: 'c'},
        ]),
      ]
      for (const access of accessSets) {
        expect(allows(input, 'c', 1, 3, access), `c 1:3 ${access}`).to.equal(false)
        expect(allows(input, 'c', 1, 5, access), `c 1:5 ${access}`).to.equal(false)
      }
    })
  })

  describe("rulesWithout: a program read back, to be built again without the agent's devices", function () {
    // Opening it (mknod of any device is runc's rule beside it).
    const tunAccess = (input: readonly DeviceProgramRule[]): boolean[] => ['r', 'w', 'rw'].map((access) => allows(input, 'c', 10, 200, access))

    it('runc 1.2.0-1.2.3 attached no /dev/net/tun: the program rebuilt with a class device allows it and never tun', function () {
      const attached = emulateRules(runcDeviceRules(criSpec, {tun: false}))
      const rebuilt = [...rulesWithout(attached, new Set()), rule('allow b 7:390 rw')]
      expect(tunAccess(rebuilt), 'c 10:200 for r, w, rw').to.deep.equal([false, false, false])
      expect(allows(rebuilt, 'b', 7, 390, 'rw'), 'the class device').to.equal(true)
      expect(emulateRules(rebuilt)).to.deep.equal({defaultAllow: false, rules: [...attached.rules, rule('allow b 7:390 rw')]})
      // The same with runc 1.1's rules: tun stays, as that runtime gave it.
      expect(tunAccess([...rulesWithout(emulateRules(runtimeDefault), new Set()), rule('allow b 7:390 rw')])).to.deep.equal([true, true, true])
    })

    it('leaves out the specific allow rules of the devices named, and keeps everything else exactly', function () {
      const attached = emulateRules(rules('deny a', 'allow c 1:3 rwm', 'allow b 7:* r', 'allow b 7:390 rw', 'allow c 188:0 r', 'allow b *:5 m', 'allow c 10:200 rwm'))
      expect(show(emulateRules(rulesWithout(attached, new Set(['b7:390', 'c188:0', 'b7:*', 'c10:201']))))).to.deep.equal([
        'default deny',
        'allow c 1:3 rwm',
        'allow b 7:* r',
        'allow b *:5 m',
        'allow c 10:200 rwm',
      ])
    })

    it("a deny-list program (a privileged container's) stays one: its default first, its denies after, none left out", function () {
      const attached = emulateRules(rules('allow a', 'deny c 10:200 rwm', 'deny b 8:* w'))
      const rebuilt = rulesWithout(attached, new Set(['c10:200']))
      expect(rebuilt[0]).to.deep.equal(rule('allow a *:* rwm'))
      expect(emulateRules(rebuilt)).to.deep.equal(attached)
    })

    it('with nothing left out, compiles to the program it was read from', function () {
      for (const input of [runtimeDefault, runcDeviceRules(criSpec, {tun: false}), rules('deny a'), [], rules('allow a'), rules('deny a', 'allow b 259:1048575 r', 'allow c *:7 w')]) {
        const attached = decompileDeviceProgram(compileDeviceProgram(input))!
        expect(compileDeviceProgram(rulesWithout(attached, new Set()))).to.deep.equal(compileDeviceProgram(input))
      }
    })
  })

  describe('compileDeviceProgram, run by an interpreter of the instructions', function () {
    const shapes: Array<[string, DeviceProgramRule[]]> = [
      ['the runtime default with hot-plugged devices', [...runtimeDefault, ...rules('allow b 7:390 rw', 'allow b 7:391 r')]],
      [
        'every type, access and wildcard shape',
        [
          rule('deny a'),
          ...(['b', 'c'] as const).flatMap((t) =>
            accessSets.flatMap((a, i) => [rule(`allow ${t} ${10 + i}:${20 + i} ${a}`), rule(`allow ${t} ${30 + i}:* ${a}`), rule(`allow ${t} *:${40 + i} ${a}`)]),
          ),
          rule('allow c *:* m'),
        ],
      ],
      ['a deny-list', rules('allow a', 'deny c 10:200 rwm', 'deny b 8:* w', 'deny c *:7 r')],
      ['allow-list rules without deny a first', rules('allow c 1:3 rwm', 'allow b 7:* r')],
      ['no rules at all', []],
      ['deny everything', rules('deny a')],
      ['the largest device numbers (major 12 bits, minor 20 bits)', rules('deny a', 'allow c 4095:1048575 rw', 'allow b 259:1048575 r')],
    ]
    for (const [name, input] of shapes) {
      it(`${name}: the same verdict as the rules for every type, access and device asked`, function () {
        const emulated = emulateRules(input)
        const program = compileDeviceProgram(input)
        const numbers = new Set([0, 1, 3, 5, 7, 8, 136, 390, 391, 4095, 1048575, 259])
        for (const r of emulated.rules) for (const n of [r.major, r.minor]) if (n !== '*') numbers.add(n).add(n + 1)
        let checked = 0
        for (const type of ['b', 'c'] as const)
          for (const access of accessSets)
            for (const major of numbers)
              for (const minor of numbers) {
                const verdict = runDeviceProgram(program, {access: bits(access), major, minor, type: deviceType[type]})
                const want = expected(emulated, {access, major, minor, type})
                if (verdict !== want) expect.fail(`${type} ${major}:${minor} ${access}: program says ${verdict}, rules say ${want}`)
                checked++
              }
        expect(checked).to.be.greaterThan(100)
      })
    }

    it('the check can fail: a program with one wrong jump or verdict disagrees with the rules somewhere', function () {
      const input = [...runtimeDefault, ...rules('allow b 7:390 rw')]
      const emulated = emulateRules(input)
      const program = compileDeviceProgram(input)
      const disagrees = (broken: typeof program): boolean => {
        for (const type of ['b', 'c'] as const)
          for (const access of accessSets)
            for (const [major, minor] of [
              [1, 3],
              [1, 5],
              [7, 390],
              [7, 391],
              [136, 4],
              [8, 0],
            ]) {
              if (runDeviceProgram(broken, {access: bits(access), major, minor, type: deviceType[type]}) !== expected(emulated, {access, major, minor, type})) return true
            }
        return false
      }
      expect(disagrees(program)).to.equal(false)
      expect(disagrees(program.map((i, n) => (n === program.length - 2 ? {...i, imm: 1} : i))), 'default allow').to.equal(true)
      const lastRule = program.length - 4 // the verdict of b 7:390
      expect(disagrees(program.map((i, n) => (n === lastRule ? {...i, imm: 0} : i))), 'a rule that denies').to.equal(true)
      expect(disagrees(program.map((i, n) => (n === 6 ? {...i, imm: deviceType.b} : i))), 'the first rule for block devices').to.equal(true)
    })

    it('no rules compile to deny-all: the prologue, then return 0', function () {
      const program = compileDeviceProgram([])
      expect(program).to.have.length(6 + 2)
      expect(program.at(-2)).to.deep.include({code: 0xb4, dst: 0, imm: 0})
    })

    it("has runc's block layout: a 6-instruction prologue, one block per exception, the default at the end", function () {
      const program = compileDeviceProgram(rules('deny a', 'allow c 1:3 rwm', 'allow b 7:* r'))
      // prologue 6; c 1:3 rwm: type, major, minor jumps + verdict 2 = 5; b 7:* r: type, access (3), major + 2 = 7; tail 2
      expect(program).to.have.length(6 + 5 + 7 + 2)
      expect(program.at(-2)).to.deep.include({code: 0xb4, dst: 0, imm: 0}) // default deny
      expect(program[6]).to.deep.include({code: 0x55, dst: 2, imm: deviceType.c, off: 4})
    })

    it('encodes to 8 bytes an instruction and decodes back', function () {
      const program = compileDeviceProgram(runtimeDefault)
      const bytes = encodeInstructions(program)
      expect(bytes.length).to.equal(program.length * 8)
      expect(bytes.subarray(0, 8).toString('hex')).to.equal('6112000000000000') // ldxw r2, [r1 + 0]
      expect(decodeInstructions(bytes)).to.deep.equal(program)
    })
  })

  describe('decompileDeviceProgram: what a container has, read back from its program', function () {
    it('gives back the emulated rules of every shape', function () {
      for (const input of [runtimeDefault, rules('allow a', 'deny c 10:200 rwm', 'deny b 8:* w'), rules('deny a'), [], rules('allow c 1:3 r'), rules('deny a', 'allow b 259:1048575 r')]) {
        expect(decompileDeviceProgram(compileDeviceProgram(input))).to.deep.equal(emulateRules(input))
      }
      expect(decompileDeviceProgram(compileDeviceProgram([]))).to.deep.equal({defaultAllow: false, rules: []})
    })

    it('does not recognise a program of another shape', function () {
      const program = compileDeviceProgram(runtimeDefault)
      expect(decompileDeviceProgram(program.slice(1))).to.equal(undefined)
      expect(decompileDeviceProgram([...program.slice(0, -2), {code: 0xb7, dst: 0, imm: 1, off: 0, src: 0}, program.at(-1)!])).to.equal(undefined)
      const jumpElsewhere = program.map((i, n) => (n === 6 ? {...i, off: i.off + 1} : i))
      expect(decompileDeviceProgram(jumpElsewhere)).to.equal(undefined)
    })
  })
})
