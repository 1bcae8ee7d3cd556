import {expect} from 'chai'

import {refusedLines, type Plant} from '../support/lint-plants.js'

// The floors of docs/architecture.md are biome rules (biome.jsonc's overrides). Planted imports, linted with the
// repository's own configuration in a scratch directory, show that each rule fails the lint and that the imports
// the floors allow pass it.

/** File → the one import it makes → whether the floors forbid it. */
const planted: ReadonlyArray<readonly [string, string, boolean]> = [
  ['src/lib/sys/up.ts', '../kube/kube-client.js', true],
  ['src/lib/devices/up.ts', '../agent/node-agent.js', true],
  ['src/lib/kubelet/up.ts', '../plugins/plugin-set.js', true],
  ['src/lib/runtime/up.ts', '../dra/claim-cdi.js', true],
  ['src/lib/kube/up.ts', '../gc/sweep.js', true],
  ['src/lib/observe/up.ts', '../agent/node-agent.js', true],
  ['src/lib/dra/sideways.ts', '../plugins/class-cdi.js', true],
  ['src/lib/plugins/sideways.ts', '../dra/claim-cdi.js', true],
  ['src/lib/gc/sideways.ts', '../agent/node-agent.js', true],
  ['src/lib/agent/sideways.ts', '../dra/dra-driver.js', true],
  ['src/lib/agent/plugins.ts', '../plugins/plugin-set.js', true],
  ['src/lib/doctor/sideways.ts', '../dra/resource-slices.js', true],
  ['src/lib/kube/up-to-doctor.ts', '../doctor/findings.js', true],
  ['src/lib/plugins/terminal.ts', 'ora', true],
  ['src/lib/dra/down.ts', '../kubelet/dra-api.js', false],
  ['src/lib/plugins/down.ts', '../runtime/cdi-spec.js', false],
  ['src/lib/devices/down.ts', '../kube/kube-client.js', false],
  ['src/lib/kubelet/down.ts', '../sys/atomic-write.js', false],
  ['src/lib/sys/root.ts', '../errors.js', false],
  ['src/lib/agent/down.ts', '../devices/class-store.js', false],
  ['src/lib/doctor/down.ts', '../devices/cluster-classes.js', false],
]

describe('the floors of src/lib are lint rules', function () {
  it('fails the lint on each import across a floor, and on nothing else', async function () {
    const plants: Plant[] = planted.map(([path, from]) => ({lines: [`import * as planted from '${from}'`, '', 'export const used = planted', ''], path, refused: []}))
    const flagged = new Set((await refusedLines(plants)).keys())
    expect([...flagged].sort()).to.deep.equal(
      planted
        .filter(([, , forbidden]) => forbidden)
        .map(([file]) => file)
        .sort(),
    )
  })
})
