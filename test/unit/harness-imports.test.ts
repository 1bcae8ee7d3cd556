import {readdir} from 'node:fs/promises'
import {join, relative} from 'node:path'
import {fileURLToPath} from 'node:url'

import {expect} from 'chai'

import {refusedLines, type Plant} from '../support/lint-plants.js'

// The import rules of biome.jsonc, held by running biome on planted files: nothing under src/ imports harness/
// or test/, and harness/, bench/ and scripts/ import nothing from test/. Each folder of those trees gets a file
// of its own, because biome gives a file the options of the last override that matches it: an override added
// later for one folder that leaves the rule out shows up here as that folder's violation passing.
const repo = fileURLToPath(new URL('../..', import.meta.url))

/** The folders under `top` (itself included), relative to the repository. */
async function foldersOf(top: string): Promise<string[]> {
  const entries = await readdir(join(repo, top), {recursive: true, withFileTypes: true})
  return [top, ...entries.filter((entry) => entry.isDirectory()).map((entry) => relative(repo, join(entry.parentPath, entry.name)))]
}

/** An import line of `target` (a repository path) as a file in `folder` writes it. */
function importLine(folder: string, target: string, name: string): string {
  const specifier = relative(folder, target)
  return `import {${name}} from '${specifier.startsWith('.') ? specifier : `./${specifier}`}'`
}

/** A module with the import lines, in a folder; each imported name is used so no other rule speaks. */
function plant(folder: string, imports: ReadonlyArray<readonly [target: string, refused: boolean]>): Plant {
  const lines = imports.map(([target], i) => importLine(folder, target, `n${i}`))
  const refused = imports.flatMap(([, refuse], i) => (refuse ? [i + 1] : []))
  return {lines: [...lines, '', `export const used = [${imports.map((_, i) => `n${i}`).join(', ')}]`, ''], path: join(folder, 'planted-import.ts'), refused}
}

describe('import rules (biome.jsonc): the product, the harness and the tests', function () {
  it('refuses src/ → harness/ or test/, and harness/, bench/, scripts/ → test/, in every folder; lets the harness be imported from test/, bench/ and scripts/', async function () {
    this.timeout(60_000)
    const harness = 'harness/process/wait.js'
    const tests = 'test/support/thrown.js'
    const plants = [
      ...(await foldersOf('src')).map((folder) =>
        plant(folder, [
          [harness, true],
          [tests, true],
        ]),
      ),
      ...(await foldersOf('harness')).map((folder) =>
        plant(folder, [
          [tests, true],
          ['harness/controlplane/paths.js', false],
        ]),
      ),
      ...[...(await foldersOf('bench')), ...(await foldersOf('scripts'))].map((folder) =>
        plant(folder, [
          [tests, true],
          [harness, false],
        ]),
      ),
      plant('test/unit', [[harness, false]]),
    ]
    const refused = await refusedLines(plants)
    const wrong = plants.flatMap(({path, refused: expected}) => {
      const got = [...new Set(refused.get(path))].sort((a, b) => a - b) // a line two patterns refuse is reported twice
      return got.join() === expected.join() ? [] : [`${path}: refused lines [${got.join(', ')}], expected [${expected.join(', ')}]`]
    })
    expect(wrong, 'each folder holds the rule (an override of noRestrictedImports must repeat it)').to.deep.equal([])
  })
})
