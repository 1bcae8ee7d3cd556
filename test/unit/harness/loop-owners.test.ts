import {readdir, readFile} from 'node:fs/promises'
import {join, relative} from 'node:path'
import {fileURLToPath} from 'node:url'

import {expect} from 'chai'

import {loopOwners} from '../../../harness/devices/loop-owners.js'

// Loop devices are the shared kernel's: each test file, benchmark and the demo adds them only at the indexes
// harness/devices/loop-owners.ts gives it, so what one run leaves behind meets no other owner. Held by reading
// the sources as the existing files write loop indexes: literals in the calls that add a device, in names of
// loop devices (`loop390`, a class's `loop39[0-9]`, a rule's `7:390`), in index variables and random picks.
const repo = fileURLToPath(new URL('../../..', import.meta.url))
type Ranges = Readonly<Record<string, ReadonlyArray<readonly [number, number]>>>

/** Whether a source adds loop devices itself (directly, through BackedLoops or the fault storm, or losetup). */
function addsLoopDevices(source: string): boolean {
  return /\baddLoopDevice\(|\bloops\.add\(|\.addWithFileSystem\(|\bloopControlAsync\(|\bnew FaultStorm\(|'losetup', \[`\/dev\/loop/.test(source)
}

const digitClass = (text: string): string[] =>
  [...text.matchAll(/(\d)(?:-(\d))?/g)].flatMap(([, from, to]) => Array.from({length: Number(to ?? from) - Number(from) + 1}, (_, i) => String(Number(from) + i)))

/** The loop indexes a source names (those below 8, the host's own loop0-7, left out). */
function loopIndexesIn(source: string): number[] {
  const found: number[] = []
  for (const [, prefix, classes] of source.matchAll(/\bloop(\d+)((?:\[[\d-]+\])*)(?![\d[])/g)) {
    let names = [prefix!]
    for (const [, set] of classes!.matchAll(/\[([\d-]+)\]/g)) names = names.flatMap((name) => digitClass(set!).map((digit) => name + digit))
    found.push(...names.map(Number))
  }
  for (const [, minor] of source.matchAll(/\bb ?7:(\d+)\b/g)) found.push(Number(minor))
  const calls = /\b(?:addLoopDevice|removeLoopDevice|add|addWithFileSystem|drop|plug|unplug|addLoops|record|readLoop|readsDisk|reads|loopRules|expectNoDevice|attachBacking|mountOnNode)\(([^()]*)\)/g
  for (const [, args] of source.matchAll(calls)) for (const [literal] of args!.matchAll(/(?<![\w.'"`-])\d+(?![\w.])/g)) found.push(Number(literal))
  for (const [, value] of source.matchAll(/\b(?:index|loopIndex|loopBase|loop|\w+Loop|replugBase)\s*[:=]\s*(\d+)\b(?!\s*\+)/g)) found.push(Number(value))
  for (const [, list] of source.matchAll(/\b(?:loops\s*=|(?:index|i) of)\s*\[([\d,\s]+)\]/g)) found.push(...list!.split(',').map(Number))
  for (const [, from, count] of source.matchAll(/\b(\d+) \+ Math\.floor\(Math\.random\(\) \* (\d+)\)/g)) found.push(Number(from), Number(from) + Number(count) - 1)
  return [...new Set(found.filter((index) => index >= 8))].sort((a, b) => a - b)
}

/** Each pair of owners (or an owner with itself) whose ranges share an index. */
function overlapsOf(owners: Ranges): string[] {
  const all = Object.entries(owners).flatMap(([owner, ranges]) => ranges.map(([first, last]) => ({first, last, owner})))
  const found: string[] = []
  for (const [i, a] of all.entries()) {
    if (a.first > a.last) found.push(`${a.owner}: ${a.first}-${a.last} is empty`)
    for (const b of all.slice(i + 1)) if (a.first <= b.last && b.first <= a.last) found.push(`${a.owner} ${a.first}-${a.last} and ${b.owner} ${b.first}-${b.last}`)
  }
  return found
}

/** What a source does with loop devices that its owner's ranges do not allow. */
function strays(path: string, source: string, owners: Ranges): string[] {
  if (!addsLoopDevices(source)) return []
  const ranges = owners[path]
  if (ranges === undefined) return [`${path} adds loop devices but owns no range in harness/devices/loop-owners.ts`]
  const outside = loopIndexesIn(source).filter((index) => !ranges.some(([first, last]) => first <= index && index <= last))
  return outside.length === 0 ? [] : [`${path} uses loop ${outside.join(', ')} outside its ranges ${ranges.map(([f, l]) => `${f}-${l}`).join(', ')}`]
}

async function sourcesUnder(top: string): Promise<string[]> {
  const entries = await readdir(join(repo, top), {recursive: true, withFileTypes: true})
  return entries.filter((entry) => entry.isFile() && /\.(?:ts|mjs|cjs)$/.test(entry.name)).map((entry) => relative(repo, join(entry.parentPath, entry.name)))
}

describe('loop device owners (harness/devices/loop-owners.ts)', function () {
  it('gives no index to two owners', function () {
    expect(overlapsOf(loopOwners)).to.deep.equal([])
  })

  it('names files that exist', async function () {
    const files = new Set([...(await sourcesUnder('test/e2e')), ...(await sourcesUnder('bench')), ...(await sourcesUnder('scripts'))])
    expect(Object.keys(loopOwners).filter((owner) => !files.has(owner))).to.deep.equal([])
  })

  it('holds every file under test/e2e, bench/ and scripts/ that adds loop devices to its own ranges', async function () {
    const files = [...(await sourcesUnder('test/e2e')), ...(await sourcesUnder('bench')), ...(await sourcesUnder('scripts'))]
    const found: string[] = []
    let adders = 0
    for (const path of files) {
      const source = await readFile(join(repo, path), 'utf8')
      if (addsLoopDevices(source)) adders++
      found.push(...strays(path, source, loopOwners))
    }
    expect(found).to.deep.equal([])
    expect(adders, 'the files that add loop devices, as the scan finds them').to.be.at.least(Object.keys(loopOwners).length - 2)
  })

  it('fails on an overlap, an unregistered adder and an index outside its owner (planted)', function () {
    expect(overlapsOf({a: [[510, 519]], b: [[519, 520]]})).to.deep.equal(['a 510-519 and b 519-520'])
    expect(overlapsOf({a: [[5, 4]]})).to.deep.equal(['a: 5-4 is empty'])
    const owners = {'test/e2e/a.test.ts': [[510, 519]]} as const
    expect(strays('test/e2e/b.test.ts', 'addLoopDevice(700)', owners)).to.deep.equal(['test/e2e/b.test.ts adds loop devices but owns no range in harness/devices/loop-owners.ts'])
    expect(strays('test/e2e/a.test.ts', 'await loops.add(512)\nawait loops.add(520)', owners)).to.deep.equal(['test/e2e/a.test.ts uses loop 520 outside its ranges 510-519'])
    expect(strays('test/e2e/a.test.ts', 'addLoopDevice(index)\nconst index = 500 + Math.floor(Math.random() * 20)', owners)).to.have.length(1)
  })

  it('reads loop indexes as the sources write them', function () {
    const source = [
      "match: [{devName: 'loop38[67]'}, {devName: \"loop9[0-1][0-2]\"}, {devName: 'loop99['}]",
      "expect(rules).to.deep.equal(['b 7:391 rw']); writeFile('/sys/block/loop840/loop840p1')",
      'await plug(461, "a"); await readLoop(env.node, pod.containerId, 462); addLoops(300, 301); loops.add(i)',
      'const loopBase = 600; const pluginLoop = 530; a = {loop: 490}; for (const index of [805, 807]) {}',
      'const loops = [820, 821] as const; const index = 250 + Math.floor(Math.random() * 5); timeoutMs: 10_000; add(5)',
    ].join('\n')
    expect(loopIndexesIn(source)).to.deep.equal([250, 254, 300, 301, 386, 387, 391, 461, 462, 490, 530, 600, 805, 807, 820, 821, 840, 900, 901, 902, 910, 911, 912])
  })
})
